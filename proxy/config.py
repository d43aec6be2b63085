"""Load and validate the TOML config (DESIGN §5). The only module that reads the environment,
and it takes `environ` as a parameter.

Every key is checked once at start-up: an unknown key, a wrong type or a bad value raises
`ConfigError` naming the key and the file. Paths are relative to the config file.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from proxy.config_tables import build_table, expect_table
from proxy.errors import ConfigError
from proxy.logs import LOG_LEVELS
from proxy.settings import (
    ServerSettings,
    Settings,
    StoreSettings,
    TenantSettings,
    UpstreamSettings,
)

TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")
STAGES = ("bootstrap", "prune", "budgets", "compact", "cache", "recall")
"""A tenant's sub-tables, one settings object each."""
INTERNAL = frozenset({"recall_tool"})
"""Settings fields the tenant's stack sets from other tables: never TOML keys."""


def load_settings(path: Path | None, *, environ: Mapping[str, str]) -> Settings:
    """Settings from `path` (or `CTXPROXY_CONFIG`, or built-in defaults), then env overrides."""
    if path is None and environ.get("CTXPROXY_CONFIG"):
        path = Path(environ["CTXPROXY_CONFIG"])
    settings = default_settings(environ) if path is None else _from_file(path, environ)
    return _with_env_overrides(settings, environ)


def cli_key(flag: str | None, *, environ: Mapping[str, str]) -> str | None:
    """The bearer token the CLI sends to a running proxy: `--key`, else `CTXPROXY_KEY`."""
    return flag or environ.get("CTXPROXY_KEY")


def cli_log_level(environ: Mapping[str, str]) -> str:
    """`ctxproxy serve`'s default `--log-level`: `CTXPROXY_LOG_LEVEL` (any case), else INFO."""
    level = environ.get("CTXPROXY_LOG_LEVEL", "INFO").upper()
    if level not in LOG_LEVELS:
        raise ConfigError(
            f"must be one of {', '.join(LOG_LEVELS)}",
            key="CTXPROXY_LOG_LEVEL",
            file="<environment>",
        )
    return level


def demo_dir(environ: Mapping[str, str]) -> Path:
    """`ctxproxy demo`'s folder without `--workdir`, kept between runs:
    `$XDG_CACHE_HOME/ctxproxy/demo`, else `~/.cache/ctxproxy/demo`."""
    cache = environ.get("XDG_CACHE_HOME")
    if not cache or not Path(cache).is_absolute():  # the XDG spec ignores a relative path
        cache = str(Path(environ.get("HOME") or Path.home()) / ".cache")
    return Path(cache) / "ctxproxy" / "demo"


def default_settings(environ: Mapping[str, str]) -> Settings:
    """No config: the embedded store, tenant `default`, the upstream from `OPENAI_BASE_URL`.

    The tenant has no workspace (DESIGN §5): nothing is prepended to a stranger's traffic,
    whatever the current folder. The sample workspace serves the example config and the demo."""
    upstream = UpstreamSettings(
        name="openai",
        base_url=environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=environ.get("OPENAI_API_KEY") or None,
    )
    return Settings(upstreams={"openai": upstream}, tenants={"default": TenantSettings()})


def _from_file(path: Path, environ: Mapping[str, str]) -> Settings:
    file = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", key="<file>", file=file) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", key="<file>", file=file) from exc
    unknown = set(raw) - {"server", "store", "upstreams", "tenants"}
    if unknown:
        raise ConfigError("unknown section", key=sorted(unknown)[0], file=file)
    base = path.resolve().parent
    server = build_table(ServerSettings, raw.get("server", {}), "server", file)
    for digest in server.admin_keys:
        _check_digest(digest, "server.admin_keys", file)
    store = build_table(StoreSettings, raw.get("store", {}), "store", file)
    _check_store_url(store.url, file)
    upstreams = {
        name: _upstream(name, table, environ, file)
        for name, table in expect_table(raw.get("upstreams", {}), "upstreams", file).items()
    }
    if not upstreams:
        upstreams = dict(default_settings(environ).upstreams)
    tenants = {
        name: _tenant(name, table, upstreams, base, file)
        for name, table in expect_table(raw.get("tenants", {}), "tenants", file).items()
    }
    if not tenants:
        tenants = {"default": _default_tenant(upstreams, environ, file)}
    return Settings(server=server, store=store, upstreams=upstreams, tenants=tenants, source=file)


def _upstream(name: str, table: Any, environ: Mapping[str, str], file: str) -> UpstreamSettings:
    where = f"upstreams.{name}"
    table = expect_table(table, where, file)
    kind = table.get("kind", "openai")
    defaults = UpstreamSettings(name=name)
    if kind == "anthropic":
        defaults = replace(
            defaults,
            kind="anthropic",
            base_url="https://api.anthropic.com",
            api_key_env="ANTHROPIC_API_KEY",
            cache_style="anthropic",
        )
    allowed = {f.name for f in fields(UpstreamSettings)} - {"name", "api_key"}
    upstream = build_table(UpstreamSettings, table, where, file, base=defaults, allowed=allowed)
    if upstream.kind not in ("openai", "anthropic"):
        raise ConfigError('must be "openai" or "anthropic"', key=f"{where}.kind", file=file)
    if upstream.cache_style not in ("openai", "anthropic", "none"):
        raise ConfigError(
            "must be openai, anthropic or none", key=f"{where}.cache_style", file=file
        )
    if not re.match(r"^https?://", upstream.base_url):
        raise ConfigError("must be an http(s) URL", key=f"{where}.base_url", file=file)
    return replace(upstream, api_key=environ.get(upstream.api_key_env) or None)


