"""The frozen settings tree that `proxy.config` builds from the TOML file (DESIGN §5), and the
store address `[store] url` names (`parse_store_url`), the defaults that depend on the upstream
(`cache_cold_after_s`) and the check that workers share a store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit

from proxy.compaction.policy import CompactSettings
from proxy.errors import ConfigError, InvalidSetting
from proxy.memory.ledger import MemorySettings
from proxy.recall.tool import RecallSettings
from proxy.stages.bootstrap import BootstrapSettings
from proxy.stages.budgets import BudgetSettings
from proxy.stages.cache import CacheSettings
from proxy.stages.marker import Ttl
from proxy.stages.prune import PruneSettings
from proxy.types import CacheStyle

_CACHE_LIFE_S = MappingProxyType({"5m": 300.0, "1h": 3600.0})
OPENAI_CACHE_LIFE_S = 600.0
"""OpenAI keeps an unused prefix 5 to 10 minutes: pruning waits for the longer."""


def cache_cold_after_s(cache_style: CacheStyle, ttl: Ttl) -> float:
    """The `prune.when_cache_cold_s` a tenant gets when it sets none: how long its upstream's
    prompt cache keeps an unused prefix, so that pruning cuts only what the provider has dropped
    anyway. `anthropic`: the breakpoints' `ttl`; `openai`: 10 minutes; `none`: 0 (no cache to
    keep warm: prune on every request)."""
    if cache_style == "anthropic":
        return _CACHE_LIFE_S[ttl]
    return OPENAI_CACHE_LIFE_S if cache_style == "openai" else 0.0


@dataclass(frozen=True, slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8787
    max_body_bytes: int = 33_554_432
    admin_keys: tuple[str, ...] = ()
    drain_timeout_s: float = 30.0
    workers: int = 1
    """Processes serving the one port (`ctxproxy serve --workers N`); above 1 needs Redis."""
    secret_env: str | None = None
    """The variable holding the secret that signs compaction handles (Responses API); unset:
    one is generated once and kept in the store."""
    secret: str | None = field(default=None, repr=False)
    """Resolved from `secret_env` at load time; never logged (repr=False)."""
    prices: str = ""
    """The price table (`config/prices.toml`'s format). `load_settings` resolves it relative to
    the config file and, when the key is absent, takes `prices.toml` beside the config file if
    there is one; empty: no table, nothing is priced (`proxy.server.observe.bill`)."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidSetting("port", "must be between 0 and 65535")
        if not 1 <= self.workers <= 256:
            raise InvalidSetting("workers", "must be between 1 and 256")
        if self.max_body_bytes < 1:
            raise InvalidSetting("max_body_bytes", "must be at least 1")
        if self.drain_timeout_s < 0:
            raise InvalidSetting("drain_timeout_s", "must be 0 or more")


@dataclass(frozen=True, slots=True)
class StoreSettings:
    url: str = "memory://"
    key_prefix: str = "ctxproxy:"
    session_ttl_s: int = 604_800
    op_timeout_s: float = 0.5

    def __post_init__(self) -> None:
        for name in ("session_ttl_s", "op_timeout_s"):
            if getattr(self, name) <= 0:
                raise InvalidSetting(name, "must be above 0")
        parse_store_url(self.url)

    @property
    def shared(self) -> bool:
        """Whether several processes see the same state (Redis; not the embedded store)."""
        return parse_store_url(self.url).kind != "memory"


StoreKind = Literal["memory", "redis", "cluster", "sentinel"]
STORE_URLS = (
    "memory://, redis://host:port/db, rediss://…, unix://path, "
    "redis+cluster://host:port[,host:port…] (rediss+cluster://…) or "
    "redis+sentinel://host:port[,host:port…]/service_name"
)


@dataclass(frozen=True, slots=True)
class StoreAddress:
    """Where `[store] url` points. `redis`: one server, at `url` as redis-py reads it;
    `cluster`: a Redis Cluster, found from its `nodes`; `sentinel`: the primary that the
    sentinels at `nodes` name for `service`, database `db`."""

    kind: StoreKind
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def parse_store_url(url: str) -> StoreAddress:
    """`url` parsed; raises `InvalidSetting("url", why)` for any URL the store cannot use:
    an unknown scheme, a node without a port number, a cluster with a database number (a
    cluster has database 0 only), a Sentinel URL without its service name, options after `?`
    on a cluster or Sentinel URL."""
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme == "memory":
        return StoreAddress("memory", url)
    if scheme in ("redis", "rediss", "unix"):
        _check_single(url)
        return StoreAddress("redis", url)
    if scheme not in ("redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"):
        raise InvalidSetting("url", f"must be one of {STORE_URLS}")
    parts = urlsplit(url)
    kind: StoreKind = "cluster" if scheme.endswith("cluster") else "sentinel"
    if parts.query or parts.fragment:
        raise InvalidSetting("url", f"takes no options after '?' or '#' ({scheme}://)")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    nodes = tuple(_node(text) for text in hosts.split(","))
    path = [segment for segment in parts.path.split("/") if segment]
    address = StoreAddress(
        kind,
        url,
        nodes=nodes,
        tls=scheme.startswith("rediss"),
        username=unquote(username) or None,
        password=unquote(password) or None,
    )
    if kind == "cluster":
        if path:
            raise InvalidSetting(
                "url", f"a Redis Cluster has database 0 only: remove '{parts.path}'"
            )
        return address
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise InvalidSetting(
            "url", "must name the service: redis+sentinel://host:port[,host:port…]/service[/db]"
        )
    return replace(address, service=path[0], db=int(path[1]) if len(path) == 2 else 0)


def _node(text: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port`) of a cluster node or a sentinel."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidSetting("url", f"needs host:port for every node, not {text!r}")
    return host, int(port)


def _check_single(url: str) -> None:
    """A `redis://`, `rediss://` or `unix://` URL: a port, if any, and a database, if any, are
    numbers (any database number; redis-py reads it from the path or `?db=`)."""
    parts: SplitResult = urlsplit(url)
    try:
        parts.port  # noqa: B018 (it raises for a port that is not a number)
    except ValueError as exc:
        raise InvalidSetting("url", f"has a bad port: {exc}") from exc
    database = parts.path.strip("/") if parts.scheme != "unix" else ""
    if database and not database.isdigit():
        raise InvalidSetting("url", f"database must be a number, not {database!r}")


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    kind: Literal["openai", "anthropic"] = "openai"
    api: Literal["chat", "responses"] = "chat"
    """What a Responses client's request is sent as (`kind = "openai"` only): `responses`
    natively to `/responses`, `chat` translated to `/chat/completions`."""
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    cache_style: CacheStyle = "openai"
    timeout_s: float = 600.0
    connect_timeout_s: float = 5.0
    first_byte_timeout_s: float = 120.0
    idle_timeout_s: float = 300.0
    send_prompt_cache_key: bool = True
    """With `cache_style = "openai"`: a stable `prompt_cache_key` per session (when the client
    sent none). Other styles never send one."""
    cache_diagnostics: bool = False
    """With `kind = "anthropic"`: ask for the provider's own cache-miss diagnostics (the
    session's previous message id as `diagnostics.previous_message_id`); its reason is recorded
    beside ctxproxy's. OpenAI's chat completions have no such option: true on another kind is
    refused."""
    default_max_tokens: int = 4096
    max_output_tokens: int | None = None
    """The most output tokens a Messages client's request may ask an OpenAI-compatible upstream
    for: a larger `max_tokens` (Claude Code asks for 32,000) is lowered to it. None: as asked."""
    name: str = ""
    api_key: str | None = field(default=None, repr=False)
    """Resolved from `api_key_env` at load time; never logged (repr=False)."""

    def __post_init__(self) -> None:
        if self.api == "responses" and self.kind != "openai":
            raise InvalidSetting("api", '"responses" is for kind = "openai" only')
        if self.cache_diagnostics and self.kind != "anthropic":
            raise InvalidSetting(
                "cache_diagnostics",
                'is for kind = "anthropic" only (an OpenAI-compatible upstream\'s chat '
                "completions have no cache-miss diagnostics)",
            )
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise InvalidSetting("max_output_tokens", "must be at least 1")


@dataclass(frozen=True, slots=True)
class TenantSettings:
    name: str = "default"
    keys: tuple[str, ...] = ()
    forward_client_key: bool = True
    workspace: Path | None = None
    """The bootstrap files' folder (and the embedded store's archive); None: nothing added."""
    upstream: str = "openai"
    model_window: int | None = None
    report_usage: Literal["upstream", "client"] = "upstream"
    """The usage an answer in an inbound API's own shape (Messages, Responses) reports.
    `upstream`: as the upstream reported it (what is billed); `client`: input tokens scaled to
    the client's full history (a client that compacts by its own usage figures then still
    does)."""
    messages_markers_stop_pruning: bool = False
    """`/v1/messages`: whether the client's `cache_control` markers on messages keep pruning
    off everything before the last one, as a chat client's do. Claude Code marks its newest
    turn on every request, so `True` means no pruning for it; `False` keeps its markers where
    it put them and lets older tool results be pruned by pruning's own rules (sticky decisions,
    taken once the cache has gone cold by default)."""
    bootstrap: BootstrapSettings = field(default_factory=BootstrapSettings)
    prune: PruneSettings = field(default_factory=PruneSettings)
    budgets: BudgetSettings = field(default_factory=BudgetSettings)
    compact: CompactSettings = field(default_factory=CompactSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    recall: RecallSettings = field(default_factory=RecallSettings)


@dataclass(frozen=True, slots=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    upstreams: Mapping[str, UpstreamSettings] = field(default_factory=dict)
    tenants: Mapping[str, TenantSettings] = field(default_factory=dict)
    source: str = "<defaults>"


def check_workers_share_a_store(settings: Settings, *, from_flag: bool = False) -> None:
    """Raise `ConfigError` for more than one worker on the embedded store: each process would
    hold its own sessions, and a session's requests would land on any of them. Checked once
    the worker count is final (`serve`, after `--workers`)."""
    if settings.server.workers > 1 and not settings.store.shared:
        raise ConfigError(
            f"{settings.server.workers} workers need a shared store (redis://, "
            "redis+cluster:// or redis+sentinel:// in [store] url): with the embedded store "
            "each worker would keep its own sessions",
            key="--workers" if from_flag else "server.workers",
            file="<command line>" if from_flag else settings.source,
        )
