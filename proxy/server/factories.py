"""The concrete adapters, built from settings: `make_store`, `make_workspace`, `make_upstream`,
`make_responses_upstream`, `make_summarizer`.

Each picks the adapter its settings name (`memory://` or Redis; Anthropic or OpenAI-compatible)
and constructs it with explicit arguments; nothing is opened or connected here. `create_app`
(`proxy.server.app`) calls them in its `cleanup_ctx` and owns what they return (closing it on
shutdown); the CLI's bootstrap preview and the benchmarks call `make_workspace` directly.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp

from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.redis.store import RedisStore
from proxy.adapters.summarizer import (
    AnthropicSummarizer,
    OpenAIResponsesSummarizer,
    OpenAISummarizer,
)
from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from proxy.adapters.upstream.openai_chat import OpenAIUpstream
from proxy.adapters.upstream.transport import timeouts_of
from proxy.adapters.workspace import FileWorkspace
from proxy.ports import ResponsesUpstream, StateStore, Summarizer, Upstream, WorkspaceSource
from proxy.settings import Settings, UpstreamSettings


def make_store(settings: Settings) -> StateStore:
    store = settings.store
    if store.url.startswith("memory://"):
        workspaces = workspaces_of(settings)

        def archive_dir(tenant: str) -> Path | None:
            found = workspaces.get(tenant)
            return found / "sessions" if found is not None else None

        def facts_dir(tenant: str) -> Path | None:
            found = workspaces.get(tenant)
            return found / "memory" if found is not None else None

        return MemoryStore(
            session_ttl_s=store.session_ttl_s, archive_dir_for=archive_dir, facts_dir_for=facts_dir
        )
    return RedisStore(
        store.url,
        key_prefix=store.key_prefix,
        session_ttl_s=store.session_ttl_s,
        op_timeout_s=store.op_timeout_s,
    )


def make_workspace(settings: Settings) -> WorkspaceSource:
    managed = next(
        (t.bootstrap.managed_dir for t in settings.tenants.values() if t.bootstrap.managed_dir),
        None,
    )
    return FileWorkspace(
        workspaces=workspaces_of(settings), managed_dir=Path(managed) if managed else None
    )


def workspaces_of(settings: Settings) -> dict[str, Path]:
    """The tenants that have a workspace, and its folder."""
    return {name: t.workspace for name, t in settings.tenants.items() if t.workspace is not None}


def make_upstream(
    upstream: UpstreamSettings, http: aiohttp.ClientSession, *, via: str | None = None
) -> Upstream:
    """`via`: this proxy's instance id, the loop marker its upstream requests carry."""
    timeouts = timeouts_of(upstream)
    if upstream.kind == "anthropic":
        return AnthropicUpstream(
            session=http,
            base_url=upstream.base_url,
            api_key=upstream.api_key,
            default_max_tokens=upstream.default_max_tokens,
            cache_diagnostics=upstream.cache_diagnostics,
            timeouts=timeouts,
            via=via,
        )
    return OpenAIUpstream(
        session=http,
        base_url=upstream.base_url,
        api_key=upstream.api_key,
        timeouts=timeouts,
        via=via,
    )


def make_responses_upstream(
    upstream: UpstreamSettings, http: aiohttp.ClientSession, *, via: str | None = None
) -> ResponsesUpstream | None:
    """The upstream a Responses request is sent to natively (`api = "responses"`), else None:
    the request is translated for `make_upstream`'s."""
    if upstream.api != "responses":
        return None
    return OpenAIUpstream(
        session=http,
        base_url=upstream.base_url,
        api_key=upstream.api_key,
        timeouts=timeouts_of(upstream),
        via=via,
    )


def make_summarizer(upstream: UpstreamSettings, *, via: str | None = None) -> Summarizer:
    """Through the API the upstream speaks (`api = "responses"`: `/responses`, which a server
    may speak alone); `via`: as for `make_upstream`."""
    kind: type[AnthropicSummarizer | OpenAISummarizer] = OpenAISummarizer
    if upstream.kind == "anthropic":
        kind = AnthropicSummarizer
    elif upstream.api == "responses":
        kind = OpenAIResponsesSummarizer
    return kind(
        base_url=upstream.base_url, api_key=upstream.api_key, timeout_s=upstream.timeout_s, via=via
    )