def _tenant(
    name: str, table: Any, upstreams: Mapping[str, UpstreamSettings], base: Path, file: str
) -> TenantSettings:
    where = f"tenants.{name}"
    if not TENANT_NAME.match(name):
        raise ConfigError("tenant names are 1-64 of [A-Za-z0-9_-]", key=where, file=file)
    table = dict(expect_table(table, where, file))
    stages = {stage: table.pop(stage, {}) for stage in STAGES}
    allowed = {f.name for f in fields(TenantSettings)} - {"name", *STAGES}
    tenant = build_table(TenantSettings, table, where, file, allowed=allowed)
    for digest in tenant.keys:
        _check_digest(digest, f"{where}.keys", file)
    if tenant.upstream not in upstreams:
        raise ConfigError(
            f"names no [upstreams.{tenant.upstream}]", key=f"{where}.upstream", file=file
        )
    built = {
        stage: _stage(tenant, stage, stages[stage], f"{where}.{stage}", file) for stage in STAGES
    }
    summarizer = built["compact"].summarizer_upstream
    if summarizer is not None and summarizer not in upstreams:
        raise ConfigError(
            f"names no [upstreams.{summarizer}]",
            key=f"{where}.compact.summarizer_upstream",
            file=file,
        )
    managed = built["bootstrap"].managed_dir
    if managed is not None and not Path(managed).is_absolute():
        built["bootstrap"] = replace(
            built["bootstrap"], managed_dir=str((base / managed).resolve())
        )
    workspace = _workspace(tenant.workspace, base, f"{where}.workspace", file)
    return replace(tenant, name=name, workspace=workspace, **built)


def _stage(tenant: TenantSettings, stage: str, table: Any, where: str, file: str) -> Any:
    """One of the tenant's sub-tables, as its settings object."""
    cls = type(getattr(tenant, stage))
    allowed = {f.name for f in fields(cls)} - INTERNAL
    return build_table(cls, table, where, file, allowed=allowed)


def _workspace(path: Path | None, base: Path, key: str, file: str) -> Path | None:
    """A configured workspace, relative to the config file's folder (never to the current
    one); it must be a folder: a missing one or a file is a config error, not a silent nothing."""
    if path is None:
        return None
    resolved = (base / path).resolve()  # an absolute `path` stays as it is
    if not resolved.is_dir():
        problem = "is not a folder" if resolved.exists() else "does not exist"
        raise ConfigError(f"{resolved} {problem}", key=key, file=file)
    return resolved


def _default_tenant(
    upstreams: Mapping[str, UpstreamSettings], environ: Mapping[str, str], file: str
) -> TenantSettings:
    """No `[tenants]`: tenant `default` as without a config, on upstream `openai` (configured or
    the default one) or else the only upstream configured."""
    tenant = default_settings(environ).tenants["default"]
    if tenant.upstream in upstreams:
        return tenant
    if len(upstreams) == 1:
        return replace(tenant, upstream=next(iter(upstreams)))
    raise ConfigError(
        "without [tenants.NAME], one of several upstreams must be named openai",
        key="tenants",
        file=file,
    )


def _check_digest(value: str, key: str, file: str) -> None:
    if not DIGEST.match(value):
        raise ConfigError(
            "must be sha256 hex digests (see `ctxproxy keys hash`)", key=key, file=file
        )


def _check_store_url(url: str, file: str) -> None:
    if not re.match(r"^(memory://|rediss?://|unix://)", url):
        raise ConfigError(
            "must be memory://, redis://, rediss:// or unix://", key="store.url", file=file
        )


def check_upstreams_are_not_self(settings: Settings) -> None:
    """Raise `ConfigError` when an upstream's `base_url` is the proxy's own listen address
    (same port; loopback, `localhost` and the wildcard addresses count as one host): every
    request would come back to the proxy itself. Checked once the address is final (`serve`)."""
    server = settings.server
    for name, upstream in settings.upstreams.items():
        if _same_address(upstream.base_url, server.host, server.port):
            from_env = settings.source == "<defaults>"
            key = "OPENAI_BASE_URL" if from_env else f"upstreams.{name}.base_url"
            raise ConfigError(
                f"{upstream.base_url} is this proxy's own address ({server.host}:{server.port});"
                " every request would come back to it",
                key=key,
                file="<environment>" if from_env else settings.source,
            )


def _same_address(url: str, host: str, port: int) -> bool:
    parts = urlsplit(url)
    try:
        url_port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # not a port number: not an address either
        return False
    url_host, host = (parts.hostname or "").lower(), host.strip("[]").lower()
    return url_port == port and (url_host == host or (_is_local(url_host) and _is_local(host)))


def _is_local(host: str) -> bool:
    """Loopback (127.0.0.0/8, ::1, `localhost`) or a wildcard (0.0.0.0, ::): this machine."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _with_env_overrides(settings: Settings, environ: Mapping[str, str]) -> Settings:
    server, store = settings.server, settings.store
    if environ.get("CTXPROXY_HOST"):
        server = replace(server, host=environ["CTXPROXY_HOST"])
    if environ.get("CTXPROXY_PORT"):
        try:
            server = replace(server, port=int(environ["CTXPROXY_PORT"]))
        except ValueError as exc:
            raise ConfigError(
                "must be an integer between 0 and 65535", key="CTXPROXY_PORT", file="<environment>"
            ) from exc
    if environ.get("CTXPROXY_STORE_URL"):
        _check_store_url(environ["CTXPROXY_STORE_URL"], "<environment>")
        store = replace(store, url=environ["CTXPROXY_STORE_URL"])
    return replace(settings, server=server, store=store)
