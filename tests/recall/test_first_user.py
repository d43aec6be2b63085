"""The first user message kept before a compaction's summary."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.recall.first_user import kept_first_user
from proxy.recall.index import build_index
from tests.factories import assistant, system, user

CARRIED = ("[Conversation summary]\n", "[Preserved tool output: ")


def test_a_short_first_user_message_is_kept_as_the_very_same_object() -> None:
    task = user("Fix the bug. When done, run `submit`.")
    messages = [assistant("hello"), task, user("more")]
    assert kept_first_user(messages, max_chars=8_000, tool_name="ctx_recall") is task


def test_a_long_one_keeps_head_and_tail_and_names_its_recall_ref() -> None:
    text = "TASK " + "x" * 20_000 + " SUBMIT WITH `echo done`"
    message = {"role": "user", "content": text, "name": "alice"}
    before = copy.deepcopy(message)
    kept = kept_first_user([assistant("hi"), message], max_chars=8_000, tool_name="ctx_recall")
    assert kept is not None and message == before
    content = kept["content"]
    assert len(content) <= 8_000 and kept["name"] == "alice"
    assert content.startswith("TASK ") and content.endswith(" SUBMIT WITH `echo done`")
    assert 'chars cut here; full text: ctx_recall(ref="turns:1-1")]' in content


def test_without_recall_the_cut_line_names_no_call() -> None:
    kept = kept_first_user([user("z" * 9_000)], max_chars=1_000, tool_name="")
    assert kept is not None
    assert "\n[... " in kept["content"] and "chars cut here]\n" in kept["content"]
    assert "ref=" not in kept["content"] and len(kept["content"]) <= 1_000


def test_the_ref_of_a_cut_first_message_recalls_it_exactly() -> None:
    text = "\n".join(f"rule {i}" for i in range(3_000))
    history = [user(text), assistant("ok")]
    kept = kept_first_user(history, max_chars=1_000, tool_name="ctx_recall")
    assert kept is not None
    index = build_index(
        [system("s"), *history], [system("s"), *history], covers=0, tool_name="ctx_recall"
    )
    assert index.resolve("turns:0-0").item == ("turns:0-0", "summary", text)


def test_a_second_compaction_keeps_the_kept_message_as_it_is() -> None:
    first = kept_first_user([user("y" * 50_000)], max_chars=8_000, tool_name="ctx_recall")
    assert first is not None
    summary = user("[Conversation summary]\nearlier work")
    again = kept_first_user([first, summary], max_chars=8_000, tool_name="ctx_recall")
    assert again is first


def test_summaries_and_preserved_output_are_not_the_task() -> None:
    messages = [user("[Conversation summary]\nold"), user("[Preserved tool output: x]\n.")]
    assert (
        kept_first_user(messages, max_chars=8_000, tool_name="t", carried_prefixes=CARRIED) is None
    )
    assert kept_first_user([assistant("a")], max_chars=8_000, tool_name="t") is None


def test_a_tiny_limit_is_refused() -> None:
    with pytest.raises(ValueError):
        kept_first_user([user("x")], max_chars=10, tool_name="t")


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=5_000), st.integers(min_value=200, max_value=2_000))
def test_the_kept_text_always_fits_and_keeps_both_ends(text: str, max_chars: int) -> None:
    kept = kept_first_user([user(text)], max_chars=max_chars, tool_name="ctx_recall")
    assert kept is not None
    content = kept["content"]
    assert len(content) <= max_chars
    if len(text) > max_chars:
        head, _, tail = content.partition("\n[... ")
        assert text.startswith(head) and text.endswith(tail.partition("]\n")[2])
