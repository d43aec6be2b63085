"""Helpers of `AnthropicUpstream`: request/response headers and the translated event stream.

The stream is translated as it arrives (`SSEDecoder` → `AnthropicStreamTranslator`), one
upstream read at a time, never buffered whole. Once it has started, every failure ends it with
an in-band error event: an idle gap longer than `idle_timeout_s`, a lost connection, or an
upstream that stops before `message_stop`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping

import aiohttp
import orjson

from proxy.adapters.http_headers import VIA, via_chain
from proxy.sse import SSEDecoder, SSEvent
from proxy.translate.anthropic_stream import AnthropicStreamTranslator

PASSED_REQUEST_HEADERS = ("anthropic-version", "anthropic-beta")
RELAYED_RESPONSE_HEADERS = ("retry-after", "request-id")
RELAYED_RESPONSE_PREFIXES = ("anthropic-ratelimit-",)


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


async def translated_events(
    response: aiohttp.ClientResponse,
    translator: AnthropicStreamTranslator,
    *,
    idle_timeout_s: float,
) -> AsyncGenerator[bytes, None]:
    """OpenAI chunk SSE bytes for an Anthropic event stream, as the events arrive."""
    decoder = SSEDecoder()
    while not translator.done:
        try:
            async with asyncio.timeout(idle_timeout_s):
                chunk = await response.content.readany()
        except TimeoutError:
            message = f"upstream sent nothing for {idle_timeout_s:g}s"
            yield translator.fail(message, "upstream_error", "upstream_timeout")
            return
        except aiohttp.ClientError as exc:
            message = f"upstream connection lost: {type(exc).__name__}"
            yield translator.fail(message, "upstream_error", "upstream_unreachable")
            return
        if not chunk:
            break
        out = b"".join(_translate(translator, event) for event in decoder.feed(chunk))
        if out:
            yield out
    if not translator.done:
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
