"""Errors for a Messages client: Anthropic's shape, Anthropic's statuses."""

from __future__ import annotations

import pytest
from anthropic.types import ErrorResponse

from proxy.errors import BadRequest, UpstreamTimeout, UpstreamUnreachable
from proxy.inbound.messages_errors import (
    messages_error,
    messages_error_for,
    messages_error_from_chat,
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
        (422, "invalid_request_error"),
        (502, "api_error"),
    ],
)
def test_each_status_gets_anthropics_error_type(status: int, kind: str) -> None:
    assert messages_error(status, "m") == (
        status,
        {"type": "error", "error": {"type": kind, "message": "m"}},
    )


def test_ctxproxys_own_errors_keep_their_status_and_validate_as_sdk_errors() -> None:
    for error in (BadRequest("bad"), UpstreamUnreachable("down"), UpstreamTimeout("slow")):
        status, body = messages_error_for(error)
        assert status == error.status
        if body["error"]["type"] != "request_too_large":
            ErrorResponse.model_validate(body)
    assert messages_error_for(UpstreamTimeout("slow"))[1]["error"]["type"] == "timeout_error"


def test_an_openai_upstream_error_keeps_status_and_message() -> None:
    body = b'{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}'
    assert messages_error_from_chat(429, body) == (
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limit reached"}},
    )


def test_a_context_overflow_reads_as_anthropics_prompt_is_too_long() -> None:
    body = (
        b'{"error": {"message": "This model\'s maximum context length is 128000 tokens.",'
        b' "type": "invalid_request_error", "code": "context_length_exceeded"}}'
    )
    status, out = messages_error_from_chat(400, body)
    assert status == 400
    assert out["error"]["message"].startswith("prompt is too long: This model's maximum")


def test_a_gateway_page_keeps_its_first_characters() -> None:
    status, out = messages_error_from_chat(502, b"<html>Bad Gateway</html>" + b"x" * 1000)
    assert status == 502 and out["error"] == {
        "type": "api_error",
        "message": ("<html>Bad Gateway</html>" + "x" * 1000)[:500],
    }
