"""`AnthropicUpstream`: the `Upstream` port over Anthropic's Messages API, translated both ways.

A chat-completions body is translated (`to_messages_request`) and POSTed to
`{base_url}/v1/messages` with `x-api-key` and `anthropic-version` (the client's own
`anthropic-version` / `anthropic-beta` headers pass through); redirects are not followed and
nothing is retried (retrying is the client's choice). The answer comes back in OpenAI form:

    200, not streamed  → a `chat.completion` JSON body
    200, streamed      → `chat.completion.chunk` SSE bytes, translated as events arrive
    any other status   → an OpenAI-shaped error body, the status and `Retry-After` kept

Failures before the answer: a refused or reset connection raises `UpstreamUnreachable`; the
connect bound, the first-byte bound (streams) or the whole-call bound (non-streamed) raise
`UpstreamTimeout`. Once a stream has started, failures end it with an in-band error event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp
import orjson

from proxy.adapters.anthropic_relay import request_headers, response_headers, translated_events
from proxy.adapters.http_client import unreachable
from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from proxy.ports import UpstreamReply
from proxy.translate.anthropic_request import to_messages_request
from proxy.translate.anthropic_response import to_chat_completion, to_openai_error
from proxy.translate.anthropic_stream import AnthropicStreamTranslator
from proxy.types import JSON

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"


class AnthropicUpstream:
    """Sends chat-completions bodies to an Anthropic Messages endpoint over a shared session.

    `api_key` is the configured key; an `api_key` passed to `send_chat` (the client's
    own key, when the tenant forwards it) takes precedence, as for the OpenAI upstream.
    `default_max_tokens` and `keep_sampling` go to `to_messages_request`; `via` is this
    proxy's instance id, sent in the loop marker (`http_headers.VIA`).
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
        connect_timeout_s: float = 5.0,
        first_byte_timeout_s: float = 120.0,
        idle_timeout_s: float = 300.0,
        timeout_s: float = 600.0,
        via: str | None = None,
    ) -> None:
        self._session = session
        self._via = via
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._api_key = api_key
        self._version = anthropic_version
        self._default_max_tokens = default_max_tokens
        self._keep_sampling = keep_sampling
        self._connect_timeout_s = connect_timeout_s
        self._first_byte_timeout_s = first_byte_timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._timeout_s = timeout_s

    async def send_chat(
        self, body: JSON, *, headers: Mapping[str, str], api_key: str | None
    ) -> UpstreamReply:
        """Translate, send, and return the answer in OpenAI form (see the module docstring)."""
        request = to_messages_request(
            body, default_max_tokens=self._default_max_tokens, keep_sampling=self._keep_sampling
        )
        key = api_key or self._api_key  # the client's own key when the tenant forwards it
        sent_headers = request_headers(headers, api_key=key, version=self._version, via=self._via)
        data = orjson.dumps(request)
        reply = await self._exchange(data, sent_headers, body, stream=bool(request.get("stream")))
        return reply._replace(sent_bytes=len(data))

    async def _exchange(
        self, data: bytes, headers: dict[str, str], body: JSON, *, stream: bool
    ) -> UpstreamReply:
        model = str(body.get("model", ""))
        if not stream:
            async with _failures_mapped(self._timeout_s, self._url):
                response = await self._post(data, headers)
                payload = await _read_all(response)
            return self._body_reply(response, payload, model=model)
        async with _failures_mapped(self._first_byte_timeout_s, self._url):
            response = await self._post(data, headers)
            if response.status != 200:
                payload = await _read_all(response)
                return self._body_reply(response, payload, model=model)
        return self._stream_reply(response, body)

    async def _post(self, data: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
        return await self._session.post(
            self._url,
            data=data,
            headers=headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(sock_connect=self._connect_timeout_s),
        )

    def _body_reply(
        self, response: aiohttp.ClientResponse, payload: bytes, *, model: str
    ) -> UpstreamReply:
        headers = response_headers(response.headers, content_type=JSON_TYPE)
        try:
            message = orjson.loads(payload) if response.status == 200 else None
        except orjson.JSONDecodeError:
            message = None
        if isinstance(message, dict):
            status, out = 200, to_chat_completion(message, model=model, created=_now())
        else:
            status, out = to_openai_error(
                response.status if response.status != 200 else 502, payload
            )
        return UpstreamReply(status, headers, orjson.dumps(out), None, _noop)

    def _stream_reply(self, response: aiohttp.ClientResponse, body: JSON) -> UpstreamReply:
        options = body.get("stream_options") or {}
        translator = AnthropicStreamTranslator(
            model=str(body.get("model", "")),
            include_usage=bool(options.get("include_usage")),
            created=_now(),
        )
        events = translated_events(response, translator, idle_timeout_s=self._idle_timeout_s)

        async def release() -> None:
            await events.aclose()
            response.release()

        headers = response_headers(response.headers, content_type=SSE_TYPE)
        headers["cache-control"] = "no-cache"
        return UpstreamReply(200, headers, None, events, release)


@asynccontextmanager
async def _failures_mapped(seconds: float, url: str) -> AsyncIterator[None]:
    """Bound a step by `seconds`; map transport failures to the proxy's upstream errors."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:  # the bound, or aiohttp's connect timeout (a TimeoutError too)
        raise UpstreamTimeout(f"upstream did not answer in time ({type(exc).__name__})") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamUnreachable(unreachable(url, exc)) from exc


async def _read_all(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    finally:
        response.release()


def _now() -> int:
    return int(time.time())


async def _noop() -> None:
    return None
