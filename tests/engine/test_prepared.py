"""`proxy.engine.prepared`: one request's stage reports summed once."""

from __future__ import annotations

from proxy.engine.prepared import tally
from proxy.types import StageReport


def test_zero_counters_are_left_out_and_every_stage_is_listed_in_order() -> None:
    totals = tally(
        (
            StageReport("compact", {"applied": 0, "messages_before": 3}),
            StageReport("prune", {"chars_pruned": 0, "pruned": 0}),
            StageReport("cache", {"breakpoints": 2}),
        )
    )
    assert list(totals.stages) == ["compact", "prune", "cache"]
    assert totals.stages == {
        "compact": {"messages_before": 3},
        "prune": {},
        "cache": {"breakpoints": 2},
    }
    assert totals.chars_pruned == 0 and not totals.skipped


def test_chars_pruned_is_summed_over_every_stage_and_one_stage_twice_adds_up() -> None:
    totals = tally(
        (
            StageReport("prune", {"chars_pruned": 500}),
            StageReport("budgets", {"chars_pruned": 7}),
            StageReport("prune", {"chars_pruned": 40, "pruned": 1}),
        )
    )
    assert totals.chars_pruned == 547
    assert totals.stages["prune"] == {"chars_pruned": 540, "pruned": 1}


def test_decisions_and_outputs_are_merged_later_stages_winning() -> None:
    totals = tally(
        (
            StageReport("budgets", decisions={"a": "cut", "b": "keep"}, outputs={"o1": "full"}),
            StageReport("prune", decisions={"a": "prune"}),
            StageReport("other", outputs={"o2": "text"}),
        )
    )
    assert totals.decisions == {"a": "prune", "b": "keep"}
    assert totals.outputs == {"o1": "full", "o2": "text"}


def test_a_skipped_stage_is_named_with_its_exception_type() -> None:
    totals = tally((StageReport("bootstrap", skipped="OSError"), StageReport("cache")))
    assert totals.skipped == {"bootstrap": "OSError"}
    assert totals.stages == {"bootstrap": {}, "cache": {}}


def test_reports_are_not_changed() -> None:
    decisions = {"a": "cut"}
    report = StageReport("budgets", {"persisted": 1}, decisions=decisions)
    tally((report, StageReport("prune", decisions={"a": "prune"})))
    assert decisions == {"a": "cut"} and report.counters == {"persisted": 1}
