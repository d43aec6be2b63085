"""Pre-flight validation: the body that leaves the proxy is one its upstream accepts.

Checked (DESIGN §3, Pre-flight validation):
- tool pairing: after an assistant message with `tool_calls` comes one contiguous block of `tool`
  messages, one per call; a `tool` message anywhere else (or a second answer to a call) is an
  orphan, a call without an answer in its block is unanswered;
- no `system`/`developer` message after the first message of another role;
- at most 4 `cache_control` markers in the whole body, and none of ours when not allowed.

Who caused a violation is decided by identity against `client_messages` (what the client sent):
an orphan or an unanswered call is the client's when the client's own messages have the same
fault for the same `tool_call_id`; a late system message is the client's when the client sent an
identical message (canonical JSON) late too; a marker is the client's when the client sent a marker
with the same `cache_control` on the same text (a part's `text`, or a message's string content or
last part: a message-level marker may have moved onto that part), each client marker matching at
most one, earliest first. Markers outside `messages` (tools, top level) are always the client's.
The client's violations pass through untouched (counted in `client_violations`); ours are repaired
and counted in `repairs`: orphans dropped, unanswered calls given a placeholder result at the end
of their block, late system messages turned into `user` messages where they stand, and our markers
removed newest first until 4 remain (all of ours when markers are not allowed). Identity is
canonical JSON (`proxy.history.message_digest`); copies are made only of the containers on a
removed marker's path.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

from proxy.content import (
    MAX_BREAKPOINTS,
    SYSTEM_ROLES,
    MarkerPath,
    body_with_messages,
    find_body_markers,
    find_cache_markers,
)
from proxy.history import message_digest
from proxy.types import JSON, Message, StageReport

PLACEHOLDER = "[no result: this tool call was not answered]"

_Faults: TypeAlias = tuple[list[int], list[tuple[int, Any]]]


def validate_request(
    body: JSON,
    *,
    client_messages: Sequence[Message],
    allow_cache_control: bool,
    markers: list[MarkerPath] | None = None,
) -> tuple[JSON, StageReport]:
    """The body with the proxy's own violations repaired; does nothing to a valid body or to what
    the client sent. Never mutates `body` or `client_messages`.

    `markers`: `find_body_markers(body)` when the caller has them already (render has)."""
    counts: defaultdict[str, int] = defaultdict(int, client_violations=0)
    messages = body.get("messages")
    if isinstance(messages, list):
        fixed = _repair_pairing(messages, client_messages, counts)
        fixed = _repair_late_system(fixed, client_messages, counts)
        if fixed is not messages:
            body, markers = body_with_messages(body, fixed), None
    paths = find_body_markers(body) if markers is None else markers
    body = repair_markers(body, paths, client_messages, allow=allow_cache_control, counts=counts)
    if len(counts) == 1 and not counts["client_violations"]:
        return body, _CLEAN
    counters = {"repairs": sum(n for k, n in counts.items() if k != "client_violations"), **counts}
    return body, StageReport(stage="validate", counters=counters)


_CLEAN = StageReport("validate", MappingProxyType({"repairs": 0, "client_violations": 0}))
"""The report of a body with nothing to repair or attribute: one read-only object for all."""


def _pairing_faults(messages: Sequence[Message]) -> _Faults:
    """(indexes of orphan tool results, (block end index, call id) of unanswered calls)."""
    orphans: list[int] = []
    unanswered: list[tuple[int, Any]] = []
    open_calls: dict[Any, bool] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if open_calls.get(call_id) is False:
                open_calls[call_id] = True
            else:
                orphans.append(index)
            continue
        if open_calls:
            unanswered += [(index, c) for c, done in open_calls.items() if not done]
        calls = message.get("tool_calls") if role == "assistant" else None
        open_calls = {c.get("id"): False for c in calls if isinstance(c, dict)} if calls else {}
    unanswered += [(len(messages), c) for c, done in open_calls.items() if not done]
    return orphans, unanswered


def _repair_pairing(
    messages: list[Message], client: Sequence[Message], counts: defaultdict[str, int]
) -> list[Message]:
    orphans, unanswered = _pairing_faults(messages)
    if not orphans and not unanswered:
        return messages  # nothing to attribute: the client's own faults do not matter
    client_orphans, client_unanswered = _pairing_faults(client)
    theirs_orphan = {client[i].get("tool_call_id") for i in client_orphans}
    theirs_unanswered = {c for _, c in client_unanswered}
    drop = {i for i in orphans if messages[i].get("tool_call_id") not in theirs_orphan}
    fill = [(i, c) for i, c in unanswered if c not in theirs_unanswered]
    counts["client_violations"] += len(orphans) - len(drop) + len(unanswered) - len(fill)
    if not drop and not fill:
        return messages
    counts["orphans_dropped"] += len(drop)
    counts["results_filled"] += len(fill)
    out: list[Message] = []
    for index in range(len(messages) + 1):
        out += [
            {"role": "tool", "tool_call_id": c, "content": PLACEHOLDER}
            for i, c in fill
            if i == index
        ]
        if index < len(messages) and index not in drop:
            out.append(messages[index])
    return out


def _late_system(messages: Sequence[Message]) -> list[int]:
    """Indexes of the system/developer messages after the first message of another role."""
    late: list[int] = []
    started = False
    for index, message in enumerate(messages):
        if message.get("role") not in SYSTEM_ROLES:
            started = True
        elif started:
            late.append(index)
    return late


def _repair_late_system(
    messages: list[Message], client: Sequence[Message], counts: defaultdict[str, int]
) -> list[Message]:
    late = _late_system(messages)
    if not late:
        return messages
    theirs = Counter(message_digest(client[i]) for i in _late_system(client))
    out = list(messages)
    for index in late:
        key = message_digest(messages[index])
        if theirs[key] > 0:
            theirs[key] -= 1
            counts["client_violations"] += 1
        else:
            out[index] = {**messages[index], "role": "user"}
            counts["systems_demoted"] += 1
    return out if counts.get("systems_demoted") else messages


def repair_markers(
    body: JSON,
    paths: list[MarkerPath],
    client: Sequence[Message],
    *,
    allow: bool,
    counts: defaultdict[str, int],
) -> JSON:
    if not paths:
        return body
    theirs: Counter[bytes] = Counter()
    if any(path[:1] == ("messages",) for path in paths):
        theirs.update(_marker_identity(_at(client, p)) for p in find_cache_markers(list(client)))
    ours: list[MarkerPath] = []
    for path in paths:
        if path[:1] == ("messages",) and len(path) > 1:
            key = _marker_identity(_at(body, path))
            if theirs[key] <= 0:
                ours.append(path)
                continue
            theirs[key] -= 1
    excess = len(paths) if not allow else len(paths) - MAX_BREAKPOINTS
    remove = ours[::-1][: max(0, excess)]
    counts["client_violations"] += int(excess > len(remove))
    for path in remove:
        body = _without_marker(body, path)
    if remove:
        counts["markers_removed"] += len(remove)
    return body


def _marker_identity(holder: JSON) -> bytes:
    content: Any = holder.get("content", holder)
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        content = content[-1]
    if isinstance(content, dict):
        content = content.get("text", {k: v for k, v in content.items() if k != "cache_control"})
    return message_digest([holder["cache_control"], content])


def _without_marker(value: Any, path: MarkerPath) -> Any:
    """A copy of `value` without the marker at `path`; copies only the containers on the path."""
    if not path:
        return {k: v for k, v in value.items() if k != "cache_control"}
    head, rest = path[0], path[1:]
    if isinstance(value, list) and isinstance(head, int):
        items = list(value)
        items[head] = _without_marker(value[head], rest)
        return items
    return {**value, head: _without_marker(value[head], rest)}


def _at(value: Any, path: MarkerPath) -> Any:
    for key in path:
        value = value[key]
    return value
