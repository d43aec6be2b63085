"""Estimated prompt tokens before and after each stage of one request, for its event.

No stage counts tokens (that would need the upstream's tokenizer), but each one that changes the
prompt's size reports by how many characters, in its own counters. The estimate starts from what
the upstream reported for the prompt it received (or, without usage, the size of the body sent)
and walks back through those counters at `CHARS_PER_TOKEN`. Pure.
"""

from __future__ import annotations

from proxy.server.observe.trace import Trace
from proxy.usage import CHARS_PER_TOKEN, estimated_tokens

REMOVED = (("compact", "chars_removed"), ("budgets", "chars_saved"), ("prune", "chars_pruned"))
"""The stages that take characters out of the prompt, in pipeline order, with their counter."""
ADDED = (("bootstrap", ("static_chars", "dynamic_chars")),)
"""The stages after compaction that put characters in, in pipeline order, with their counters."""
COMPACTION = "compaction"
"""A compaction that ran during the request: after the stages above, before `bootstrap`."""


def stage_tokens(trace: Trace) -> dict[str, tuple[int, int]]:
    """`{stage: (tokens before, tokens after)}` for each stage that changed the prompt's size,
    in pipeline order; empty when none did."""
    changes = _char_changes(trace)
    if not changes:
        return {}
    usage = trace.relayed.usage
    current = (
        usage.prompt_tokens if usage and usage.prompt_tokens else estimated_tokens(trace.bytes_out)
    )
    spans: dict[str, tuple[int, int]] = {}
    for stage, removed in reversed(changes):
        before = max(0, current + round(removed / CHARS_PER_TOKEN))
        spans[stage] = (before, current)
        current = before
    return {stage: spans[stage] for stage, _ in changes}


def _char_changes(trace: Trace) -> list[tuple[str, int]]:
    """(stage, characters it removed: negative when it added), in pipeline order (`REMOVED`,
    the compaction, then `ADDED`: the order `proxy.engine.pipeline.build_stack` runs them in)."""
    stages = trace.prepared.tally.stages
    changes: list[tuple[str, int]] = []
    for stage, name in REMOVED:  # most stages of most requests count nothing: plain loops
        counters = stages.get(stage)
        if counters:
            removed = counters.get(name, 0)
            if removed:
                changes.append((stage, removed))
    compacted = _compacted_chars(trace)
    if compacted:
        changes.append((COMPACTION, compacted))
    for stage, names in ADDED:
        counters = stages.get(stage)
        if counters:
            added = 0
            for name in names:
                added += counters.get(name, 0)
            if added:
                changes.append((stage, -added))
    return changes


def _compacted_chars(trace: Trace) -> int:
    """What a compaction done during the request removed beyond the stored one applied before
    it (both measured against the client's history); 0 when none was done or its size is
    unknown."""
    outcome = trace.prepared.compaction
    if outcome is None or outcome.status != "done" or outcome.compaction is None:
        return 0
    if not outcome.compaction.saved_chars:
        return 0
    applied = trace.prepared.tally.stages.get("compact", {}).get("chars_removed", 0)
    return outcome.compaction.saved_chars - applied
