"""Pairing prepared messages with the client's, and re-rendering one around what it carries."""

from __future__ import annotations

import copy
from typing import Any

from proxy.inbound.messages_blocks import block_of
from proxy.inbound.messages_request import messages_to_internal
from proxy.inbound.splice import ABSENT, match_origins, merge_over_client, splice
from tests.inbound.builders import (
    EPHEMERAL,
    assistant,
    body,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
)

JSON = dict[str, Any]


def built() -> tuple[list[JSON], Any]:
    sent = body(
        user("start"),
        assistant(tool_use("t1")),
        user(tool_result("t1", "one")),
        assistant("ok"),
        user("start"),  # the same text again: told apart by position
    )
    internal, carrier = messages_to_internal(sent)
    return internal["messages"], carrier.origins


def test_untouched_messages_pair_by_identity_and_copies_by_equality() -> None:
    messages, origins = built()
    assert match_origins(messages, origins) == [0, 1, 2, 3, 4]
    assert match_origins(copy.deepcopy(messages), origins) == [0, 1, 2, 3, 4]


def test_a_summary_in_front_pairs_with_nothing_and_the_kept_tail_with_its_own() -> None:
    messages, origins = built()
    summary = {"role": "user", "content": "[Conversation summary]\nstart, one, ok"}
    copied = copy.deepcopy(messages[3:])  # no identity to go by: searched from the end
    assert match_origins([summary, *copied], origins) == [None, 3, 4]


def test_a_changed_tool_result_pairs_by_its_call_id() -> None:
    messages, origins = built()
    pruned = {**messages[2], "content": "o...(truncated)"}
    assert match_origins([*messages[:2], pruned, *messages[3:]], origins) == [0, 1, 2, 3, 4]


def test_a_marker_does_not_hide_a_message() -> None:
    messages, origins = built()
    marked = {**messages[4], "content": [text("start", cache_control=EPHEMERAL)]}
    assert match_origins([*messages[:4], marked], origins) == [0, 1, 2, 3, 4]


def test_splice_keeps_carried_blocks_in_place_and_puts_new_items_after_their_neighbour() -> None:
    blocks = [thinking(), text("a"), {"type": "future", "x": 1}, text("b")]
    snapshot = [text("a"), text("b")]
    ours: list[JSON] = []
    out = splice(
        blocks, (1, 3), snapshot, [text("a"), text("new"), text("b")], fresh=block_of, ours=ours
    )
    assert out == [thinking(), text("a"), text("new"), blocks[2], text("b")]
    assert out[0] is blocks[0] and out[1] is blocks[1] and out[4] is blocks[3]
    assert ours == []


def test_splice_drops_what_a_stage_removed_and_marks_a_copy() -> None:
    blocks = [text("a"), text("b")]
    ours: list[JSON] = []
    out = splice(
        blocks, (0, 1), blocks, [text("b", cache_control=EPHEMERAL)], fresh=block_of, ours=ours
    )
    assert out == [text("b", cache_control=EPHEMERAL)]
    assert ours == out and out[0] is not blocks[1] and "cache_control" not in blocks[1]


def test_new_text_before_any_kept_item_goes_where_the_first_item_was() -> None:
    blocks = [thinking(), text("old"), tool_use("t1")]
    current = [
        text("new"),
        {"id": "t1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}},
    ]
    snapshot = [text("old"), current[1]]
    out = splice(blocks, (1, 2), snapshot, current, fresh=block_of, ours=[])
    assert out == [thinking(), text("new"), tool_use("t1")]


def test_merge_over_client_keeps_the_clients_key_order_and_drops_what_is_absent() -> None:
    client = {"model": "m", "system": "s", "messages": [], "stream": True}
    rendered = {"tools": [], "system": ABSENT, "model": "n", "messages": [], "top_k": ABSENT}
    kept = dict(client)
    merged = merge_over_client(client, rendered)
    assert list(merged.items()) == [
        ("model", "n"),
        ("messages", []),
        ("stream", True),
        ("tools", []),
    ]
    assert client == kept
