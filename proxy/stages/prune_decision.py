"""The prune stage's decision for each tool result: replay a stored one, or propose a cut. Pure.

Rules 1 to 3 of `proxy.stages.prune` (see its docstring), which batches the candidates (rule 4)
and reports. `replay_decisions` rewrites replayed results in place on the stage's copied list and
starts the stage's `COUNTERS`; `select_candidates` gives the cut text of every other result that
may shrink. A cut ends in `...(truncated, original: N chars)`: `pruned_text` writes it and
`describes` reads it back; `decision_key` keys a decision whose `tool_call_id` is taken.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from proxy.content import PERSISTED_CLOSE, PERSISTED_OPEN, tool_names, with_text
from proxy.types import Message

if TYPE_CHECKING:
    from proxy.stages.prune import PruneSettings

_PERSISTED_HEADER_LINES = 3
COUNTERS = ("chars_pruned", "pruned", "replayed", "deferred")
_PRUNED = re.compile(
    r"\.\.\.\(truncated, original: (\d+) chars\)(?:\n" + re.escape(PERSISTED_CLOSE) + r")?\Z"
)


def pruned_text(text: str, *, settings: PruneSettings) -> str | None:
    """The cut form of an old result's text, or None when it stays whole (rule 3)."""
    if len(text) <= settings.max_chars or _PRUNED.search(text[-80:]):
        return None
    marker = f"...(truncated, original: {len(text)} chars)"
    if text.startswith(PERSISTED_OPEN) and text.endswith(PERSISTED_CLOSE):
        lines = text.split("\n", _PERSISTED_HEADER_LINES)
        if len(lines) <= _PERSISTED_HEADER_LINES:
            return None
        header = "\n".join(lines[:_PERSISTED_HEADER_LINES])
        preview = lines[-1].removesuffix(PERSISTED_CLOSE).removesuffix("\n")
        cut = f"{header}\n{preview[: settings.keep_chars]}{marker}\n{PERSISTED_CLOSE}"
    else:
        cut = text[: settings.keep_chars] + marker
    return cut if len(cut) < len(text) else None


def has_cache_control(message: Message) -> bool:
    """True when the message, or one of its content parts, carries a `cache_control` key."""
    if "cache_control" in message:
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and "cache_control" in p for p in content
    )


def _last_marked(messages: Sequence[Message]) -> int:
    """The index of the last message `has_cache_control` holds for, or -1."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        # only a list content can hold a marked part: the others need no call
        if "cache_control" in message or (
            isinstance(message.get("content"), list) and has_cache_control(message)
        ):
            return index
    return -1


def describes(stored: str, text: str) -> bool:
    """True when `stored` is `text` or a cut of it: its kept part starts `text` and its marker
    gives `text`'s length. Guards replay against clients that reuse a tool_call_id."""
    if stored == text:
        return True
    match = _PRUNED.search(stored)
    return (
        match is not None
        and int(match[1]) == len(text)
        and text.startswith(stored[: match.start()])
    )


def decision_key(call_id: str, text: str) -> str:
    """The key of a decision for a result whose `tool_call_id` is already taken by another."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{call_id}#{digest}"


def replay_decisions(
    out: list[Message], texts: Mapping[int, str], decisions: Mapping[str, str]
) -> tuple[dict[str, int], set[int]]:
    """Rule 1, in place on the copied list `out`: the counters so far and the decided indices."""
    counts = dict.fromkeys(COUNTERS, 0)
    decided: set[int] = set()
    # Ids with a hashed key (`rsplit` gives the id back; a plain key with a `#` only adds an id
    # that is hashed for nothing): the other results are not hashed, on every request.
    hashed = {key.rsplit("#", 1)[0] for key in decisions if "#" in key}
    for index, text in texts.items():
        call_id = out[index]["tool_call_id"]
        stored = decisions.get(call_id)
        if not (stored and describes(stored, text)):
            stored = decisions.get(decision_key(call_id, text)) if call_id in hashed else None
            if not (stored and describes(stored, text)):
                continue
        decided.add(index)
        if (new := with_text(out[index], stored)) != out[index]:
            out[index] = new
            counts["replayed"] += 1
            counts["chars_pruned"] += len(text) - len(stored)
    return counts, decided


def select_candidates(
    messages: Sequence[Message],
    texts: Mapping[int, str],
    decided: set[int],
    *,
    settings: PruneSettings,
) -> dict[int, str]:
    """Index -> cut text of every undecided result that rules 2 and 3 allow to shrink."""
    names = tool_names(messages) if settings.exclude_tools else {}
    tools = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    recent = set(tools[len(tools) - settings.recent_keep :]) if settings.recent_keep > 0 else set()
    boundary = _last_marked(messages)
    found: dict[int, str] = {}
    for index, text in texts.items():
        if index in decided or index in recent or index <= boundary:
            continue
        if names.get(messages[index]["tool_call_id"]) in settings.exclude_tools:
            continue
        if (cut := pruned_text(text, settings=settings)) is not None:
            found[index] = cut
    return found
