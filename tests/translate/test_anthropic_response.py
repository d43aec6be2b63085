"""Golden tests of Messages answers and errors → chat-completions (checked by openai SDK types)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from proxy.translate.anthropic_response import to_chat_completion, to_openai_error

USAGE = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 200,
    "cache_read_input_tokens": 3000,
    "output_tokens": 42,
}


def message(
    *content: dict[str, Any], stop_reason: str = "end_turn", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": USAGE,
        **extra,
    }


def completion(answer: dict[str, Any]) -> dict[str, Any]:
    before = copy.deepcopy(answer)
    out = to_chat_completion(answer, model="claude-sonnet", created=1700000000)
    assert answer == before
    ChatCompletion.model_validate(out)
    return out


def test_text_answer() -> None:
    out = completion(message({"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}))
    assert out["id"] == "msg_01" and out["object"] == "chat.completion"
    assert (out["model"], out["created"]) == ("claude-sonnet", 1700000000)
    assert out["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello there", "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]


def test_usage_counts_cache_reads_and_writes_as_prompt_tokens() -> None:
    out = completion(message({"type": "text", "text": "x"}))
    assert out["usage"] == {
        "prompt_tokens": 3210,
        "completion_tokens": 42,
        "total_tokens": 3252,
        "prompt_tokens_details": {"cached_tokens": 3000},
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 3000,
    }


def test_usage_keeps_the_split_of_cache_writes_by_lifetime() -> None:
    split = {"ephemeral_5m_input_tokens": 50, "ephemeral_1h_input_tokens": 150}
    out = completion(
        message({"type": "text", "text": "x"}, usage={**USAGE, "cache_creation": split})
    )
    assert out["usage"]["cache_creation"] == split


def test_parallel_tool_use_becomes_tool_calls_with_json_string_arguments() -> None:
    answer = message(
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/tmp"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
        stop_reason="tool_use",
    )
    out = completion(answer)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me look."
    calls = choice["message"]["tool_calls"]
    assert [(c["id"], c["type"], c["function"]["name"]) for c in calls] == [
        ("toolu_1", "function", "ls"),
        ("toolu_2", "function", "now"),
    ]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"path": "/tmp"}, {}]


def test_tool_only_answer_has_null_content_and_thinking_goes_to_reasoning_content() -> None:
    answer = message(
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        stop_reason="tool_use",
    )
    reply = completion(answer)["choices"][0]["message"]
    assert reply["content"] is None
    assert reply["reasoning_content"] == "hmm"


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "stop"),
        ("model_context_window_exceeded", "length"),
    ],
)
def test_stop_reasons_map_to_finish_reasons(stop_reason: str, finish_reason: str) -> None:
    out = completion(message({"type": "text", "text": "x"}, stop_reason=stop_reason))
    assert out["choices"][0]["finish_reason"] == finish_reason


def anthropic_error(kind: str, text: str) -> bytes:
    return json.dumps(
        {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_1"}
    ).encode()


@pytest.mark.parametrize(
    ("status", "kind", "text", "code"),
    [
        (400, "invalid_request_error", "max_tokens: Field required", None),
        (401, "authentication_error", "invalid x-api-key", "invalid_api_key"),
        (
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
            "rate_limit_exceeded",
        ),
        (529, "overloaded_error", "Overloaded", "overloaded"),
        (500, "api_error", "Internal server error", None),
    ],
)
def test_anthropic_errors_keep_their_status_type_and_message(
    status: int, kind: str, text: str, code: str | None
) -> None:
    assert to_openai_error(status, anthropic_error(kind, text)) == (
        status,
        {"error": {"message": text, "type": kind, "param": None, "code": code}},
    )


def test_a_prompt_too_long_error_carries_the_openai_context_length_code() -> None:
    body = anthropic_error(
        "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
    )
    _, error = to_openai_error(400, body)
    assert error["error"]["code"] == "context_length_exceeded"


def test_a_non_json_error_body_keeps_its_text_and_a_type_from_the_status() -> None:
    status, error = to_openai_error(529, b"<html>overloaded</html>")
    assert status == 529
    assert error == {
        "error": {
            "message": "<html>overloaded</html>",
            "type": "overloaded_error",
            "param": None,
            "code": "overloaded",
        }
    }
    assert to_openai_error(502, b"bad gateway")[1]["error"]["type"] == "api_error"
