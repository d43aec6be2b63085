"""`proxy.engine.record`: what a request reads from and writes to its session state."""

from __future__ import annotations

from proxy.compaction.job import CompactionOutcome
from proxy.compaction.policy import last_compaction_efficiency
from proxy.engine.prepared import Prepared, tally
from proxy.engine.record import last_prompt_tokens, turn_record
from proxy.types import SessionState, StageReport, Turn
from proxy.usage import Usage


def prepared_of(
    *reports: StageReport,
    state: SessionState | None = None,
    compaction: CompactionOutcome | None = None,
) -> Prepared:
    turn = Turn("t", "s", "gpt-4o", now=0.0, state=state or SessionState())
    return Prepared(
        turn=turn,
        body={"messages": [{}, {}, {}]},
        reports=reports,
        lineage="line-1",
        threshold=9000,
        covers=4,
        tally=tally(reports),
        compaction=compaction,
    )


def test_a_completed_answer_records_its_usage_and_the_conversation_it_describes() -> None:
    fields, counters = turn_record(
        prepared_of(StageReport("prune", {"chars_pruned": 70})),
        usage=Usage(prompt_tokens=1200, cached_tokens=800),
        completed=True,
        messages_in=5,
        now=12.5,
    )
    assert fields == {
        "model": "gpt-4o",
        "threshold_tokens": 9000,
        "messages_in": 5,
        "messages_out": 3,
        "updated_at": 12.5,
        "last_prompt_tokens": 1200,
        "last_cached_tokens": 800,
        "last_completion_tokens": 0,
        "lineage": "line-1",
        "covers": 4,
        "last_prompt_messages": 5,
    }
    assert counters == {"requests": 1, "compactions": 0, "chars_pruned": 70}


def test_an_interrupted_answer_counts_the_request_but_not_its_usage() -> None:
    fields, counters = turn_record(
        prepared_of(), usage=Usage(prompt_tokens=1200), completed=False, messages_in=5, now=1.0
    )
    assert "last_prompt_tokens" not in fields and "lineage" not in fields
    assert counters["requests"] == 1


def test_a_counter_adding_nothing_is_left_out_once_the_state_has_it() -> None:
    new, known = SessionState(), SessionState(fields={"compactions": 2, "chars_pruned": "10"})
    assert turn_record(prepared_of(state=new), usage=None, completed=True, messages_in=1, now=1.0)[
        1
    ] == {"requests": 1, "compactions": 0, "chars_pruned": 0}
    assert turn_record(
        prepared_of(state=known), usage=None, completed=True, messages_in=1, now=1.0
    )[1] == {"requests": 1}
    pruned = prepared_of(StageReport("prune", {"chars_pruned": 5}), state=known)
    assert turn_record(pruned, usage=None, completed=True, messages_in=1, now=1.0)[1] == {
        "requests": 1,
        "chars_pruned": 5,
    }


def test_last_prompt_tokens_count_only_for_the_same_lineage_and_no_newer_summary() -> None:
    state = SessionState(fields={"lineage": "a", "covers": "4", "last_prompt_tokens": "5000"})
    assert last_prompt_tokens(state, "a", 4) == 5000
    assert last_prompt_tokens(state, "a", 2) == 5000
    assert last_prompt_tokens(state, "b", 4) == 0  # another conversation in the session
    assert last_prompt_tokens(state, "a", 6) == 0  # measured before a newer summary applied


def test_last_prompt_tokens_of_a_longer_request_do_not_count_for_a_shorter_one() -> None:
    """A task re-run from its first message shares the long run's lineage."""
    fields = {"lineage": "a", "covers": "0", "last_prompt_tokens": "90000"}
    state = SessionState(fields={**fields, "last_prompt_messages": "40"})
    assert last_prompt_tokens(state, "a", 0, messages=5) == 0
    assert last_prompt_tokens(state, "a", 0, messages=40) == 90000
    assert last_prompt_tokens(state, "a", 0, messages=42) == 90000
    assert last_prompt_tokens(SessionState(fields=fields), "a", 0, messages=5) == 90000


def test_a_done_compaction_leaves_how_well_it_compressed_for_the_next_one() -> None:
    done = CompactionOutcome("done", "compacted", (), saved_chars=-300, folded_chars=1_000)
    fields, counters = turn_record(
        prepared_of(compaction=done), usage=None, completed=True, messages_in=5, now=1.0
    )
    assert fields["compaction_saved_chars"] == -300 and fields["compaction_folded_chars"] == 1_000
    assert counters["compactions"] == 1
    as_redis_returns = SessionState(fields={k: str(v) for k, v in fields.items()})
    assert last_compaction_efficiency(as_redis_returns) == 0.1
    assert last_compaction_efficiency(SessionState()) == 1.0
    skipped = CompactionOutcome("skipped", "low_savings", ())
    fields, _ = turn_record(
        prepared_of(compaction=skipped), usage=None, completed=True, messages_in=5, now=1.0
    )
    assert "compaction_saved_chars" not in fields
