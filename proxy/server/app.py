"""`create_app(settings, ports=None)`: the one factory, wiring concrete adapters together.

Everything app-scoped is built in one `cleanup_ctx` and torn down in reverse: the HTTP client
session, the state store, the upstream adapters, the summarizers, the compactor, the engine (the
cache prewarms, `proxy.server.prewarm`, are cancelled after the background compactions).
`ports` lets a caller (tests, the demo) supply its own store or workspace. The adapters come from
`proxy.server.factories`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from proxy.compaction.compactor import Compactor
from proxy.compaction.trigger import BackgroundHook
from proxy.compaction.writeback import MemoryWriter
from proxy.cost.prices import PriceError, PriceTable, load_prices
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import build_stack, memo_bytes_per_tenant
from proxy.errors import ConfigError
from proxy.logs import redacted_url
from proxy.ports import StateStore, WorkspaceSource
from proxy.server import admin, memory_view
from proxy.server.appkeys import (
    ENGINE,
    HTTP,
    KEYRING,
    KNOWN_TOOLS,
    LIFECYCLE,
    OBSERVERS,
    SERVICES,
    SETTINGS,
    STORE,
    UPSTREAMS,
    Lifecycle,
    Services,
)
from proxy.server.body import KnownTools
from proxy.server.chat import chat_completions
from proxy.server.factories import (
    make_responses_upstream,
    make_store,
    make_summarizer,
    make_upstream,
    make_workspace,
)
from proxy.server.keys import KeyRing
from proxy.server.messages import count_tokens, messages
from proxy.server.middlewares import error_boundary, stamp_ids
from proxy.server.observe.bill import Biller
from proxy.server.observe.events import EventEmitter
from proxy.server.observe.metrics import METRICS, Metrics
from proxy.server.parser_errors import SERVER_HANDLER_ARGS
from proxy.server.passthrough import passthrough
from proxy.server.prewarm import PREWARMER, Prewarmer, in_turn
from proxy.server.responses import create_response
from proxy.server.responses_compact import compact_endpoint
from proxy.server.responses_records import HandleSecret
from proxy.settings import Settings

CleanupContext = Callable[[web.Application], AsyncIterator[None]]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ports:
    """What `create_app` takes from outside instead of building it from settings."""

    store: StateStore | None = None
    workspace: WorkspaceSource | None = None
    clock: Callable[[], float] = time.time
    """The engine's clock: a turn's `now`, the state's `updated_at` (simulated time in tests
    and benchmarks, where cache TTLs and `when_cache_cold_s` matter)."""


def create_app(settings: Settings, ports: Ports | None = None) -> web.Application:
    metrics = Metrics()
    services = Services(
        settings=settings,
        keyring=KeyRing(settings.tenants, settings.server.admin_keys),
        lifecycle=Lifecycle(),
        known_tools=KnownTools(),
        observers=[metrics],
        metrics=metrics,
        biller=Biller(_price_table(settings)),
    )
    app = web.Application(
        middlewares=[error_boundary(services)],
        client_max_size=settings.server.max_body_bytes,
        handler_args=SERVER_HANDLER_ARGS,
    )
    services.handle_secret = HandleSecret(settings.server.secret)
    app[SERVICES] = services
    app[SETTINGS] = settings
    app[KEYRING] = services.keyring
    app[LIFECYCLE] = services.lifecycle
    app[KNOWN_TOOLS] = services.known_tools
    app[OBSERVERS] = services.observers
    app[METRICS] = metrics
    emitter = services.events = EventEmitter(lambda: services.store)
    prewarmer = app[PREWARMER] = Prewarmer(services)
    hook = in_turn((emitter.on_background, prewarmer.on_background))
    app.cleanup_ctx.append(_resources(ports or Ports(), hook, prewarmer))
    app.on_shutdown.append(_drain)
    app.on_response_prepare.append(stamp_ids)
    app.router.add_get("/healthz", admin.healthz)
    app.router.add_get("/readyz", admin.readyz)
    app.router.add_get("/metrics", admin.metrics_endpoint)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/chat/completions", chat_completions)
    app.router.add_post("/v1/responses", create_response)
    app.router.add_post("/v1/responses/compact", compact_endpoint)
    app.router.add_post("/v1/messages", messages)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
    app.router.add_get("/v1/ctx/outputs/{id}", admin.get_output)
    app.router.add_get("/v1/ctx/sessions", admin.list_sessions)
    app.router.add_get("/v1/ctx/sessions/{id}", admin.session_detail)
    app.router.add_get("/v1/ctx/events", admin.list_events)
    app.router.add_get("/v1/ctx/memory", memory_view.show_memory)
    app.router.add_delete("/v1/ctx/memory", memory_view.forget_memory)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough)
    return app


def _price_table(settings: Settings) -> PriceTable | None:
    """The configured price table (`[server] prices`), or None; a malformed one is a config
    error naming the key and the entry."""
    if not settings.server.prices:
        return None
    try:
        return load_prices(settings.server.prices)
    except PriceError as exc:
        raise ConfigError(str(exc), key="server.prices", file=settings.source) from None


def _resources(ports: Ports, on_background: BackgroundHook, prewarmer: Prewarmer) -> CleanupContext:
    async def resources(app: web.Application) -> AsyncIterator[None]:
        settings = app[SETTINGS]
        via = app[SERVICES].instance
        summarizers = {n: make_summarizer(u, via=via) for n, u in settings.upstreams.items()}
        store = ports.store or make_store(settings)
        if not await store.ping():  # the proxy serves without state until the store answers
            where = redacted_url(settings.store.url)
            log.warning("state store %s unreachable at start-up; serving without state", where)
        app[HTTP] = http = _client_session()
        services = app[SERVICES]
        app[UPSTREAMS] = services.upstreams = {
            name: make_upstream(settings.upstreams[t.upstream], http, via=via)
            for name, t in settings.tenants.items()
        }
        services.responses_upstreams = {
            name: native
            for name, t in settings.tenants.items()
            if (native := make_responses_upstream(settings.upstreams[t.upstream], http, via=via))
        }
        app[STORE] = services.store = store
        memory = MemoryWriter(store, on_write=services.metrics.count_memory_write)
        compactor = Compactor(store=store, summarizers=summarizers, memory=memory)
        app[ENGINE] = services.engine = _engine(
            settings, store, compactor, ports=ports, on_background=on_background
        )
        app[LIFECYCLE].phase = "serving"
        yield
        app[LIFECYCLE].phase = "draining"
        await compactor.aclose()
        await prewarmer.aclose()
        await asyncio.gather(*app[LIFECYCLE].tasks, return_exceptions=True)
        for summarizer in summarizers.values():
            await summarizer.close()  # type: ignore[attr-defined]
        if ports.store is None:
            await store.close()
        await http.close()

    return resources


def _client_session() -> aiohttp.ClientSession:
    """The one HTTP client session every upstream adapter sends through."""
    return aiohttp.ClientSession(
        # No cap on connections (aiohttp's default is 100): each request in flight holds
        # one, and a stream holds it for minutes; the 101st must not wait for the first.
        connector=aiohttp.TCPConnector(limit=0),
        auto_decompress=True,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def _engine(
    settings: Settings,
    store: StateStore,
    compactor: Compactor,
    *,
    ports: Ports,
    on_background: BackgroundHook,
) -> ContextEngine:
    """The engine over `store`, with each tenant's stack built once (their memos sharing the
    memory budget) and the workspace and clock of `ports` when given."""
    memo_bytes = memo_bytes_per_tenant(len(settings.tenants))
    return ContextEngine(
        sessions=store,
        outputs=store,
        workspace=ports.workspace or make_workspace(settings),
        compactor=compactor,
        stacks={
            name: build_stack(t, settings.upstreams[t.upstream], memo_bytes=memo_bytes)
            for name, t in settings.tenants.items()
        },
        upstreams=settings.upstreams,
        on_background=on_background,
        clock=ports.clock,
    )


async def _drain(app: web.Application) -> None:
    app[LIFECYCLE].drain(app[SETTINGS].server.drain_timeout_s)
