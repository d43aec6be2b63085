"""Prune rules 1 to 3 for one tool result: the cut text, replay of a stored decision, candidates."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from proxy.stages.persisted_output import persisted_block
from proxy.stages.prune import PruneSettings
from proxy.stages.prune_decision import (
    COUNTERS,
    decision_key,
    describes,
    has_cache_control,
    pruned_text,
    replay_decisions,
    select_candidates,
)
from proxy.types import Message
from tests.factories import exchange, tool, user

SMALL = PruneSettings(max_chars=10, keep_chars=4)
MARK = "...(truncated, original: {} chars)"
EPHEMERAL = {"type": "ephemeral"}


def history(*texts: str, name: str = "bash") -> list[Message]:
    """A user turn, then one exchange per text; result i answers call `c<i>`."""
    messages = [user("start")]
    for i, text in enumerate(texts):
        messages += exchange(f"c{i}", text, name=name)
    return messages


def tool_texts(messages: list[Message]) -> dict[int, str]:
    return {i: m["content"] for i, m in enumerate(messages) if m["role"] == "tool"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a" * 10, None),  # not over max_chars
        ("a" * 11, None),  # over it, but "aaaa" + the marker is longer than the text
        ("a" * 100, "aaaa" + MARK.format(100)),
        ("abcdefgh" * 10, "abcd" + MARK.format(80)),
        ("x" * 60 + MARK.format(900), None),  # cut already
    ],
)
def test_pruned_text_keeps_keep_chars_and_the_original_length(
    text: str, expected: str | None
) -> None:
    assert pruned_text(text, settings=SMALL) == expected


def test_pruned_text_of_a_persisted_block_keeps_its_header_and_cuts_only_the_preview() -> None:
    _, block = persisted_block("p" * 5_000, preview_bytes=300)
    header = block.split("\n")[:3]
    cut = pruned_text(block, settings=SMALL)
    assert cut == "\n".join([*header, "pppp" + MARK.format(len(block)), "</persisted-output>"])


def test_pruned_text_of_a_persisted_block_cut_already_is_none() -> None:
    _, block = persisted_block("p" * 5_000, preview_bytes=300)
    cut = pruned_text(block, settings=SMALL)
    assert cut is not None
    assert pruned_text(cut, settings=SMALL) is None


def test_pruned_text_leaves_a_persisted_look_alike_without_a_body_whole() -> None:
    text = '<persisted-output id="x">\nheader two\n' + "p" * 100 + "</persisted-output>"
    assert pruned_text(text, settings=SMALL) is None


@pytest.mark.parametrize(
    ("stored", "text", "expected"),
    [
        ("same", "same", True),
        ("aaaa" + MARK.format(100), "a" * 100, True),
        ("aaaa" + MARK.format(99), "a" * 100, False),  # another length
        ("bbbb" + MARK.format(100), "a" * 100, False),  # another text
        ("aaaa", "a" * 100, False),  # no marker
        ("", "a" * 100, False),
    ],
)
def test_describes_a_text_itself_or_a_cut_of_it_only(
    stored: str, text: str, expected: bool
) -> None:
    assert describes(stored, text) is expected


@pytest.mark.parametrize("call_id", ["c1", "call_ABC", "c#0"])
def test_decision_key_is_the_call_id_and_16_hex_of_the_texts_sha256(call_id: str) -> None:
    text = "z" * 900
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert decision_key(call_id, text) == f"{call_id}#{digest}"
    assert decision_key(call_id, text + "!") != decision_key(call_id, text)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (user("q"), False),
        ({**user("q"), "cache_control": EPHEMERAL}, True),
        (tool("c1", [{"type": "text", "text": "a"}]), False),
        (tool("c1", [{"type": "text", "text": "a"}, {"type": "text", "cache_control": {}}]), True),
        (tool("c1", ["raw", {"type": "text", "text": "a"}]), False),
        (tool("c1", {"cache_control": EPHEMERAL}), False),  # not a part: JSON content
    ],
)
def test_has_cache_control_on_the_message_or_one_of_its_parts(
    message: Message, expected: bool
) -> None:
    assert has_cache_control(message) is expected


def test_replay_puts_a_stored_cut_in_place_and_counts_it() -> None:
    messages = history("a" * 100, "b" * 100)
    before = copy.deepcopy(messages)
    out = list(messages)
    stored = "aaaa" + MARK.format(100)
    counts, decided = replay_decisions(out, tool_texts(messages), {"c0": stored})
    assert messages == before
    assert out[2]["content"] == stored and out[4] is messages[4]
    assert decided == {2}
    assert counts == {
        **dict.fromkeys(COUNTERS, 0),
        "replayed": 1,
        "chars_pruned": 100 - len(stored),
    }


def test_replay_of_a_decision_to_keep_a_result_whole_decides_it_without_a_change() -> None:
    messages = history("a" * 100)
    out = list(messages)
    counts, decided = replay_decisions(out, tool_texts(messages), {"c0": "a" * 100})
    assert decided == {2} and out[2] is messages[2]
    assert counts == dict.fromkeys(COUNTERS, 0)


def test_replay_skips_a_decision_made_for_another_text_under_the_same_id() -> None:
    messages = history("a" * 100)
    out = list(messages)
    counts, decided = replay_decisions(out, tool_texts(messages), {"c0": "zzzz" + MARK.format(100)})
    assert decided == set() and out == messages
    assert counts["replayed"] == 0


def test_replay_finds_a_decision_under_the_hashed_key_of_a_reused_id() -> None:
    messages = history("a" * 100)
    out = list(messages)
    decisions = {
        "c0": "qqqq" + MARK.format(7),
        decision_key("c0", "a" * 100): "aaaa" + MARK.format(100),
    }
    counts, decided = replay_decisions(out, tool_texts(messages), decisions)
    assert decided == {2} and out[2]["content"] == "aaaa" + MARK.format(100)
    assert counts["replayed"] == 1


@pytest.mark.parametrize(
    ("settings", "decided", "marked_at", "expected"),
    [
        (SMALL, set(), None, {2, 4, 6}),  # the newest two (8, 10) are kept whole
        (PruneSettings(max_chars=10, keep_chars=4, recent_keep=0), set(), None, {2, 4, 6, 8, 10}),
        (PruneSettings(max_chars=10, keep_chars=4, recent_keep=4), set(), None, {2}),
        (SMALL, {4}, None, {2, 6}),
        (SMALL, set(), 4, {6}),  # a client marker protects all up to it
        (SMALL, set(), 5, {6}),
        (PruneSettings(max_chars=10, keep_chars=4, exclude_tools=("bash",)), set(), None, set()),
        (PruneSettings(max_chars=200, keep_chars=4), set(), None, set()),
    ],
)
def test_select_candidates_skips_decided_recent_excluded_and_marked_results(
    settings: PruneSettings, decided: set[int], marked_at: int | None, expected: set[int]
) -> None:
    messages = history(*(letter * 100 for letter in "abcde"))
    if marked_at is not None:
        messages[marked_at] = {**messages[marked_at], "cache_control": EPHEMERAL}
    before = copy.deepcopy(messages)
    found = select_candidates(messages, tool_texts(messages), decided, settings=settings)
    assert messages == before
    assert set(found) == expected
    for index, cut in found.items():
        assert cut == pruned_text(messages[index]["content"], settings=settings)


def test_select_candidates_leaves_out_results_with_nothing_to_cut() -> None:
    messages = history("short", "a" * 100, "b", "c")
    found = select_candidates(messages, tool_texts(messages), set(), settings=SMALL)
    assert found == {4: "aaaa" + MARK.format(100)}


def _unused(*_: Any) -> None: ...
