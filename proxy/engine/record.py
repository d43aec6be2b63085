"""What a request reads from its session's state and writes back to it (DESIGN §5). Pure; the
engine does the store calls."""

from __future__ import annotations

from proxy.compaction.job import compaction_fields
from proxy.engine.offer import OFFERED_FIELD
from proxy.engine.prepared import Prepared
from proxy.types import SessionState
from proxy.usage import Usage

Fields = dict[str, str | int | float]


def last_prompt_tokens(state: SessionState, line: str, covers: int, *, messages: int = 0) -> int:
    """The previous request's prompt tokens, if they describe this conversation as it is sent now.

    Usage of another lineage (a sub-agent sharing the session id) does not count, nor usage
    measured before a newer stored summary was applied (it would re-trigger at once), nor usage
    of a longer request than this one of `messages` (a task re-run from its start: the long
    run's size must not compact the short one)."""
    if state.fields.get("lineage") != line:
        return 0
    if covers > state.int_field("covers") or messages < state.int_field("last_prompt_messages"):
        return 0
    return state.int_field("last_prompt_tokens")


def turn_record(
    prepared: Prepared, *, usage: Usage | None, completed: bool, messages_in: int, now: float
) -> tuple[Fields, dict[str, int]]:
    """(fields to set, counters to add) for one answered request. Usage counts, and becomes the
    conversation's `last_prompt_tokens`, only for an answer that completed. A counter that
    adds nothing is left out once the session's state has it (one store command less)."""
    fields: Fields = {
        "model": prepared.turn.model,
        "threshold_tokens": prepared.threshold,
        "messages_in": messages_in,
        "messages_out": len(prepared.body.get("messages", [])),
        "updated_at": now,
    }
    if usage is not None and completed:
        fields.update(
            last_prompt_tokens=usage.prompt_tokens,
            last_cached_tokens=usage.cached_tokens,
            last_completion_tokens=usage.completion_tokens,
            lineage=prepared.lineage,
            covers=prepared.covers,
            last_prompt_messages=messages_in,
        )
    if prepared.recall.offered and prepared.turn.state.int_field(OFFERED_FIELD) != 1:
        fields[OFFERED_FIELD] = 1  # its later requests keep the tool: one cached prefix
    outcome = prepared.compaction
    done = outcome is not None and outcome.status == "done"
    if outcome is not None and done:
        fields.update(compaction_fields(outcome))
    counters = {"requests": 1}
    known = prepared.turn.state.fields
    if done or "compactions" not in known:
        counters["compactions"] = int(done)
    chars_pruned = prepared.tally.chars_pruned
    if chars_pruned or "chars_pruned" not in known:
        counters["chars_pruned"] = chars_pruned
    return fields, counters
