"""What `ContextEngine.prepare` hands back: the outgoing request and how it was made."""

from __future__ import annotations

from typing import NamedTuple

from proxy.compaction.job import CompactionOutcome
from proxy.engine.tally import Tally
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
    """`reports` summed (`proxy.engine.tally`)."""
    compaction: CompactionOutcome | None = None
    store_degraded: bool = False
