"""Parsing and checking a chat-completions request body."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from aiohttp import web

from proxy.errors import BadRequest
from proxy.exact_json import loads_exact
from proxy.server.body_scan import KnownTools, Scan, scan_body
from proxy.types import JSON

log = logging.getLogger(__name__)

# Keys some gateways honour to pick the upstream; the client never picks ours (DESIGN §5).
ROUTING_KEYS = ("base_url", "api_base", "api_key")
# orjson parses up to 1,024 levels of nesting but serialises only 254: a body the proxy could
# read but never send on is refused up front, with room for the few levels the stages add.
ORJSON_MAX_DEPTH = 254
NESTING_MARGIN = 8


async def read_chat_body(
    request: web.Request, *, known: KnownTools | None = None
) -> tuple[JSON, bool]:
    """The JSON body, checked enough to run the pipeline, and whether any object in it has a
    `cache_control` key (a client marker: `False` spares the pipeline looking for them).
    `BadRequest` names what is wrong. `known`: tool definitions scanned before."""
    raw = await request.read()
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc.msg}.") from exc
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object.")
    checked: JSON = body
    found = scanned(checked, known=known)
    if found.inexact:  # an integer beyond 64 bits, which orjson read as a float
        checked = loads_exact(raw)
    check_chat_body(checked)
    dropped = [k for k in ROUTING_KEYS if k in checked]
    if dropped:
        log.info("ignored client routing keys: %s", ",".join(dropped))
        checked = {k: v for k, v in checked.items() if k not in ROUTING_KEYS}
    return checked, found.marked


def check_nesting(body: JSON, *, known: KnownTools | None = None) -> bool:
    """`BadRequest` when the body is nested too deeply to be serialised again upstream; else
    whether some object in it has a `cache_control` key (found on the same walk)."""
    return scanned(body, known=known).marked


def scanned(body: JSON, *, known: KnownTools | None = None) -> Scan:
    """What one walk of the body found (`Scan`); `BadRequest` when it is nested too deeply.

    With `known`, tool definitions equal to ones scanned before are not walked again (agents
    resend them with every request; comparing them runs in C)."""
    found = scan_body(body, ORJSON_MAX_DEPTH - NESTING_MARGIN, known)
    if found.too_deep:
        raise BadRequest("Request body is nested too deeply.")
    return found


def check_chat_body(body: JSON) -> None:
    messages = body.get("messages")
    if messages is None:
        raise BadRequest("Missing required parameter: 'messages'.", param="messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array.", param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(
                f"'messages[{index}]' must be an object with a string 'role'.",
                param=f"messages[{index}]",
            )
    if "model" in body and not isinstance(body["model"], str):
        raise BadRequest("'model' must be a string.", param="model")
    if "stream" in body and not isinstance(body["stream"], bool | None):
        raise BadRequest("'stream' must be a boolean.", param="stream")


def with_usage_requested(body: JSON) -> tuple[JSON, bool]:
    """For a stream, ask for the usage chunk if the client did not; True if we added it."""
    if not body.get("stream"):
        return body, False
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        return body, False
    merged = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return {**body, "stream_options": merged}, True
