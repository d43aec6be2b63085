"""Compaction's pure decisions: threshold, split, summary prompt, splice, stored prefixes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.history import history_salt
from proxy.stages.compact import (
    PRESERVED_PREFIX,
    SUMMARY_PREFIX,
    CompactionPlan,
    CompactSettings,
    json_chars,
    make_compaction,
    plan_compaction,
    preserved_tool_content,
    run,
    should_compact,
    splice_summary,
    threshold_tokens,
)
from proxy.stages.summary_request import build_summary_body, build_transcript_body, extract_summary
from proxy.types import Message, SessionState
from tests.factories import assistant, call, draft, exchange, system, tool, turn, user
from tests.traces import TRACE_DIR

SETTINGS = CompactSettings()


def test_auto_threshold_is_window_minus_output_reserve_and_buffer() -> None:
    assert threshold_tokens(SETTINGS, model_window=128_000) == 95_000
    assert threshold_tokens(CompactSettings(threshold_tokens=6_000), model_window=128_000) == 6_000


def test_should_compact_only_strictly_over_the_threshold() -> None:
    assert not should_compact(6_000, threshold=6_000)
    assert should_compact(6_001, threshold=6_000)


@pytest.mark.parametrize(
    "kwargs", [{"keep_recent": -1}, {"soft_ratio": 0}, {"threshold_tokens": 0}, {"timeout_s": 0}]
)
def test_settings_are_checked_once(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CompactSettings(**kwargs)


def test_plan_keeps_the_last_keep_recent_messages() -> None:
    messages = [user(f"m{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(10)]
    assert plan_compaction(messages, keep_recent=4) == CompactionPlan(split=6)


def test_plan_moves_the_split_before_a_call_whose_result_would_be_kept() -> None:
    messages = [user("go"), assistant("ok"), user("list"), *exchange("c1", "files"), user("next")]
    # keep_recent=2 would keep [tool c1, user]: the call at index 3 must come along.
    assert plan_compaction(messages, keep_recent=2) == CompactionPlan(split=3)


def test_plan_keeps_parallel_results_with_their_call() -> None:
    calls = assistant(None, call("a"), call("b"), call("c"))
    messages = [user("u"), assistant("x"), user("v"), calls, tool("a", 1), tool("b", 2)]
    messages += [tool("c", 3), assistant("done")]
    assert plan_compaction(messages, keep_recent=3) == CompactionPlan(split=3)


def test_plan_is_none_when_nothing_but_a_summary_would_be_summarized() -> None:
    messages = [user(SUMMARY_PREFIX + "old"), user("a"), assistant("b"), user("c"), assistant("d")]
    assert plan_compaction(messages, keep_recent=4) is None
    assert plan_compaction(messages[1:], keep_recent=4) is None
    assert plan_compaction(exchange("c1", "x"), keep_recent=1) is None


def _history(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for index in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "calls"]))
        if kind == "calls":
            ids = [f"c{index}_{n}" for n in range(draw(st.integers(1, 3)))]
            messages.append(assistant(None, *(call(i) for i in ids)))
            messages.extend(tool(i, "x" * draw(st.integers(0, 50))) for i in ids)
        else:
            messages.append(user("u") if kind == "user" else assistant("a"))
    return messages


@given(messages=st.composite(_history)(), keep_recent=st.integers(0, 8))
@settings(max_examples=300, deadline=None)
def test_split_never_separates_tool_calls_from_results(
    messages: list[Message], keep_recent: int
) -> None:
    before = copy.deepcopy(messages)
    plan = plan_compaction(messages, keep_recent=keep_recent)
    assert messages == before
    if plan is None:
        return
    assert 0 < plan.split <= max(len(messages) - keep_recent, 0)
    kept = messages[plan.split :]
    assert not kept or kept[0]["role"] != "tool"
    summarized_calls = {c["id"] for m in messages[: plan.split] for c in m.get("tool_calls", ())}
    assert not any(m.get("tool_call_id") in summarized_calls for m in kept)


def test_summary_body_reuses_the_prefix_then_asks_once() -> None:
    prefix = {
        "model": "gpt-4o",
        "messages": [system("sys"), user("My name is Ada; invoice 4711 is due 2024-05-01.")],
        "tools": [{"type": "function", "function": {"name": "bash"}}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": {"type": "json_object"},
        "prompt_cache_key": "k",
    }
    snapshot = copy.deepcopy(prefix)
    body = build_summary_body(prefix, settings=CompactSettings(max_summary_words=300), model="m")
    assert prefix == snapshot
    assert body["messages"][:2] == prefix["messages"]
    assert body["tools"] == prefix["tools"] and body["prompt_cache_key"] == "k"
    assert len(body["messages"]) == 3 and body["messages"][-1]["role"] == "user"
    instruction = body["messages"][-1]["content"]
    assert "<analysis>" in instruction and "<summary>" in instruction and "300 words" in instruction
    assert body["tool_choice"] == "none" and body["stream"] is False and body["model"] == "m"
    assert "stream_options" not in body and "response_format" not in body
    assert 0 < body["max_tokens"] <= 20_000


def test_summary_body_uses_the_configured_model_and_reasoning_token_limit() -> None:
    settings_ = CompactSettings(summarizer_model="o4-mini")
    body = build_summary_body({"messages": [user("x")]}, settings=settings_, model="gpt-4o")
    assert body["model"] == "o4-mini" and "max_completion_tokens" in body
    assert "tool_choice" not in body and "max_tokens" not in body


def test_transcript_body_carries_every_message_as_text() -> None:
    messages = [user("deploy to eu-west-3"), *exchange("c1", "exit 0", name="deploy")]
    body = build_transcript_body(messages, settings=SETTINGS, model="gpt-4o")
    text = "\n".join(m["content"] for m in body["messages"])
    assert "eu-west-3" in text and "deploy" in text and "exit 0" in text
    assert body["stream"] is False and "tools" not in body


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<analysis>think</analysis>\n<summary>\nfacts\n</summary>", "facts"),
        ("<analysis>think</analysis><summary>cut off", "cut off"),
        ("plain answer", "plain answer"),
        ("<analysis>only thinking</analysis> the rest", "the rest"),
        ("<summary>a</summary> <summary>b</summary>", "b"),
        ("", ""),
    ],
)
def test_extract_summary_keeps_only_the_summary(text: str, expected: str) -> None:
    assert extract_summary(text) == expected


def test_splice_puts_one_user_summary_then_preserved_then_kept() -> None:
    messages = [user("a"), assistant("b"), user("c"), assistant("d")]
    snapshot = copy.deepcopy(messages)
    preserved = ({"role": "user", "content": PRESERVED_PREFIX + "skill]\nbody"},)
    out = splice_summary(messages, CompactionPlan(split=2), "S", preserved=preserved)
    assert out == [{"role": "user", "content": SUMMARY_PREFIX + "S"}, *preserved, *messages[2:]]
    assert messages == snapshot


def test_preserved_tool_content_is_capped_and_oldest_dropped_first() -> None:
    settings_ = CompactSettings(
        preserve_tools=("skill",), preserve_max_tokens=10, preserve_total_tokens=40
    )
    messages = [
        *exchange("c1", "old-skill", name="skill"),
        *exchange("c2", "ls output", name="bash"),
        *exchange("c3", "y" * 100, name="skill"),
        *exchange("c4", "new-skill", name="skill"),
    ]
    out = preserved_tool_content(messages, settings=settings_)
    texts = [m["content"] for m in out]
    assert all(m["role"] == "user" for m in out)
    assert texts[-1] == PRESERVED_PREFIX + "skill]\nnew-skill"
    assert texts[0].startswith(PRESERVED_PREFIX + "skill]\n" + "y" * 40 + "\n...(truncated")
    assert not any("old-skill" in t or "ls output" in t for t in texts)


def test_preserved_content_survives_a_second_compaction() -> None:
    settings_ = CompactSettings(preserve_tools=("skill",))
    carried = {"role": "user", "content": PRESERVED_PREFIX + "skill]\nrules"}
    messages = [user(SUMMARY_PREFIX + "s"), carried, user("more"), assistant("ok")]
    assert preserved_tool_content(messages, settings=settings_) == (carried,)


def _stored(history: list[Message], covers: int, summary: str) -> Any:
    salt = history_salt("default", [system("sys")])
    replacement = [{"role": "user", "content": SUMMARY_PREFIX + summary}]
    return make_compaction(history, CompactionPlan(split=covers), replacement, salt=salt)


def test_stored_compaction_maps_a_later_full_history_to_summary_and_newer_messages() -> None:
    early = [user("a"), assistant("b"), user("c"), assistant("d")]
    later = [system("sys"), *early, user("e"), assistant("f")]
    request = draft(later)
    snapshot = copy.deepcopy(later)
    out, report = run(request, turn(state=SessionState(compactions=(_stored(early, 2, "S"),))),
                      settings=SETTINGS)  # fmt: skip
    assert out.messages == (user(SUMMARY_PREFIX + "S"), user("c"), assistant("d"), *later[5:])
    saved = json_chars(early[:2]) - json_chars([user(SUMMARY_PREFIX + "S")])
    assert report.counters == {
        "messages_before": 6, "messages_after": 5, "applied": 1, "chars_removed": saved
    }
    assert later == snapshot and out.system == request.system


def test_the_longest_stored_prefix_wins() -> None:
    history = [user(str(i)) for i in range(8)]
    state = SessionState(compactions=(_stored(history, 2, "first"), _stored(history, 5, "second")))
    out, _ = run(draft([system("sys"), *history]), turn(state=state), settings=SETTINGS)
    assert out.messages == (user(SUMMARY_PREFIX + "second"), *history[5:])


def test_an_edited_history_or_system_prompt_does_not_match() -> None:
    history = [user("a"), assistant("b"), user("c"), assistant("d")]
    state = SessionState(compactions=(_stored(history, 2, "S"),))
    edited = [system("sys"), user("A"), *history[1:]]
    other_system = [system("other"), *history]
    for messages in (edited, other_system):
        out, report = run(draft(messages), turn(state=state), settings=SETTINGS)
        assert out.messages == tuple(messages[1:]) and report.counters["applied"] == 0


def test_disabled_stage_applies_nothing() -> None:
    history = [user("a"), assistant("b"), user("c")]
    state = SessionState(compactions=(_stored(history, 2, "S"),))
    out, _ = run(draft([system("sys"), *history]), turn(state=state),
                 settings=CompactSettings(enabled=False))  # fmt: skip
    assert out.messages == tuple(history)


TRACES = TRACE_DIR


@pytest.mark.skipif(not TRACES.is_dir(), reason="no shared traces")
@pytest.mark.parametrize("keep_recent", [1, 4, 10])
def test_splitting_real_agent_sessions_keeps_every_tool_result_with_its_call(
    keep_recent: int,
) -> None:
    for path in sorted(TRACES.glob("*.json")):
        messages = [m for m in json.loads(path.read_text())["messages"] if m["role"] != "system"]
        plan = plan_compaction(messages, keep_recent=keep_recent)
        assert plan is not None, path.name
        out = splice_summary(messages, plan, "S")
        called: set[str] = set()
        for message in out:
            called |= {c["id"] for c in message.get("tool_calls", ())}
            assert message["role"] != "tool" or message["tool_call_id"] in called, path.name
