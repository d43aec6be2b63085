"""An OpenAI upstream's chat completion → a Messages answer the anthropic SDK accepts."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion

from proxy.inbound.messages_response import chat_response_to_messages, messages_usage

JSON = dict[str, Any]


def completion(message: JSON, finish: str = "stop", usage: JSON | None = None) -> JSON:
    """A recorded-shape `chat.completion`, checked against the openai SDK's type."""
    out = {
        "id": "chatcmpl-9xYz",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage
        or {
            "prompt_tokens": 1200,
            "completion_tokens": 40,
            "total_tokens": 1240,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        },
    }
    ChatCompletion.model_validate(out)
    return out


def test_text_answer_becomes_a_message_with_usage_split_into_fresh_and_cached() -> None:
    answer = completion({"role": "assistant", "content": "Hello!", "refusal": None})
    out = chat_response_to_messages(answer, model="claude-sonnet-4-5")
    Message.model_validate(out)
    assert out == {
        "id": "msg_chatcmpl-9xYz",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello!"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 176,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1024,
            "output_tokens": 40,
        },
    }


def test_tool_calls_become_tool_use_blocks_after_the_text() -> None:
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "Read", "arguments": '{"file_path": "/a"}'},
        },
        {"id": "call_2", "type": "function", "function": {"name": "Bash", "arguments": "not json"}},
    ]
    answer = completion(
        {"role": "assistant", "content": "Reading.", "tool_calls": calls}, "tool_calls"
    )
    out = chat_response_to_messages(answer)
    message = Message.model_validate(out)
    assert message.stop_reason == "tool_use"
    assert out["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "call_1", "name": "Read", "input": {"file_path": "/a"}},
        {
            "type": "tool_use",
            "id": "call_2",
            "name": "Bash",
            "input": {"raw_arguments": "not json"},
        },
    ]
    assert out["model"] == "gpt-4o-2024-08-06"


def test_a_call_without_an_id_gets_one() -> None:
    call = {"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    out = chat_response_to_messages(
        completion({"role": "assistant", "content": None, "tool_calls": [call]})
    )
    assert out["content"][0]["id"] == "toolu_msg_chatcmpl-9xYz_0"


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "refusal"),
    ],
)
def test_finish_reasons_map_to_stop_reasons(finish: str, stop: str) -> None:
    out = chat_response_to_messages(completion({"role": "assistant", "content": "x"}, finish))
    assert Message.model_validate(out).stop_reason == stop


def test_a_refusal_becomes_text_and_an_empty_answer_no_block() -> None:
    refused = completion({"role": "assistant", "content": None, "refusal": "I can't."}, "stop")
    assert chat_response_to_messages(refused)["content"] == [{"type": "text", "text": "I can't."}]
    empty = completion({"role": "assistant", "content": ""})
    assert chat_response_to_messages(empty)["content"] == []


def test_usage_counts_cache_creation_a_gateway_passed_through_and_never_goes_negative() -> None:
    assert messages_usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "cache_read_input_tokens": 60,
            "cache_creation_input_tokens": 30,
        }
    ) == {
        "input_tokens": 10,
        "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 60,
        "output_tokens": 5,
    }
    assert (
        messages_usage({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}})[
            "input_tokens"
        ]
        == 0
    )
    assert messages_usage(None) == {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }
