"""`AnthropicUpstream`: the `Upstream` port over Anthropic's Messages API, translated both ways.

A chat-completions body is translated (`to_messages_request`) and POSTed to
`{base_url}/v1/messages` with `x-api-key` and `anthropic-version` (the client's own
`anthropic-version` / `anthropic-beta` headers pass through; with `cache_diagnostics` the
request asks for the provider's cache-miss diagnostics against the session's previous message)
through the one upstream transport (`proxy.adapters.upstream.transport`: its timeouts, its
single retry before the first byte, no redirects followed). The answer comes back in OpenAI form:

    200, not streamed  → a `chat.completion` JSON body
    200, streamed      → `chat.completion.chunk` SSE bytes, translated as events arrive
    any other status   → an OpenAI-shaped error body, the status and `Retry-After` kept

`send_messages` is the other door, for a Messages client (`proxy.server.messages`): a Messages
body sent to `/v1/messages` (or `/v1/messages/count_tokens`) as it is, the client's headers with
it, and the answer back untouched: status, headers, JSON or event-stream bytes as they arrive.

Failures before the answer are the transport's (`UpstreamUnreachable`, `UpstreamTimeout`). The
stream is translated one upstream read at a time (`SSEDecoder` → `AnthropicStreamTranslator`),
never buffered whole; once it has started, every failure ends it with an in-band error event: an
idle gap longer than `idle_s`, a lost connection, or an upstream that stops before `message_stop`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping

import aiohttp
import orjson

from proxy.adapters.upstream.headers import (
    VIA,
    upstream_request_headers,
    via_chain,
)
from proxy.adapters.upstream.transport import (
    Timeouts,
    UpstreamIdle,
    iter_body,
    post_json,
    read_body,
    release,
    released_already,
    streamed_reply,
    whole_reply,
)
from proxy.ports import UpstreamReply
from proxy.sse import SSEDecoder, SSEvent
from proxy.translate.anthropic_request import diagnostics_param, to_messages_request
from proxy.translate.anthropic_response import to_chat_completion, to_openai_error
from proxy.translate.anthropic_stream import AnthropicStreamTranslator
from proxy.types import JSON

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"
PASSED_REQUEST_HEADERS = ("anthropic-version", "anthropic-beta")
RELAYED_RESPONSE_HEADERS = ("retry-after", "request-id")
RELAYED_RESPONSE_PREFIXES = ("anthropic-ratelimit-",)


class AnthropicUpstream:
    """Sends chat-completions bodies to an Anthropic Messages endpoint over a shared session.

    `api_key` is the configured key; an `api_key` passed to `send_chat` (the client's
    own key, when the tenant forwards it) takes precedence, as for the OpenAI upstream.
    `default_max_tokens` and `keep_sampling` go to `to_messages_request`; `cache_diagnostics`
    adds `diagnostics.previous_message_id` (the answer's reason reaches the translated usage
    as `cache_miss_reason`); `via` is this
    proxy's instance id, sent in the loop marker (`proxy.adapters.upstream.headers.VIA`).
    """

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        anthropic_version: str = "2023-06-01",
        default_max_tokens: int = 4096,
        keep_sampling: bool = False,
        cache_diagnostics: bool = False,
        timeouts: Timeouts = Timeouts(),  # noqa: B008 (frozen: one object serves as default)
        via: str | None = None,
    ) -> None:
        self._session = session
        self._via = via
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._api_key = api_key
        self._version = anthropic_version
        self._default_max_tokens = default_max_tokens
        self._keep_sampling = keep_sampling
        self._cache_diagnostics = cache_diagnostics
        self._timeouts = timeouts

    async def send_chat(
        self,
        body: JSON,
        *,
        headers: Mapping[str, str],
        api_key: str | None,
        previous_id: str | None = None,
    ) -> UpstreamReply:
        """Translate, send, and return the answer in OpenAI form (see the module docstring)."""
        request = to_messages_request(
            body, default_max_tokens=self._default_max_tokens, keep_sampling=self._keep_sampling
        )
        if self._cache_diagnostics:
            request["diagnostics"] = diagnostics_param(previous_id)
        key = api_key or self._api_key  # the client's own key when the tenant forwards it
        stream = bool(request.get("stream"))
        response, sent = await post_json(
            self._session,
            self._url,
            request,
            headers=request_headers(headers, api_key=key, version=self._version, via=self._via),
            timeouts=self._timeouts,
            stream=stream,
        )
        if stream and response.status == 200:
            return self._stream_reply(response, body)._replace(sent_bytes=sent)
        try:
            payload = await read_body(response)
        finally:
            await release(response)
        reply = _body_reply(response, payload, model=str(body.get("model", "")))
        return reply._replace(sent_bytes=sent)

    async def send_messages(
        self,
        body: JSON,
        *,
        headers: Mapping[str, str],
        api_key: str | None,
        as_bearer: bool = False,
        endpoint: str = "messages",
        query: str = "",
    ) -> UpstreamReply:
        """POST a Messages body to `/v1/{endpoint}` (`messages` or `messages/count_tokens`)
        with `query`, and return the answer untouched: a 200 event stream as its bytes arrive,
        anything else read whole. The client's headers go along (hop-by-hop, credentials and
        `X-Ctx-*` dropped), `anthropic-version` defaulting to ours; `api_key` (else the
        configured key) as `x-api-key`, or as `Authorization: Bearer` with `as_bearer` (an
        OAuth token, which the client sent that way)."""
        out = upstream_request_headers(headers, rebuilt_body=True, via=self._via)
        out["Content-Type"] = "application/json"
        out.setdefault("anthropic-version", self._version)
        key = api_key or self._api_key
        if key and as_bearer and api_key:
            out["Authorization"] = f"Bearer {key}"
        elif key:
            out["x-api-key"] = key
        url = self._url.removesuffix("/messages") + f"/{endpoint}" + (f"?{query}" if query else "")
        stream = endpoint == "messages" and body.get("stream") is True
        response, sent = await post_json(
            self._session, url, body, headers=out, timeouts=self._timeouts, stream=stream
        )
        if stream and response.status == 200:
            return streamed_reply(response, idle_s=self._timeouts.idle_s, sent_bytes=sent)
        return await whole_reply(response, sent_bytes=sent)

    def _stream_reply(self, response: aiohttp.ClientResponse, body: JSON) -> UpstreamReply:
        options = body.get("stream_options") or {}
        translator = AnthropicStreamTranslator(
            model=str(body.get("model", "")),
            include_usage=bool(options.get("include_usage")),
            created=_now(),
        )
        events = translated_events(response, translator, idle_s=self._timeouts.idle_s)

        async def release_stream() -> None:
            await events.aclose()
            await release(response)

        headers = response_headers(response.headers, content_type=SSE_TYPE)
        headers["cache-control"] = "no-cache"
        return UpstreamReply(200, headers, None, events, release_stream)


def request_headers(
    client: Mapping[str, str], *, api_key: str | None, version: str, via: str | None = None
) -> dict[str, str]:
    """Headers for `/v1/messages`: the key, the version (the client's wins), the client's beta,
    and with `via` (this proxy's instance id) the loop marker."""
    lowered = {name.lower(): value for name, value in client.items()}
    headers = {"content-type": "application/json", "anthropic-version": version}
    headers.update({name: lowered[name] for name in PASSED_REQUEST_HEADERS if name in lowered})
    if api_key:
        headers["x-api-key"] = api_key
    if via:
        headers[VIA] = via_chain(client, via)
    return headers


def response_headers(upstream: Mapping[str, str], *, content_type: str) -> dict[str, str]:
    """The upstream headers worth relaying (Retry-After, request id, rate limits)."""
    out = {"content-type": content_type}
    for name, value in upstream.items():
        lower = name.lower()
        if lower in RELAYED_RESPONSE_HEADERS or lower.startswith(RELAYED_RESPONSE_PREFIXES):
            out[lower] = value
    if "request-id" in out:
        out["x-request-id"] = out["request-id"]
    return out


def _body_reply(response: aiohttp.ClientResponse, payload: bytes, *, model: str) -> UpstreamReply:
    headers = response_headers(response.headers, content_type=JSON_TYPE)
    try:
        message = orjson.loads(payload) if response.status == 200 else None
    except orjson.JSONDecodeError:
        message = None
    if isinstance(message, dict):
        status, out = 200, to_chat_completion(message, model=model, created=_now())
    else:
        status, out = to_openai_error(response.status if response.status != 200 else 502, payload)
    return UpstreamReply(status, headers, orjson.dumps(out), None, released_already)


async def translated_events(
    response: aiohttp.ClientResponse, translator: AnthropicStreamTranslator, *, idle_s: float
) -> AsyncGenerator[bytes, None]:
    """OpenAI chunk SSE bytes for an Anthropic event stream, as the events arrive."""
    decoder = SSEDecoder()
    body = iter_body(response, idle_s=idle_s)
    try:
        async for chunk in body:
            out = b"".join(_translate(translator, event) for event in decoder.feed(chunk))
            if out:
                yield out
            if translator.done:
                return
    except UpstreamIdle:
        message = f"upstream sent nothing for {idle_s:g}s"
        yield translator.fail(message, "upstream_error", "upstream_timeout")
        return
    except aiohttp.ClientError as exc:
        message = f"upstream connection lost: {type(exc).__name__}"
        yield translator.fail(message, "upstream_error", "upstream_unreachable")
        return
    finally:
        await body.aclose()
    message = "upstream stream ended before message_stop"
    yield translator.fail(message, "upstream_error", "upstream_unreachable")


def _translate(translator: AnthropicStreamTranslator, event: SSEvent) -> bytes:
    if event.is_comment_only or not event.data:
        return b""
    try:
        data = orjson.loads(event.data)
    except orjson.JSONDecodeError:
        return b""
    return translator.feed(event.event, data) if isinstance(data, dict) else b""


def _now() -> int:
    return int(time.time())
