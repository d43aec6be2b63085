"""Compaction's pure decisions: threshold, stored prefixes and applying them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.history import history_salt
from proxy.stages.compact import (
    CompactSettings,
    json_chars,
    make_compaction,
    run,
    should_compact,
    threshold_tokens,
)
from proxy.stages.compaction_plan import SUMMARY_PREFIX, CompactionPlan
from proxy.types import Message, SessionState
from tests.factories import assistant, draft, system, turn, user

SETTINGS = CompactSettings(threshold_tokens="auto")


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
        "messages_before": 6,
        "messages_after": 5,
        "applied": 1,
        "chars_removed": saved,
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
