"""Stored compactions: made from a cut, applied to the requests that follow."""

from __future__ import annotations

import copy
from typing import Any

from proxy.compaction.plan import SUMMARY_PREFIX, CompactionPlan
from proxy.compaction.policy import CompactSettings
from proxy.compaction.stored import json_chars, make_compaction, run
from proxy.history import history_salt
from proxy.types import Draft, Message, SessionState
from tests.factories import assistant, draft, matched_turn, system, user

SETTINGS = CompactSettings(threshold_tokens="auto")


def apply(client: Draft, state: SessionState, settings: CompactSettings = SETTINGS) -> Any:
    """The stage on `client`, the stored compaction matched as the engine matches it."""
    return run(client, matched_turn(client, state), settings=settings)


def _stored(history: list[Message], covers: int, summary: str) -> Any:
    salt = history_salt("default", [system("sys")])
    replacement = [{"role": "user", "content": SUMMARY_PREFIX + summary}]
    return make_compaction(history, CompactionPlan(split=covers), replacement, salt=salt)


def test_stored_compaction_maps_a_later_full_history_to_summary_and_newer_messages() -> None:
    early = [user("a"), assistant("b"), user("c"), assistant("d")]
    later = [system("sys"), *early, user("e"), assistant("f")]
    request = draft(later)
    snapshot = copy.deepcopy(later)
    out, report = apply(request, SessionState(compactions=(_stored(early, 2, "S"),)))
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
    out, _ = apply(draft([system("sys"), *history]), state)
    assert out.messages == (user(SUMMARY_PREFIX + "second"), *history[5:])


def test_an_edited_history_or_system_prompt_does_not_match() -> None:
    history = [user("a"), assistant("b"), user("c"), assistant("d")]
    state = SessionState(compactions=(_stored(history, 2, "S"),))
    edited = [system("sys"), user("A"), *history[1:]]
    other_system = [system("other"), *history]
    for messages in (edited, other_system):
        out, report = apply(draft(messages), state)
        assert out.messages == tuple(messages[1:]) and report.counters["applied"] == 0


def test_a_request_that_ends_where_the_summary_ends_is_sent_as_the_client_wrote_it() -> None:
    task = [user("a long task " * 300)]
    state = SessionState(compactions=(_stored(task, 1, "S"),))
    out, report = apply(draft([system("sys"), *task]), state)
    assert out.messages == tuple(task) and report.counters["applied"] == 0
    on, _ = apply(draft([system("sys"), *task, assistant("ok")]), state)
    assert on.messages == (user(SUMMARY_PREFIX + "S"), assistant("ok"))


def test_disabled_stage_applies_nothing() -> None:
    history = [user("a"), assistant("b"), user("c")]
    state = SessionState(compactions=(_stored(history, 2, "S"),))
    out, _ = apply(draft([system("sys"), *history]), state, CompactSettings(enabled=False))
    assert out.messages == tuple(history)
