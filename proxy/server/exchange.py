"""One chat request's way to the upstream: the pipeline, kept alive for a slow stream, then the
call."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from proxy.engine import ContextEngine, Prepared
from proxy.ports import Upstream, UpstreamReply
from proxy.server.body import with_usage_requested
from proxy.server.keepalive import KeepAlive
from proxy.types import JSON, Draft, Turn


@dataclass(slots=True)
class Exchange:
    """One request's way to the upstream: the pipeline (kept alive for a slow stream), then the
    call. `early` is the response the keep-alive started, if it did."""

    request: web.Request
    engine: ContextEngine
    upstream: Upstream
    body: JSON
    client: Draft
    turn: Turn
    api_key: str | None
    degraded: bool
    keepalive: KeepAlive | None
    early: web.StreamResponse | None = None

    async def prepare(self, *, force_compact: bool = False) -> Prepared:
        work = self.engine.prepare(
            self.body,
            turn=self.turn,
            api_key=self.api_key,
            force_compact=force_compact,
            store_degraded=self.degraded,
            client=self.client,
        )
        if self.keepalive is None:
            return await work
        self.keepalive.start()
        try:
            return await work
        finally:
            self.early = await self.keepalive.stop()

    async def send(self, prepared: Prepared) -> UpstreamReply:
        await self.engine.persist_outputs(prepared)
        outgoing, _ = with_usage_requested(prepared.body)
        return await self.upstream.send_chat(
            outgoing, headers=self.request.headers, api_key=self.api_key
        )
