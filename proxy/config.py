"""Load and validate the TOML config (DESIGN §5). The only module that reads the environment,
and it takes `environ` as a parameter.

Every key is checked once at start-up: an unknown key, a wrong type or a bad value raises
`ConfigError` naming the key and the file. Paths are relative to the config file. A tenant that
sets no `prune.when_cache_cold_s` gets its upstream's cache lifetime (`cache_cold_after_s`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from proxy.config_tables import build_table, expect_table
from proxy.errors import ConfigError, InvalidSetting
from proxy.logs import LOG_LEVELS
from proxy.memory.ledger import MemorySettings
from proxy.settings import (
    ServerSettings,
    Settings,
    StoreSettings,
    TenantSettings,
    UpstreamSettings,
    cache_cold_after_s,
    check_workers_share_a_store,
)

TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")
MIN_SECRET_CHARS = 32  # a compaction handle secret's least length (bytes of its UTF-8)
STAGES = ("bootstrap", "prune", "budgets", "compact", "cache", "memory", "recall")
"""A tenant's sub-tables, one settings object each."""
INTERNAL = frozenset({"recall_tool"})
"""Settings fields the tenant's stack sets from other tables: never TOML keys."""


def load_settings(path: Path | None, *, environ: Mapping[str, str]) -> Settings:
    """Settings from `path` (or `CTXPROXY_CONFIG`, or built-in defaults), then env overrides."""
    if path is None and environ.get("CTXPROXY_CONFIG"):
        path = Path(environ["CTXPROXY_CONFIG"])
    settings = default_settings(environ) if path is None else _from_file(path, environ)
    settings = _with_env_overrides(settings, environ)
    check_workers_share_a_store(settings)
    return settings


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
    whatever the current folder. The sample workspace serves the example config and the demo.
    For the same reason it learns no facts: any bearer is this tenant, and a fact one client's
    conversation taught would be shown to every other (configure a tenant to have memory)."""
    upstream = UpstreamSettings(
        name="openai",
        base_url=environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=environ.get("OPENAI_API_KEY") or None,
    )
    tenant = TenantSettings(memory=MemorySettings(enabled=False))
    prune = replace(tenant.prune, when_cache_cold_s=cache_cold_after_s(upstream.cache_style, "5m"))
    tenant = replace(tenant, prune=prune)
    return Settings(upstreams={"openai": upstream}, tenants={"default": tenant})


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
    allowed = {f.name for f in fields(ServerSettings)} - {"secret"}
    server = build_table(ServerSettings, raw.get("server", {}), "server", file, allowed=allowed)
    for digest in server.admin_keys:
        _check_digest(digest, "server.admin_keys", file)
    server = _with_secret(server, environ, file)
    server = replace(server, prices=_prices(server.prices, base, file))
    store = build_table(StoreSettings, raw.get("store", {}), "store", file)
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
    if "when_cache_cold_s" not in stages["prune"]:
        cold = cache_cold_after_s(upstreams[tenant.upstream].cache_style, built["cache"].ttl)
        built["prune"] = replace(built["prune"], when_cache_cold_s=cold)
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


def _prices(path: str, base: Path, file: str) -> str:
    """The price table's path, relative to the config file's folder: a configured one must be a
    file; without the key, `prices.toml` beside the config file when it exists, else none."""
    if not path:
        beside = base / "prices.toml"
        return str(beside) if beside.is_file() else ""
    resolved = (base / path).resolve()
    if not resolved.is_file():
        problem = "is not a file" if resolved.exists() else "does not exist"
        raise ConfigError(f"{resolved} {problem}", key="server.prices", file=file)
    return str(resolved)


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


def _with_secret(server: ServerSettings, environ: Mapping[str, str], file: str) -> ServerSettings:
    """`server` with the compaction handles' secret read from `secret_env`, which must name a
    variable holding at least `MIN_SECRET_CHARS` characters."""
    if server.secret_env is None:
        return server
    secret = environ.get(server.secret_env) or ""
    if len(secret.encode()) < MIN_SECRET_CHARS:
        rule = f"names a variable that is unset or shorter than {MIN_SECRET_CHARS} characters"
        raise ConfigError(rule, key="server.secret_env", file=file)
    return replace(server, secret=secret)


def _check_digest(value: str, key: str, file: str) -> None:
    if not DIGEST.match(value):
        raise ConfigError(
            "must be sha256 hex digests (see `ctxproxy keys hash`)", key=key, file=file
        )


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
        try:
            store = replace(store, url=environ["CTXPROXY_STORE_URL"])
        except InvalidSetting as exc:
            raise ConfigError(exc.rule, key="CTXPROXY_STORE_URL", file="<environment>") from exc
    return replace(settings, server=server, store=store)
