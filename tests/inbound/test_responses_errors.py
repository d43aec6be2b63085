"""The Responses edge's own refusals, in the OpenAI error shape, and in-band failure codes."""

from __future__ import annotations

from proxy.inbound.responses_errors import (
    compaction_refused,
    failure_code,
    previous_response_not_found,
    request_error,
)


def test_refusals_are_400s_in_the_openai_shape_saying_what_to_fix() -> None:
    status, body = request_error("input.2.call_id: Field required")
    assert status == 400
    assert body == {
        "error": {
            "message": "input.2.call_id: Field required",
            "type": "invalid_request_error",
            "param": "input.2.call_id",
            "code": None,
        }
    }
    status, body = previous_response_not_found("resp_123")
    assert status == 400 and body["error"]["code"] == "previous_response_not_found"
    assert (
        "resp_123" in body["error"]["message"] and body["error"]["param"] == "previous_response_id"
    )
    status, body = compaction_refused(3, "compaction handle expired")
    assert status == 400 and body["error"]["code"] == "invalid_encrypted_content"
    assert body["error"]["message"].startswith("input[3]: compaction handle expired")


def test_failure_codes_keep_what_clients_act_on() -> None:
    assert (
        failure_code({"code": "context_length_exceeded", "message": "x"})
        == "context_length_exceeded"
    )
    assert failure_code({"type": "rate_limit_error"}) == "rate_limit_exceeded"
    assert failure_code({"type": "api_error", "code": "weird"}) == "server_error"
    assert failure_code("boom") == "server_error"
