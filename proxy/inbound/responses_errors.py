"""Errors for a Responses client (pure): the OpenAI error shape, as on every OpenAI route.

    {"error": {"message": …, "type": …, "param": …, "code": …}}

A chat upstream's errors are already in this shape (the Anthropic adapter translates its own),
so they pass through as they came. This module renders the edge's own refusals, each a 400 whose
message says what to fix:

    request_error(problem)                  a body `request_problem` refused
    previous_response_not_found(id)         an unknown `previous_response_id`, in front of an
                                            upstream that cannot resolve it
    compaction_refused(index, reason)       a compaction item whose handle was refused
                                            (`proxy.inbound.compaction_handle`)

`failure_code` is the `error.code` of a `response.failed` event for an upstream's in-band error:
its own code when a Responses client acts on it (`context_length_exceeded` makes Codex compact),
else `rate_limit_exceeded` or `server_error`.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import error_body
from proxy.types import JSON

INVALID = "invalid_request_error"
KNOWN_CODES = ("context_length_exceeded", "rate_limit_exceeded", "insufficient_quota")


def request_error(problem: str) -> tuple[int, JSON]:
    """(400, body) for a request the edge cannot take."""
    return 400, error_body(problem, INVALID, param=problem.split(":", 1)[0] or None)


def previous_response_not_found(response_id: str) -> tuple[int, JSON]:
    message = (
        f"Previous response with id '{response_id}' not found: ctxproxy keeps the responses it "
        "served for the session's lifetime, per tenant; send the full input instead."
    )
    return 400, error_body(
        message, INVALID, param="previous_response_id", code="previous_response_not_found"
    )


def compaction_refused(index: int, reason: str) -> tuple[int, JSON]:
    message = f"input[{index}]: {reason}. Its summary was not used."
    return 400, error_body(
        message,
        INVALID,
        param=f"input[{index}].encrypted_content",
        code="invalid_encrypted_content",
    )


def failure_code(error: Any) -> str:
    """The `response.failed` error code for an upstream's in-band error object."""
    if not isinstance(error, dict):
        return "server_error"
    code = str(error.get("code") or "")
    if code in KNOWN_CODES:
        return code
    kind = str(error.get("type") or "")
    return "rate_limit_exceeded" if "rate_limit" in kind else "server_error"
