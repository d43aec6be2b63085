"""Errors for a Messages client, in Anthropic's shape and with Anthropic's statuses (pure).

    {"type": "error", "error": {"type": <error type>, "message": <text>}}

    400 invalid_request_error   401 authentication_error   402 billing_error
    403 permission_error        404 not_found_error         413 request_too_large
    429 rate_limit_error        500 api_error               504 timeout_error
    529 overloaded_error        any other status: api_error (4xx: invalid_request_error)

`messages_error` renders one; `messages_error_for` renders ctxproxy's own errors (status kept);
`messages_error_from_chat` an OpenAI upstream's error body, status kept. An upstream's context
overflow (`context_length_exceeded`) is reported as Anthropic does, a 400 whose message starts
"prompt is too long", which Messages clients such as Claude Code act on by compacting.
An Anthropic upstream's errors need none of this: they pass through as they came.
"""

from __future__ import annotations

import json
from types import MappingProxyType

from proxy.errors import CtxProxyError
from proxy.types import JSON

ERROR_TYPES = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }
)
TOO_LONG = "prompt is too long"
OVERFLOW_CODES = ("context_length_exceeded", "string_above_max_length")


def error_type_for(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def messages_error(status: int, message: str, error_type: str | None = None) -> tuple[int, JSON]:
    """(status, body) of an Anthropic-shaped error; the type follows the status unless given."""
    kind = error_type or error_type_for(status)
    return status, {"type": "error", "error": {"type": kind, "message": message}}


def messages_error_for(error: CtxProxyError) -> tuple[int, JSON]:
    """One of ctxproxy's own errors (bad request, auth, upstream unreachable, …)."""
    return messages_error(error.status, error.message)


def messages_error_from_chat(status: int, body: bytes) -> tuple[int, JSON]:
    """An OpenAI-compatible upstream's error response, for a Messages client (status kept).

    A body that is not an OpenAI error object keeps its first 500 characters as the message."""
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        code = str(error.get("code") or "")
    else:
        message, code = (error if isinstance(error, str) else text[:500]), ""
    if code in OVERFLOW_CODES and not message.lower().startswith(TOO_LONG):
        return messages_error(400, f"{TOO_LONG}: {message}", "invalid_request_error")
    return messages_error(status, message)
