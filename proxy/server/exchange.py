"""One chat request's way to the upstream: the pipeline, kept alive for a slow stream, then the
call."""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiohttp import web

from proxy.engine.engine import ContextEngine
from proxy.engine.prepared import Prepared
from proxy.ports import Upstream, UpstreamReply
from proxy.server.body import with_usage_requested
from proxy.server.keepalive import KeepAlive
from proxy.types import JSON, Draft, Turn

OVERFLOW_MARKERS = (b"context_length_exceeded", b"prompt is too long", b"maximum context length")


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
    compact_on_overflow: bool
    started: float
    client_marked: bool = True
    """False when no object of the client's body has a `cache_control` key."""
    early: web.StreamResponse | None = None
    prepare_s: float = 0.0
    """Time from `started` to the first outgoing body (store, pipeline, compaction)."""

    async def forward(self) -> tuple[Prepared, UpstreamReply, bool]:
        """(what was sent, the answer, whether it was a compact-and-retry after an overflow)."""
        prepared = await self.prepare()
        self.prepare_s = time.monotonic() - self.started
        reply = await self.send(prepared)
        overflow = self.compact_on_overflow and _is_overflow(reply)
        if overflow:  # compact and retry once, transparently
            await reply.release()
            prepared = await self.prepare(force_compact=True)
            reply = await self.send(prepared)
        return prepared, reply, overflow

    async def prepare(self, *, force_compact: bool = False) -> Prepared:
        work = self.engine.prepare(
            self.body,
            turn=self.turn,
            api_key=self.api_key,
            force_compact=force_compact,
            store_degraded=self.degraded,
            client=self.client,
            client_marked=self.client_marked,
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


def _is_overflow(reply: UpstreamReply) -> bool:
    return reply.status in (400, 413) and any(m in (reply.body or b"") for m in OVERFLOW_MARKERS)
