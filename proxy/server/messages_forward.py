"""One Messages request prepared and sent (`proxy.server.messages`): compact and send again,
once, when the upstream says the prompt is too long; answer the model's recall calls and ask
again (`proxy.server.recall_loop`). Per upstream kind:

    anthropic   the prepared internal body rendered around what the client sent
                (`proxy.inbound.messages_render`), to `/v1/messages` with the client's headers
                and query (`?beta=true`); recall rounds in the Messages API's form
                (`MessagesDialect`: `tool_use` / `tool_result` blocks, the events merged)
    openai      the prepared internal body as a chat request (`proxy.inbound.chat_request`);
                recall rounds as the chat route runs them (`ChatDialect`), translated back
                with the rest of the answer

The recall tool is offered unless the client's last message is the assistant's (a prefill the
answer continues: no round can be appended after it).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from aiohttp import web

from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from proxy.compaction.job import Sending
from proxy.compaction.prewarm import asks_thinking
from proxy.engine.engine import ContextEngine
from proxy.engine.prepared import Prepared
from proxy.inbound.chat_request import chat_request
from proxy.inbound.messages_carrier import Carrier
from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.result_images import messages_result_images
from proxy.ports import Upstream, UpstreamReply
from proxy.recall.answer import OutputReader
from proxy.server.body import with_usage_requested
from proxy.server.chat import OVERFLOW_MARKERS, Forwarded
from proxy.server.keepalive import KeepAlive, kept_alive
from proxy.server.keys import Caller
from proxy.server.recall_dialects import ChatDialect, Dialect, MessagesDialect
from proxy.server.recall_loop import RecallLoop
from proxy.settings import TenantSettings
from proxy.types import JSON, Turn


class Inbound(NamedTuple):
    """One Messages request, read: the client's body, its internal form and carrier, who sent
    it (and whether its key came as a bearer: an OAuth token goes upstream that way), its turn."""

    body: JSON
    internal: JSON
    carrier: Carrier
    caller: Caller
    tenant: TenantSettings
    turn: Turn
    as_bearer: bool
    output_cap: int | None
    """The upstream's `max_output_tokens` (`UpstreamSettings`)."""


async def forward(
    engine: ContextEngine,
    upstream: Upstream,
    inbound: Inbound,
    request: web.Request,
    keepalive: KeepAlive | None,
    *,
    started: float,
    reader: OutputReader,
) -> Forwarded:
    """Prepare and send (see the module doc); `reader`: where the recall loop reads persisted
    outputs."""
    sends = sending(upstream, inbound, request)
    prepared = await _prepare(engine, inbound, keepalive, sends, force_compact=False)
    prepare_s = time.monotonic() - started
    outgoing = upstream_body(upstream, inbound, prepared)
    reply = await _send(engine, upstream, prepared, outgoing, inbound, request)
    overflow = inbound.tenant.compact.enabled and _is_overflow(reply)
    if overflow:
        await reply.release()
        prepared = await _prepare(engine, inbound, keepalive, sends, force_compact=True)
        outgoing = upstream_body(upstream, inbound, prepared)
        reply = await _send(engine, upstream, prepared, outgoing, inbound, request)
    if not prepared.recall.offered:
        return Forwarded(prepared, reply, overflow, prepare_s)
    loop = RecallLoop(
        dialect=_dialect(upstream, inbound, request, outgoing),
        body=inbound.internal,
        prepared=prepared,
        settings=inbound.tenant.recall,
        reader=reader,
    )
    return Forwarded(prepared, await loop.rounds(reply), overflow, prepare_s, loop)


def looping(inbound: Inbound) -> bool:
    """Whether a recall loop may run around this request (see the module doc)."""
    messages = inbound.body.get("messages") or [{}]
    return inbound.tenant.recall.enabled and messages[-1].get("role") != "assistant"


