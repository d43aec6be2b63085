"""Typed keys of everything app-scoped (aiohttp "No Singletons Please")."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
from aiohttp import web

from proxy.engine import ContextEngine
from proxy.ports import Upstream
from proxy.server.keys import KeyRing
from proxy.settings import Settings

if TYPE_CHECKING:
    from proxy.server.observe import Observer


@dataclass(slots=True)
class Lifecycle:
    """Readiness phase and the background tasks that must finish before shutdown."""

    phase: Literal["starting", "serving", "draining"] = "starting"
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


SETTINGS = web.AppKey("settings", Settings)
KEYRING = web.AppKey("keyring", KeyRing)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
ENGINE = web.AppKey("engine", ContextEngine)
UPSTREAMS = web.AppKey("upstreams", Mapping[str, Upstream])
HTTP = web.AppKey("http", aiohttp.ClientSession)
OBSERVERS = web.AppKey("observers", list["Observer"])
