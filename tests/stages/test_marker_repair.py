"""Repair of `cache_control` markers: whose a marker is, and which of ours are removed."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from proxy.content import find_body_markers
from proxy.stages.marker_repair import repair_markers
from proxy.types import JSON, Message
from tests.factories import user

EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def marked(text: str, marker: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": marker or EPHEMERAL}


def plain(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def parts(*items: dict[str, Any]) -> Message:
    return {"role": "user", "content": list(items)}


def repair(
    messages: list[Message], client: list[Message], *, allow: bool = True, **body: Any
) -> tuple[JSON, JSON, dict[str, int]]:
    """(the body sent, the repaired body, counts); asserts neither input was mutated."""
    sent = {"model": "m", **body, "messages": messages}
    before = copy.deepcopy((sent, client))
    counts: defaultdict[str, int] = defaultdict(int, client_violations=0)
    out = repair_markers(sent, find_body_markers(sent), client, allow=allow, counts=counts)
    assert (sent, client) == before
    return sent, out, dict(counts)


def test_a_body_without_markers_is_returned_as_the_same_object() -> None:
    sent = {"model": "m", "messages": [user("q")]}
    counts: defaultdict[str, int] = defaultdict(int, client_violations=0)
    assert repair_markers(sent, [], [user("q")], allow=False, counts=counts) is sent
    assert counts == {"client_violations": 0}


def test_our_markers_over_the_limit_go_newest_first_copying_only_their_path() -> None:
    ours = [parts(marked(str(i))) for i in range(6)]
    sent, out, counts = repair(ours, [])
    assert out["messages"][:4] == ours[:4]
    assert out["messages"][4:] == [parts(plain("4")), parts(plain("5"))]
    assert all(o is m for o, m in zip(out["messages"][:4], sent["messages"][:4], strict=True))
    assert counts == {"client_violations": 0, "markers_removed": 2}


def test_markers_not_allowed_removes_ours_and_keeps_the_clients() -> None:
    client = [parts(marked("a")), user("q")]
    _, out, counts = repair([parts(marked("a")), parts(marked("q"))], client, allow=False)
    assert out["messages"] == [parts(marked("a")), parts(plain("q"))]
    assert counts == {"client_violations": 1, "markers_removed": 1}


def test_a_client_marker_vouches_for_one_marker_only_the_earliest() -> None:
    client = [parts(marked("a")), user("b")]
    _, out, counts = repair([parts(marked("a")), parts(marked("a"))], client, allow=False)
    assert out["messages"] == [parts(marked("a")), parts(plain("a"))]
    assert counts["markers_removed"] == 1


def test_a_marker_with_another_ttl_on_the_same_text_is_ours() -> None:
    client = [parts(marked("a"))]
    _, out, counts = repair([parts(marked("a", HOUR))], client, allow=False)
    assert out["messages"] == [parts(plain("a"))]
    assert counts["markers_removed"] == 1


def test_client_message_level_marker_moved_onto_a_part_is_still_the_clients() -> None:
    client = [{"role": "system", "content": "rules", "cache_control": EPHEMERAL}, user("q")]
    rendered = {"role": "system", "content": [plain("S"), marked("rules")]}
    _, out, counts = repair([rendered, user("q")], client, allow=False)
    assert out["messages"][0] == rendered
    assert "markers_removed" not in counts


def test_markers_outside_messages_are_the_clients() -> None:
    tools = [{"type": "function", "function": {"name": "f"}, "cache_control": EPHEMERAL}]
    sent, out, counts = repair(
        [user("q")], [user("q")], allow=False, tools=tools, cache_control=HOUR
    )
    assert out is sent
    assert counts == {"client_violations": 1}


def test_client_over_the_marker_limit_keeps_its_markers_and_loses_ours() -> None:
    client = [parts(*(marked(str(i)) for i in range(5)))]
    system = {"role": "system", "content": [marked("S")]}
    _, out, counts = repair([system, *copy.deepcopy(client)], client)
    assert out["messages"] == [{"role": "system", "content": [plain("S")]}, *client]
    assert counts == {"client_violations": 1, "markers_removed": 1}
