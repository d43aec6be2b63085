"""Learned facts as the memory index shows them, and as Markdown for `memory/MEMORY.md`. Pure.

The bootstrap's `<memory_index>` holds the workspace's `memory/MEMORY.md` (its layers, as the
bootstrap capped them) followed by the learned facts, newest last: the facts fill the room the
workspace's lines leave under `memory_max_lines`, the oldest left out first, and a fact the
workspace already states (same normalised text) is not repeated.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.memory.fact import fact_key


def facts_to_show(workspace: str, facts: Sequence[str], *, max_lines: int) -> tuple[str, ...]:
    """The learned `facts` (oldest first) that follow `workspace` in the index: not already in
    it, the newest that fit in `max_lines` lines together with it."""
    known = {fact_key(line) for line in workspace.splitlines() if line.lstrip().startswith("-")}
    new = [line for line in facts if fact_key(line) not in known]
    room = max_lines - len(workspace.splitlines())
    return tuple(new[max(0, len(new) - room) :]) if room > 0 else ()


def merge_index(workspace: str, facts: Sequence[str], *, max_lines: int) -> str:
    """The memory index's text: `workspace`, then `facts_to_show` one per line."""
    shown = facts_to_show(workspace, facts, max_lines=max_lines)
    return "\n".join([workspace, *shown] if workspace else shown)


def export_markdown(facts: Sequence[str]) -> str:
    """The facts as lines ready to append to `memory/MEMORY.md` (oldest first, newline-ended);
    empty without facts."""
    return "".join(f"{line}\n" for line in facts)
