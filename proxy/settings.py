"""The frozen settings tree that `proxy.config` builds from the TOML file (DESIGN §5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from proxy.compaction.policy import CompactSettings
from proxy.errors import InvalidSetting
from proxy.recall.tool import RecallSettings
from proxy.stages.bootstrap import BootstrapSettings
from proxy.stages.budgets import BudgetSettings
from proxy.stages.cache import CacheSettings
from proxy.stages.prune import PruneSettings
from proxy.types import CacheStyle


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
    name: str = ""
    api_key: str | None = field(default=None, repr=False)
    """Resolved from `api_key_env` at load time; never logged (repr=False)."""


@dataclass(frozen=True, slots=True)
class TenantSettings:
    name: str = "default"
    keys: tuple[str, ...] = ()
    forward_client_key: bool = True
    workspace: Path | None = None
    """The bootstrap files' folder (and the embedded store's archive); None: nothing added."""
    upstream: str = "openai"
    model_window: int | None = None
    bootstrap: BootstrapSettings = field(default_factory=BootstrapSettings)
    prune: PruneSettings = field(default_factory=PruneSettings)
    budgets: BudgetSettings = field(default_factory=BudgetSettings)
    compact: CompactSettings = field(default_factory=CompactSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    recall: RecallSettings = field(default_factory=RecallSettings)


@dataclass(frozen=True, slots=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    upstreams: Mapping[str, UpstreamSettings] = field(default_factory=dict)
    tenants: Mapping[str, TenantSettings] = field(default_factory=dict)
    source: str = "<defaults>"
