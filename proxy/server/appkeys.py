"""Typed keys of everything app-scoped (aiohttp "No Singletons Please")."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
from aiohttp import web

from proxy.engine.engine import ContextEngine
from proxy.errors import Forbidden
from proxy.ports import ResponsesUpstream, StateStore, Upstream
from proxy.server.body import KnownTools
from proxy.server.keys import Caller, KeyRing
from proxy.server.responses_records import HandleSecret
from proxy.settings import Settings
from proxy.usage import Usage

if TYPE_CHECKING:
    from proxy.server.observe.bill import Biller
    from proxy.server.observe.events import EventEmitter
    from proxy.server.observe.metrics import Metrics
    from proxy.server.observe.trace import Observer


@dataclass(slots=True)
class Lifecycle:
    """Readiness phase, the background tasks that must finish before shutdown, and the streams
    being relayed, stopped once draining has lasted the drain timeout."""

    phase: Literal["starting", "serving", "draining"] = "starting"
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    streams: set[asyncio.Task[Any]] = field(default_factory=set)
    streams_stopped: bool = False
    in_flight: int = 0
    """Requests being answered, streams included (counted by the error boundary)."""
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        # The loop's own `create_task`: `asyncio.create_task` looks the loop up, and on 3.11
        # that costs a `getpid` system call per request.
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        task: asyncio.Task[None] = loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def drain(self, drain_s: float) -> None:
        """Stop serving; the streams still running `drain_s` from now are cancelled."""
        self.phase = "draining"
        asyncio.get_running_loop().call_later(drain_s, self.stop_streams)

    def stop_streams(self) -> None:
        self.streams_stopped = True
        for task in self.streams:
            task.cancel()

    def stream_started(self) -> asyncio.Task[Any]:
        """Registers the current task as a stream; call `stream_ended(task)` in a `finally`."""
        task = asyncio.current_task()
        assert task is not None
        if self.streams_stopped:
            task.cancel()
        self.streams.add(task)
        return task

    def stream_ended(self, task: asyncio.Task[Any]) -> None:
        self.streams.discard(task)


@dataclass(slots=True)
class Services:
    """Everything app-scoped in one object, which a request looks up once (in its
    `RequestScope`): `request.app[KEY]` runs three Python calls per key. The app keys below
    name the same objects, for the admin views and the tests."""

    settings: Settings
    keyring: KeyRing
    lifecycle: Lifecycle
    known_tools: KnownTools
    observers: list[Observer]
    """Told of every chat request after its session record (metrics)."""
    metrics: Metrics
    biller: Biller
    """Prices each answered request (`[server] prices`) and estimates its saving."""
    instance: str = field(default_factory=lambda: secrets.token_hex(8))
    """This proxy's id in the loop marker (`adapters.upstream.headers.VIA`): random per app."""
    events: EventEmitter = field(init=False)
    """Builds a chat request's events, written with its session record."""
    store: StateStore = field(init=False)
    """Set at start-up (`create_app`'s resources), like `engine` and `upstreams`."""
    engine: ContextEngine = field(init=False)
    upstreams: Mapping[str, Upstream] = field(init=False)
    responses_upstreams: Mapping[str, ResponsesUpstream] = field(init=False)
    """By tenant, for the tenants whose upstream has `api = "responses"`."""
    handle_secret: HandleSecret = field(init=False)
    """The secret signing compaction handles (the Responses routes)."""


@dataclass(slots=True)
class RequestScope:
    """What the middleware, the handlers and `stamp_ids` share about one request: its id, the
    app's services, and its caller and session once known. One request key for all."""

    id: str
    services: Services
    caller: Caller | None = None
    session: str | None = None
    """The request's session id, once known: error answers carry it too (`X-Ctx-Session`)."""
    usage: Usage | None = None
    """What the upstream reported for a chat request once relayed: for the access line."""
    client_left: bool = False
    """The client went away before its answer was complete: counted as 499."""


SETTINGS = web.AppKey("settings", Settings)
KEYRING = web.AppKey("keyring", KeyRing)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
ENGINE = web.AppKey("engine", ContextEngine)
STORE = web.AppKey("store", StateStore)
UPSTREAMS = web.AppKey("upstreams", Mapping[str, Upstream])
HTTP = web.AppKey("http", aiohttp.ClientSession)
OBSERVERS = web.AppKey("observers", list["Observer"])
KNOWN_TOOLS = web.AppKey("known_tools", KnownTools)
SERVICES = web.AppKey("services", Services)

SCOPE = web.RequestKey("scope", RequestScope)
"""Set by the error boundary on every request it sees."""


def caller_of(request: web.Request) -> Caller:
    """The request's caller, identified once per request (`Unauthorized` for a bad key)."""
    scope = request[SCOPE]
    caller = scope.caller
    if caller is None:
        caller = scope.caller = scope.services.keyring.identify(
            request.headers.get("Authorization")
        )
    return caller


def tenant_caller_of(request: web.Request) -> Caller:
    """The caller of a model route, who must belong to a tenant: `Forbidden` for an admin key
    that belongs to none (it would have no upstream, workspace or sessions to use)."""
    caller = caller_of(request)
    if not caller.tenant:
        raise Forbidden(
            "This is an admin key, and admin keys are for the /v1/ctx admin routes: "
            "use a tenant's key for model routes.",
            code="admin_key_on_model_route",
        )
    return caller
