"""`Prewarmer`: after a background compaction, warm the provider cache for the new prefix
(`[tenants.NAME.cache] prewarm`; why and what it costs: `proxy.compaction.prewarm`).

Told of every finished background compaction (the engine's `on_background` hook, beside the
event emitter's), it starts at most one prewarm per session, as a task it keeps and cancels at
shutdown (`aclose`). A prewarm rebuilds the session's last client body from the compaction's job,
has the engine prepare it as the next request would be (the stored compaction now applies; the
recall tool offered as on the chat route), and sends it as a one-token request through the
tenant's `Upstream` with the key the summarizer used (a Messages client's, to an Anthropic
upstream, as `/v1/messages` renders and sends it: `CompactionJob.sending`). It is not a turn:
nothing is recorded in the session. It is counted (`ctxproxy_prewarms_total{tenant,outcome}`:
done, failed, skipped), priced (`ctxproxy_cost_usd_total{kind="prewarm"}`) and told as a
`kind=prewarm` event. A failure is logged and counted, never raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import NamedTuple

import orjson
from aiohttp import web

from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from proxy.compaction.job import CompactionJob, CompactionOutcome
from proxy.compaction.prewarm import client_request, messages_prewarm, prewarm_body, prewarm_skip
from proxy.compaction.trigger import BackgroundHook
from proxy.engine.pipeline import draft_from_body
from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.messages_request import messages_to_internal
from proxy.inbound.messages_usage import usage_of_message
from proxy.server.appkeys import Services
from proxy.types import JSON
from proxy.usage import Usage, usage_from_body

log = logging.getLogger(__name__)


class Warmed(NamedTuple):
    """How one prewarm ended: `outcome` done / failed / skipped, why (`reason`, never
    content), and what the upstream reported."""

    outcome: str
    reason: str = ""
    usage: Usage | None = None


class Prewarmer:
    """Starts and keeps the prewarms of one app (see the module doc); `services` is read at
    call time (the engine and the upstreams exist once the app has started)."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}

    def in_flight(self, tenant: str, session: str) -> bool:
        """Whether a prewarm of the session is being sent."""
        return (tenant, session) in self._tasks

    async def on_background(self, job: CompactionJob, outcome: CompactionOutcome) -> None:
        """Start a prewarm after a done background compaction of a tenant with `prewarm` on;
        nothing for another outcome or tenant. Never raises."""
        settings = self._services.settings
        tenant = settings.tenants.get(job.tenant)
        if outcome.status != "done" or tenant is None or not tenant.cache.prewarm:
            return
        upstream = settings.upstreams[tenant.upstream]
        skip = prewarm_skip(
            job, cache_style=upstream.cache_style, api=upstream.api, kind=upstream.kind
        )
        key = (job.tenant, job.session)
        if not skip and key in self._tasks:
            skip = "in_flight"
        if skip:
            await self._told(job, Warmed("skipped", skip))
            return
        task = asyncio.get_running_loop().create_task(self._warm(job, outcome))
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))

    def _forget(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]

    async def _warm(self, job: CompactionJob, outcome: CompactionOutcome) -> None:
        try:
            warmed = await self._send(job, outcome)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a prewarm never fails anything: logged and counted
            log.warning("prewarm of %s failed: %s", job.tenant, type(exc).__name__)
            warmed = Warmed("failed", type(exc).__name__)
        await self._told(job, warmed)

    async def _send(self, job: CompactionJob, outcome: CompactionOutcome) -> Warmed:
        """Prepare the next request's body and send it as the one-token prewarm: a Messages
        client's to an Anthropic upstream as `/v1/messages` renders and sends it, any other
        as a chat request."""
        services = self._services
        upstream = services.upstreams[job.tenant]
        sent = job.sending
        carried = None
        if sent.messages is not None and isinstance(upstream, AnthropicUpstream):
            tenant = services.settings.tenants[job.tenant]
            hide = not tenant.messages_markers_stop_pruning
            carried = messages_to_internal(sent.messages, hide_message_markers=hide)
        body = carried[0] if carried is not None else client_request(job)
        turn = await services.engine.load_turn(job.tenant, job.session, draft_from_body(body))
        stored = outcome.compaction
        if stored is None or turn.applied is None or turn.applied.covers != stored.covers:
            return Warmed("skipped", "not_applied")  # the summary was not stored or matched
        prepared = await services.engine.prepare(
            body, turn=turn, api_key=job.api_key, recall=carried is None or not _prefilled(body)
        )
        if carried is not None and isinstance(upstream, AnthropicUpstream):
            rendered = messages_prewarm(internal_to_messages(prepared.body, carried[1]))
            reply = await upstream.send_messages(
                rendered, headers=dict(sent.headers), api_key=job.api_key, query=sent.query
            )
        else:
            warm = prewarm_body(prepared.body)
            reply = await upstream.send_chat(warm, headers={}, api_key=job.api_key)
        try:
            answer = reply.body or b""
        finally:
            await reply.release()
        if reply.status != 200:
            return Warmed("failed", f"status_{reply.status}")
        if carried is not None:
            return Warmed("done", usage=usage_of_message(orjson.loads(answer)))
        return Warmed("done", usage=usage_from_body(answer))

    async def _told(self, job: CompactionJob, warmed: Warmed) -> None:
        """Count, price and tell one prewarm; never raises."""
        services = self._services
        try:
            cost = services.biller.price(job.model, warmed.usage)
            services.metrics.count_prewarm(job.tenant, warmed.outcome, cost)
            await services.events.on_prewarm(
                job.tenant, job.session, warmed.outcome, warmed.reason, warmed.usage, cost
            )
        except Exception as exc:
            log.warning("prewarm not counted: %s", type(exc).__name__)

    async def aclose(self) -> None:
        """Cancel and await every prewarm in flight."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _prefilled(body: JSON) -> bool:
    """Whether the client's last message is the assistant's (a prefill): the Messages route
    offers no recall tool then (`proxy.server.messages_forward.looping`)."""
    messages = body.get("messages") or [{}]
    return bool(messages[-1].get("role") == "assistant")


PREWARMER = web.AppKey("prewarmer", Prewarmer)


def in_turn(hooks: Sequence[BackgroundHook]) -> BackgroundHook:
    """One `on_background` hook telling each of `hooks` in turn (an error in one is logged; the
    others are told all the same)."""

    async def told(job: CompactionJob, outcome: CompactionOutcome) -> None:
        for hook in hooks:
            try:
                await hook(job, outcome)
            except Exception:
                log.exception("background hook failed")

    return told
