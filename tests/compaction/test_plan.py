"""Which messages a compaction covers and what replaces them: the cut, preserved output, splice."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.compaction.plan import (
    PRESERVED_PREFIX,
    SUMMARY_PREFIX,
    CompactionPlan,
    flatten_to_text,
    folded_chars,
    plan_compaction,
    preserved_tool_content,
    splice_summary,
)
from proxy.compaction.policy import CompactSettings
from proxy.types import Message
from tests.factories import assistant, call, exchange, system, tool, user
from tests.traces import TRACE_DIR


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


def test_plan_is_none_when_only_system_messages_and_a_summary_come_before_the_kept_part() -> None:
    messages = [user(SUMMARY_PREFIX + "old"), system("be brief"), user("a"), assistant("b")]
    messages += [user("c"), assistant("d")]
    assert plan_compaction(messages, keep_recent=4) is None
    assert plan_compaction(messages, keep_recent=3) == CompactionPlan(split=3)


def test_folded_chars_count_only_what_no_summary_holds_yet() -> None:
    preserved = user(PRESERVED_PREFIX + "skill]\nrules")
    messages = [user(SUMMARY_PREFIX + "old" * 100), preserved, system("x" * 500), user("a")]
    messages += [assistant("b"), user("c")]
    plan = CompactionPlan(split=5)
    assert folded_chars(messages, plan) == len(json.dumps([user("a"), assistant("b")],
                                                          separators=(",", ":")))  # fmt: skip
    assert folded_chars(messages, CompactionPlan(split=3)) == len("[]")


def test_with_keep_first_user_the_task_is_not_news() -> None:
    task = user("fix the bug; when done run `submit`" * 20)
    kept = [task, user(SUMMARY_PREFIX + "old"), user("a"), assistant("b"), user("c")]
    kept += [assistant("d")]
    assert plan_compaction(kept, keep_recent=4, keep_first_user=True) is None
    assert plan_compaction(kept, keep_recent=4) == CompactionPlan(split=2)  # the task is folded
    folded = json.dumps([user("a"), assistant("b")], separators=(",", ":"))
    assert folded_chars(kept, CompactionPlan(split=4), keep_first_user=True) == len(folded)
    alone = [task, user("a"), assistant("b"), user("c")]  # a first compaction of the task alone
    assert plan_compaction(alone, keep_recent=3, keep_first_user=True) is None
    assert folded_chars(alone, CompactionPlan(split=1), keep_first_user=True) == len("[]")
    compact = json.dumps([task], separators=(",", ":"))
    assert folded_chars(alone, CompactionPlan(split=1)) == len(compact)


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


def test_splice_puts_one_user_summary_then_preserved_then_kept() -> None:
    messages = [user("a"), assistant("b"), user("c"), assistant("d")]
    snapshot = copy.deepcopy(messages)
    preserved = ({"role": "user", "content": PRESERVED_PREFIX + "skill]\nbody"},)
    out = splice_summary(messages, CompactionPlan(split=2), "S", preserved=preserved)
    assert out == [{"role": "user", "content": SUMMARY_PREFIX + "S"}, *preserved, *messages[2:]]
    assert messages == snapshot


def test_splice_puts_the_kept_first_user_message_first_and_ends_the_summary_with_its_line() -> None:
    messages = [user("task"), assistant("b"), user("c"), assistant("d")]
    line = '[Messages 0-1 are summarized above; full text: ctx_recall(ref="turns:0-1")]'
    out = splice_summary(messages, CompactionPlan(split=2), "S", first_user=messages[0],
                         last_line=line)  # fmt: skip
    assert out == [messages[0], user(f"{SUMMARY_PREFIX}S\n{line}"), *messages[2:]]
    assert out[0] is messages[0]


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


def test_plan_keeps_the_last_message_even_with_keep_recent_zero() -> None:
    messages = [user("a"), assistant("b"), user("c")]
    assert plan_compaction(messages, keep_recent=0) == CompactionPlan(split=2)
    assert plan_compaction(messages[:1], keep_recent=0) is None


def test_plan_of_too_few_messages_is_none() -> None:
    messages = [user("a"), assistant("b")]
    assert plan_compaction(messages, keep_recent=2) is None
    assert plan_compaction(messages, keep_recent=5) is None
    assert plan_compaction([], keep_recent=0) is None


def test_plan_takes_only_a_user_message_with_the_summary_prefix_for_an_earlier_summary() -> None:
    as_assistant = {"role": "assistant", "content": SUMMARY_PREFIX + "not ours"}
    messages = [as_assistant, user("a"), assistant("b")]
    assert plan_compaction(messages, keep_recent=2) == CompactionPlan(split=1)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, ""),
        ("", ""),
        ("plain", "plain"),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
        (["x", {"type": "text", "text": "y"}], "x\ny"),
        (
            [{"type": "image_url", "image_url": {"url": "u"}}],
            '{"type":"image_url","image_url":{"url":"u"}}',
        ),
        ({"rows": [1, 2]}, '{"rows":[1,2]}'),
        (7, "7"),
    ],
)
def test_flatten_to_text_joins_parts_as_text_and_writes_anything_else_as_json(
    content: Any, expected: str
) -> None:
    before = copy.deepcopy(content)
    assert flatten_to_text(content) == expected
    assert content == before


def test_preserved_tool_content_is_empty_without_preserve_tools() -> None:
    messages = exchange("c1", "rules", name="skill")
    assert preserved_tool_content(messages, settings=CompactSettings()) == ()


def test_preserved_tool_content_keeps_a_repeated_text_once_at_its_newest_place() -> None:
    settings_ = CompactSettings(preserve_tools=("skill", "read"))
    messages = [
        *exchange("c1", "rules", name="skill"),
        *exchange("c2", "file", name="read"),
        *exchange("c3", "rules", name="skill"),
    ]
    before = copy.deepcopy(messages)
    out = preserved_tool_content(messages, settings=settings_)
    assert [m["content"] for m in out] == [
        PRESERVED_PREFIX + "read]\nfile",
        PRESERVED_PREFIX + "skill]\nrules",
    ]
    assert messages == before


def test_splice_drops_an_earlier_summary_inside_the_summarized_part() -> None:
    messages = [user(SUMMARY_PREFIX + "old"), user("a"), assistant("b"), user("c")]
    out = splice_summary(messages, CompactionPlan(split=3), "new")
    assert out == [user(SUMMARY_PREFIX + "new"), user("c")]
