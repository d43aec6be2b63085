"""The frozen settings tree that `proxy.config` builds from the TOML file (DESIGN §5), and the
defaults that depend on the upstream (`cache_cold_after_s`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from proxy.compaction.policy import CompactSettings
from proxy.errors import InvalidSetting
from proxy.memory.ledger import MemorySettings
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

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidSetting("port", "must be between 0 and 65535")
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


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    kind: Literal["openai", "anthropic"] = "openai"
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    cache_style: CacheStyle = "openai"
    timeout_s: float = 600.0
    connect_timeout_s: float = 5.0
    first_byte_timeout_s: float = 120.0
    idle_timeout_s: float = 300.0
    send_prompt_cache_key: bool = False
    default_max_tokens: int = 4096
    max_output_tokens: int | None = None
    """The most output tokens a Messages client's request may ask an OpenAI-compatible upstream
    for: a larger `max_tokens` (Claude Code asks for 32,000) is lowered to it. None: as asked."""
    name: str = ""
    api_key: str | None = field(default=None, repr=False)
    """Resolved from `api_key_env` at load time; never logged (repr=False)."""

    def __post_init__(self) -> None:
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
    """`/v1/messages`: the usage answers report. `upstream`: as the upstream reported it (what
    is billed); `client`: input tokens scaled to the client's full history (a client that
    compacts by its own usage figures then still does)."""
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


@dataclass(frozen=True, slots=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    upstreams: Mapping[str, UpstreamSettings] = field(default_factory=dict)
    tenants: Mapping[str, TenantSettings] = field(default_factory=dict)
    source: str = "<defaults>"
