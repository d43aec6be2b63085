"""The `ctxproxy` command: serve, keys, bootstrap preview, sessions, demo."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from proxy.config import cli_log_level
from proxy.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        result: int = args.run(args)
    except ConfigError as exc:
        print(f"ctxproxy: config error: {exc}", file=sys.stderr)
        return 2
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxproxy", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the proxy")
    _config_option(serve)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--log-level", default=cli_log_level(os.environ))
    serve.set_defaults(run=run_serve)
    keys = commands.add_parser("keys", help="make or hash proxy keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    key_commands.add_parser("new", help="print a fresh token and its digest").set_defaults(
        run=run_keys_new
    )
    hash_cmd = key_commands.add_parser("hash", help="print the digest of a token")
    hash_cmd.add_argument("token", nargs="?", help="the token (read from stdin if absent)")
    hash_cmd.set_defaults(run=run_keys_hash)
    preview = commands.add_parser("bootstrap", help="print a tenant's assembled system content")
    _config_option(preview)
    preview.add_argument("--tenant", default="default")
    preview.add_argument("--session", default="preview")
    preview.set_defaults(run=run_bootstrap)
    add_extra_commands(commands)
    return parser


def add_extra_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sessions` and `demo` live in their own modules."""
    from proxy.cli_sessions import add_sessions_command
    from proxy.demo import add_demo_command

    add_sessions_command(commands)
    add_demo_command(commands)


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML config (default: $CTXPROXY_CONFIG)")


def run_serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from proxy.config import load_settings
    from proxy.logs import configure_logging
    from proxy.server.app import create_app
    from proxy.server.parser_errors import run_app

    configure_logging(args.log_level)
    settings = load_settings(args.config, environ=os.environ)
    server = settings.server
    server = replace(server, host=args.host or server.host, port=args.port or server.port)
    settings = replace(settings, server=server)
    logging.getLogger("proxy").info(
        "ctxproxy serving on http://%s:%d (store %s, config %s)",
        server.host,
        server.port,
        settings.store.url.split("@")[-1],
        settings.source,
    )
    run_app(
        create_app(settings),
        host=server.host,
        port=server.port,
        shutdown_timeout=server.drain_timeout_s,
    )
    return 0


def run_keys_new(args: argparse.Namespace) -> int:
    from proxy.server.keys import digest, new_token

    token = new_token()
    print(f"token:  {token}")
    print(f"digest: {digest(token)}")
    print("Give the token to the client; put the digest in the tenant's `keys`.")
    return 0


def run_keys_hash(args: argparse.Namespace) -> int:
    from proxy.server.keys import digest

    token = args.token or sys.stdin.readline().strip()
    print(digest(token))
    return 0


def run_bootstrap(args: argparse.Namespace) -> int:
    from proxy.config import load_settings
    from proxy.server.factories import make_workspace
    from proxy.stages.bootstrap import assemble_system

    settings = load_settings(args.config, environ=os.environ)
    tenant = settings.tenants.get(args.tenant)
    if tenant is None:
        print(f"ctxproxy: no tenant {args.tenant!r} in {settings.source}", file=sys.stderr)
        return 2
    view = make_workspace(settings).view(args.tenant, args.session)
    static, dynamic = assemble_system(view, settings=tenant.bootstrap)
    print("=== static part (cached, identical on every request) ===")
    print(static or "(empty)")
    print("=== client system content goes here ===")
    print("=== dynamic part (per user and session) ===")
    print(dynamic or "(empty)")
    return 0
