"""Usage summed over rounds, and non-streamed rounds combined into the client's one answer."""

from __future__ import annotations

import copy
from typing import Any

from openai.types.chat import ChatCompletion

from proxy.recall.rounds import Round, combine_completions, round_of, sum_usage
from proxy.types import JSON
from tests.factories import call


def completion(
    chat_id: str,
    *,
    content: str | None = None,
    calls: list[JSON] | None = None,
    usage: tuple[int, int] = (100, 10),
) -> JSON:
    message: JSON = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    prompt, completion_tokens = usage
    return {
        "id": chat_id,
        "object": "chat.completion",
        "created": 1_700_000_000 + len(chat_id),
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }


RECALL = call("call_r", "ctx_recall", {"ref": "call_1"})
BASH = call("call_b", "bash", {"cmd": "ls"})


def test_sum_usage_adds_counts_and_nested_details_and_keeps_the_rest() -> None:
    usages: list[dict[str, Any]] = [
        {"prompt_tokens": 10, "cost": 0.5, "details": {"cached_tokens": 4}, "tier": "a"},
        {
            "prompt_tokens": 5,
            "cost": 0.25,
            "details": {"cached_tokens": None},
            "tier": "b",
            "extra": 1,
        },
    ]
    assert sum_usage(usages) == {
        "prompt_tokens": 15,
        "cost": 0.75,
        "details": {"cached_tokens": 4},
        "tier": "b",
        "extra": 1,
    }
    assert sum_usage([]) is None
    assert sum_usage([{"flag": True}, {"flag": False}]) == {"flag": False}  # a bool is no count


def test_round_of_reads_a_completion() -> None:
    read = round_of(completion("c", content="hi", calls=[RECALL, BASH]), tool_name="ctx_recall")
    assert read == Round(
        (RECALL,),
        (BASH,),
        "hi",
        "tool_calls",
        {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "total_tokens": 110,
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    )
    assert round_of({"choices": []}, tool_name="ctx_recall") == Round((), (), "", None, None)


def test_one_round_without_recall_comes_back_as_it_is() -> None:
    only = completion("c", content="hi", calls=[BASH])
    assert combine_completions([only], tool_name="ctx_recall") is only


def test_rounds_combine_into_one_answer_without_a_trace_of_recall() -> None:
    rounds = [
        completion("chatcmpl-1", content="Let me check. ", calls=[RECALL], usage=(100, 5)),
        completion("chatcmpl-22", content="It is 42.", usage=(180, 7)),
    ]
    before = copy.deepcopy(rounds)
    answer = combine_completions(rounds, tool_name="ctx_recall")
    ChatCompletion.model_validate(answer)
    assert rounds == before
    assert (answer["id"], answer["created"]) == ("chatcmpl-1", rounds[0]["created"])
    message = answer["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Let me check. It is 42.", "refusal": None}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {
        "prompt_tokens": 280,
        "completion_tokens": 12,
        "total_tokens": 292,
        "completion_tokens_details": {"reasoning_tokens": 4},
    }


def test_a_last_round_still_calling_keeps_only_the_clients_calls() -> None:
    rounds = [completion("c1", calls=[RECALL]), completion("c2", calls=[RECALL, BASH])]
    answer = combine_completions(rounds, tool_name="ctx_recall")
    assert answer["choices"][0]["message"]["tool_calls"] == [BASH]
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    only_recall = combine_completions([completion("c1", calls=[RECALL])], tool_name="ctx_recall")
    assert "tool_calls" not in only_recall["choices"][0]["message"]
    assert only_recall["choices"][0]["finish_reason"] == "stop"
