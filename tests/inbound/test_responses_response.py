"""A chat upstream's completion → a Response the openai SDK accepts."""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletion

from proxy.inbound.responses_response import (
    chat_response_to_response,
    response_id_for,
    responses_usage,
)
from tests.inbound.responses_builders import valid_response

JSON = dict[str, Any]
RID = response_id_for("req-1")
USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 40,
    "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1024},
    "completion_tokens_details": {"reasoning_tokens": 12},
}
REQUEST: JSON = {
    "model": "gpt-5-codex",
    "instructions": "Be brief.",
    "input": "hi",
    "tools": [
        {"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": False},
        {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
    ],
    "metadata": {"k": "v"},
    "previous_response_id": "resp_prev",
    "store": False,
}


def completion(message: JSON, finish: str = "stop", usage: JSON | None = None) -> JSON:
    """A recorded-shape `chat.completion`, checked against the openai SDK's type."""
    out = {
        "id": "chatcmpl-9xYz",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage or USAGE,
    }
    ChatCompletion.model_validate(out)
    return out


def answer(message: JSON, finish: str = "stop", usage: JSON | None = None) -> JSON:
    out = chat_response_to_response(
        completion(message, finish, usage),
        request=REQUEST,
        response_id=RID,
        created_at=1_700_000_001,
    )
    return valid_response(out)


def test_a_text_answer_is_one_message_item_and_the_request_is_echoed() -> None:
    out = answer({"role": "assistant", "content": "Hello!", "refusal": None})
    assert out["id"] == RID and out["object"] == "response" and out["status"] == "completed"
    assert out["output"] == [
        {
            "id": f"msg_{RID[5:]}_0",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        }
    ]
    assert out["instructions"] == "Be brief." and out["tools"] == REQUEST["tools"]
    assert out["metadata"] == {"k": "v"} and out["previous_response_id"] == "resp_prev"
    assert out["store"] is False and out["model"] == "gpt-4o-2024-08-06"
    assert out["usage"] == {
        "input_tokens": 1200,
        "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 0},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 1240,
    }


def test_tool_calls_are_function_calls_and_a_custom_tools_call_carries_its_input() -> None:
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "shell", "arguments": '{"command":"ls"}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "apply_patch", "arguments": '{"input":"diff"}'},
        },
    ]
    out = answer({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")
    assert out["output"] == [
        {
            "id": f"fc_{RID[5:]}_0",
            "type": "function_call",
            "call_id": "call_1",
            "name": "shell",
            "arguments": '{"command":"ls"}',
            "status": "completed",
        },
        {
            "id": f"ctc_{RID[5:]}_1",
            "type": "custom_tool_call",
            "call_id": "call_2",
            "name": "apply_patch",
            "input": "diff",
        },
    ]


def test_a_length_cut_is_incomplete_and_a_refusal_is_a_refusal_part() -> None:
    cut = answer({"role": "assistant", "content": "Once upon"}, "length")
    assert cut["status"] == "incomplete" and cut["incomplete_details"] == {
        "reason": "max_output_tokens"
    }
    assert cut["output"][0]["status"] == "incomplete"
    refused = answer({"role": "assistant", "content": None, "refusal": "I can't."})
    assert refused["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't."}]


def test_an_empty_answer_has_no_output_and_usage_defaults_to_zeros() -> None:
    out = answer(
        {"role": "assistant", "content": ""},
        usage={"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5},
    )
    assert out["output"] == []
    assert responses_usage(None)["total_tokens"] == 0


def test_anthropic_translated_usage_keeps_cache_reads_and_writes() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "cache_read_input_tokens": 60,
        "cache_creation_input_tokens": 30,
    }
    assert responses_usage(usage)["input_tokens_details"] == {
        "cached_tokens": 60,
        "cache_write_tokens": 30,
    }
    assert responses_usage(usage)["total_tokens"] == 105


def test_response_ids_are_stable_for_a_seed() -> None:
    assert response_id_for("a") == response_id_for("a") != response_id_for("b")
    assert response_id_for("a").startswith("resp_") and len(response_id_for("a")) == 53
