"""What `ContextEngine.prepare` hands back: the outgoing request and how it was made (`Prepared`),
with its stage reports summed once (`Tally`) for everyone who reads them: the session record, the
events, the metrics and the `X-Ctx-*` headers. Pure.

Before the tally, each of those walked the reports on its own (four passes over some twenty
counters, mostly zero, per request).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from proxy.compaction.job import CompactionOutcome
from proxy.engine.offer import RecallOffer
from proxy.types import JSON, StageReport, Turn


class Prepared(NamedTuple):
    """The outgoing request and everything known about how it was made (a named tuple: one is
    built per request)."""

    turn: Turn
    body: JSON
    reports: tuple[StageReport, ...]
    lineage: str
    threshold: int
    covers: int
    tally: Tally
    """`reports` summed (`proxy.engine.prepared`)."""
    compaction: CompactionOutcome | None = None
    recall: RecallOffer = RecallOffer()
    """Whether `body` offers the recall tool (`proxy.engine.offer`)."""


_EMPTY: Mapping[str, str] = MappingProxyType({})


class Tally(NamedTuple):
    """What every stage of one request did, summed once (a named tuple: one per request)."""

    stages: Mapping[str, Mapping[str, int]]
    """Per stage, in pipeline order: its non-zero counters (an empty mapping if none)."""
    skipped: Mapping[str, str]
    """The stages that failed and were skipped: the exception type, by stage."""
    chars_pruned: int
    """`chars_pruned` over every stage."""
    decisions: Mapping[str, str]
    """Every stage's decisions, later stages winning."""
    outputs: Mapping[str, str]
    """Every full text a stage replaced by a `<persisted-output>` block, by output id."""


def tally(reports: Iterable[StageReport]) -> Tally:
    """The sums of `reports`. Two reports of one stage add up (their `skipped` is the last)."""
    stages: dict[str, dict[str, int]] = {}
    chars_pruned = 0
    skipped = decisions = outputs = _EMPTY
    for report in reports:
        counters = stages.get(report.stage)
        if counters is None:
            counters = stages[report.stage] = {}
        found = report.counters
        if any(found.values()):  # in C; most stages of most requests count nothing
            for name, value in found.items():  # a loop: cheaper than a comprehension here
                if value:
                    counters[name] = counters.get(name, 0) + value
        if report.skipped:
            skipped = {**skipped, report.stage: report.skipped}
        if report.decisions:
            decisions = {**decisions, **report.decisions}
        if report.outputs:
            outputs = {**outputs, **report.outputs}
    for counters in stages.values():
        chars_pruned += counters.get("chars_pruned", 0)
    return Tally(stages, skipped, chars_pruned, decisions, outputs)