async def _prepare(
    engine: ContextEngine,
    inbound: Inbound,
    keepalive: KeepAlive | None,
    sends: Sending,
    *,
    force_compact: bool,
) -> Prepared:
    """The engine's preparation of the internal body, kept alive for a stream while it runs."""
    work = engine.prepare(
        inbound.internal,
        turn=inbound.turn,
        api_key=summarizer_key(inbound),
        force_compact=force_compact,
        recall=looping(inbound),
        sending=sends,
    )
    return await kept_alive(keepalive, work)


def upstream_body(upstream: Upstream, inbound: Inbound, prepared: Prepared) -> JSON:
    """What the upstream is sent for the prepared body: to an Anthropic upstream the Messages
    body rendered around the client's; to another, the chat request."""
    if isinstance(upstream, AnthropicUpstream):
        return internal_to_messages(prepared.body, inbound.carrier)
    keep = prepared.turn.cache_style == "anthropic"
    images = messages_result_images(prepared.body.get("messages") or [], inbound.carrier)
    return chat_request(
        prepared.body, keep_markers=keep, max_output_tokens=inbound.output_cap, images=images
    )


async def _send(
    engine: ContextEngine,
    upstream: Upstream,
    prepared: Prepared,
    outgoing: JSON,
    inbound: Inbound,
    request: web.Request,
) -> UpstreamReply:
    """Store the outputs budgets persisted, then send `outgoing` (a chat stream asks for its
    usage)."""
    await engine.persist_outputs(prepared)
    if isinstance(upstream, AnthropicUpstream):
        return await _messages_sender(upstream, inbound, request)(outgoing)
    asked, _ = with_usage_requested(outgoing)
    return await upstream.send_chat(asked, headers=request.headers, api_key=client_key(inbound))


def _messages_sender(
    upstream: AnthropicUpstream, inbound: Inbound, request: web.Request
) -> Callable[[JSON], Awaitable[UpstreamReply]]:
    """Sends a Messages body as the client's request: its headers, its query, its key's form."""
    return functools.partial(
        upstream.send_messages,
        headers=request.headers,
        api_key=client_key(inbound),
        as_bearer=inbound.as_bearer,
        query=request.rel_url.raw_query_string,
    )


def _dialect(
    upstream: Upstream, inbound: Inbound, request: web.Request, outgoing: JSON
) -> Dialect[Any]:
    """The recall rounds' wire form: the first round's `outgoing`, continued."""
    settings = inbound.tenant.recall
    if isinstance(upstream, AnthropicUpstream):
        sender = _messages_sender(upstream, inbound, request)
        return MessagesDialect(sender, outgoing, settings.tool_name)
    return ChatDialect(upstream, outgoing, settings, request.headers, client_key(inbound))


def client_key(inbound: Inbound) -> str | None:
    """The client's own key, when the tenant forwards it."""
    return inbound.caller.token if inbound.tenant.forward_client_key else None


def summarizer_key(inbound: Inbound) -> str | None:
    """The key the summarizer may use: the client's, unless it is an OAuth token (a bearer),
    which the summarizer cannot send: the summarizer upstream's own key then."""
    return None if inbound.as_bearer else client_key(inbound)


def sending(upstream: Upstream, inbound: Inbound, request: web.Request) -> Sending:
    """What the request goes upstream with beyond its internal body, for a compaction's
    prewarm: not the summarizer's key when the client's is an OAuth bearer; to an Anthropic
    upstream, the client's body, `anthropic-*` headers and query (rendered as here), and
    whether it asks for thinking (an OpenAI-kind upstream is sent the chat form: neither)."""
    same_key = summarizer_key(inbound) == client_key(inbound)
    if not isinstance(upstream, AnthropicUpstream):
        return Sending(same_key=same_key)
    headers = tuple(
        (k, v) for k, v in request.headers.items() if k.lower().startswith("anthropic-")
    )
    return Sending(
        same_key=same_key,
        thinking=asks_thinking(inbound.body, kind="anthropic"),
        messages=inbound.body,
        headers=headers,
        query=request.rel_url.raw_query_string,
    )


def _is_overflow(reply: UpstreamReply) -> bool:
    return reply.status in (400, 413) and any(m in (reply.body or b"") for m in OVERFLOW_MARKERS)
