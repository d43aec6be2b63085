"""`report_usage = "client"`: input tokens scaled to the client's full history; cached tokens
never above the input reported; output tokens never scaled; anything else left as it came."""

from __future__ import annotations

from proxy.inbound.usage_report import history_scale, scaled_chat_usage, scaled_responses_usage


def test_the_scale_is_the_clients_conversation_over_what_was_sent() -> None:
    client = {"messages": [{"role": "user", "content": "x" * 900}]}
    sent = {"messages": [{"role": "user", "content": "x" * 300}]}
    assert 2.5 < history_scale(client, sent) < 3
    assert history_scale(client, client) == 1.0


def test_chat_usage_scales_prompt_tokens_and_keeps_the_rest() -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "total_tokens": 1050,
        "prompt_tokens_details": {"cached_tokens": 800},
    }
    assert scaled_chat_usage(usage, 3.0) == {
        "prompt_tokens": 3000,
        "completion_tokens": 50,
        "total_tokens": 3050,
        "prompt_tokens_details": {"cached_tokens": 800},
    }
    shrunk = scaled_chat_usage(usage, 0.5)
    assert (
        shrunk["prompt_tokens"] == 500 and shrunk["prompt_tokens_details"]["cached_tokens"] == 500
    )
    assert scaled_chat_usage(None, 2.0) is None
    assert scaled_chat_usage({"prompt_tokens": "many"}, 2.0) == {"prompt_tokens": "many"}


def test_responses_usage_scales_input_tokens_and_keeps_the_rest() -> None:
    usage = {
        "input_tokens": 200,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 209,
    }
    out = scaled_responses_usage(usage, 2.0)
    assert out["input_tokens"] == 400 and out["total_tokens"] == 409
    assert out["input_tokens_details"] == usage["input_tokens_details"]
    assert out["output_tokens_details"] == {"reasoning_tokens": 4}
    assert usage["input_tokens"] == 200  # not mutated
