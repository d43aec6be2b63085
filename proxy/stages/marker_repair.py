"""Pre-flight repair of `cache_control` markers, for `validate_request`: at most
`MAX_BREAKPOINTS` in the whole body, and none of ours when markers are not allowed.

A marker in `messages` is the client's when the client sent a marker with the same
`cache_control` on the same text (a part's `text`, or a message's string content or last part: a
message-level marker may have moved onto that part), each client marker matching at most one,
earliest first; markers outside `messages` (tools, top level) are always the client's. Ours are
removed newest first until few enough remain; an excess the client's own markers leave counts as
one client violation and is passed on. `canonical` is the identity JSON both this and the
late-system check compare by. Pure; copies only the containers on a removed marker's path.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from proxy.content import MAX_BREAKPOINTS, MarkerPath, canonical, find_cache_markers
from proxy.types import JSON, Message


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
    return canonical([holder["cache_control"], content])


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
