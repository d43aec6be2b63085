"""The `ctxproxy` command: serve, keys, bootstrap preview, sessions, memory, demo.

Every mistake on the command line or in the config is one line on stderr and exit status 2:
a usage error names the flag, a config error the file and the key, a socket that cannot be
bound the address and the settings that choose it.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, cast

from proxy import __version__
from proxy.errors import ConfigError
from proxy.logs import LOG_LEVELS
from proxy.settings import Settings, check_workers_share_a_store


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (the full usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


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
    parser = Parser(prog="ctxproxy", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"ctxproxy {__version__}")
    # Subcommands are `Parser`s too (argparse makes them of the parent's class).
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command"),
    )
    serve = commands.add_parser("serve", help="run the proxy")
    _config_option(serve)
    serve.add_argument("--host", help="address to listen on (default: [server] host, 127.0.0.1)")
    serve.add_argument(
        "--port", type=port_number, help="port to listen on (default: [server] port, 8787)"
    )
    serve.add_argument(
        "--workers",
        type=worker_count,
        help="processes serving the port, each on a core (default: [server] workers, 1); "
        "more than 1 needs a Redis store",
    )
    serve.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help=f"{', '.join(LOG_LEVELS)}: INFO logs one line per request, WARNING only "
        "problems (default: $CTXPROXY_LOG_LEVEL, else INFO)",
    )
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
    preview.add_argument("--tenant", default="default", help="the tenant (default: default)")
    preview.add_argument(
        "--session", default="preview", help="the session whose layer to add (default: preview)"
    )
    preview.set_defaults(run=run_bootstrap)
    add_extra_commands(commands)
    return parser


def port_number(text: str) -> int:
    """`--port`: an integer from 0 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 65535, not {text!r}")
    return port


def worker_count(text: str) -> int:
    """`--workers`: an integer from 1 to 256."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= 256:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to 256, not {text!r}")
    return count


def add_extra_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sessions`, `memory` and `demo` live in their own modules."""
    from proxy.cli.memory import add_memory_command
    from proxy.cli.sessions import add_sessions_command
    from proxy.demo.command import add_demo_command

    add_sessions_command(commands)
    add_memory_command(commands)
    add_demo_command(commands)


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        help="TOML config (default: $CTXPROXY_CONFIG, else built-in defaults)",
    )


def run_serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from proxy.server.app import create_app
    from proxy.server.runner import serve
    from proxy.server.workers import serve_workers

    settings = serve_settings(args)
    server = settings.server
    store = settings.store.url.split("@")[-1]
    workers = f", {server.workers} workers" if server.workers > 1 else ""

    def serving(url: str) -> None:
        logging.getLogger("proxy").info(
            "ctxproxy serving on %s (store %s, config %s%s)", url, store, settings.source, workers
        )

    try:
        if server.workers > 1:
            return serve_workers(settings, count=server.workers, on_serving=serving)
        asyncio.run(
            serve(
                create_app(settings),
                host=server.host,
                port=server.port,
                drain_s=server.drain_timeout_s,
                on_serving=serving,
            )
        )
    except OSError as exc:
        print(f"ctxproxy: {listen_error(exc, settings)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C during the drain
        print("ctxproxy: stopped without finishing the drain", file=sys.stderr)
        return 130
    return 0


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings `serve` runs with: the config, then the flags over its `[server]` table;
    logging configured, and refused (`ConfigError`) when an upstream is the proxy itself or
    several workers would not share one store."""
    from dataclasses import replace

    from proxy.cli.preflight import check_upstreams_are_not_self
    from proxy.config import cli_log_level, load_settings
    from proxy.logs import configure_logging

    level = args.log_level or cli_log_level(os.environ)
    settings = load_settings(args.config, environ=os.environ)
    configure_logging(level)
    server = replace(
        settings.server,
        host=args.host or settings.server.host,
        port=settings.server.port if args.port is None else args.port,
        workers=args.workers or settings.server.workers,
    )
    settings = replace(settings, server=server)
    check_upstreams_are_not_self(settings)
    check_workers_share_a_store(settings, from_flag=args.workers is not None)
    return settings


def listen_error(exc: OSError, settings: Settings) -> str:
    """One line: the address, why it cannot be listened on, and which settings choose it."""
    name = "port" if exc.errno in (errno.EADDRINUSE, errno.EACCES) else "host"
    where = f"--{name}, CTXPROXY_{name.upper()} or [server] {name}"
    if settings.source != "<defaults>":
        where += f" in {settings.source}"
    # asyncio words a bind error at length; the errno's own text is what the user needs
    reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror or str(exc)
    server = settings.server
    return f"cannot listen on {server.host}:{server.port}: {reason} (see {where})"


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
    facts = learned_facts(settings, args.tenant, args.session)
    static, dynamic = assemble_system(view, settings=tenant.bootstrap, facts=facts)
    print("=== static part (cached, identical on every request) ===")
    print(static or "(empty)")
    print("=== client system content goes here ===")
    print("=== dynamic part (per user and session) ===")
    print(dynamic or "(empty)")
    return 0


def learned_facts(settings: Settings, tenant: str, session: str) -> tuple[str, ...]:
    """The facts the tenant's compactions learned, from the configured store (the embedded
    store's are read from the workspace's files); none when memory is off or the store is down
    (said on stderr)."""
    import asyncio

    from proxy.server.factories import make_store

    memory = settings.tenants[tenant].memory
    if not memory.enabled:
        return ()

    async def read() -> tuple[str, ...]:
        store = make_store(settings)
        try:
            return await store.read_facts(tenant, memory.owner(session))
        finally:
            await store.close()

    try:
        return asyncio.run(read())
    except Exception as exc:
        print(f"ctxproxy: learned facts not shown: {type(exc).__name__}: {exc}", file=sys.stderr)
        return ()
