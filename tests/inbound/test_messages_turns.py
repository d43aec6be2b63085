"""The prepared history → the Messages turns: a changed message is re-rendered only where it
changed, new messages join the turns the API expects."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.messages_request import messages_to_internal
from tests.inbound.builders import (
    EPHEMERAL,
    assistant,
    body,
    fixture,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
    wire_problem,
)
from tests.inbound.strategies import bodies

JSON = dict[str, Any]


def with_messages(internal: JSON, messages: list[JSON]) -> JSON:
    return {**internal, "messages": messages}


def replaced(internal: JSON, index: int, **fields: Any) -> JSON:
    messages = list(internal["messages"])
    messages[index] = {**messages[index], **fields}
    return with_messages(internal, messages)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(bodies(), st.data())
def test_a_changed_tool_result_is_the_only_block_that_changes(
    sent: JSON, data: st.DataObject
) -> None:
    internal, carrier = messages_to_internal(sent)
    tools = [i for i, m in enumerate(internal["messages"]) if m["role"] == "tool"]
    if not tools:
        return
    index = data.draw(st.sampled_from(tools))
    out = internal_to_messages(replaced(internal, index, content="(pruned)"), carrier)
    origin = carrier.origins[index - (1 if carrier.system else 0)]
    changed = origin.message
    for i, (new, old) in enumerate(zip(out["messages"], sent["messages"], strict=True)):
        if i != changed:
            assert new is old
    blocks = out["messages"][changed]["content"]
    before = sent["messages"][changed]["content"]
    assert len(blocks) == len(before)
    for new, old in zip(blocks, before, strict=True):
        if old is not before[origin.blocks[0]]:
            assert new is old
    result = blocks[origin.blocks[0]]
    old_result = before[origin.blocks[0]]
    assert {k: v for k, v in result.items() if k != "content"} == {
        k: v for k, v in old_result.items() if k != "content"
    }
    texts = (
        [b for b in result["content"] if isinstance(b, dict) and b.get("type") == "text"]
        if isinstance(result["content"], list)
        else [result["content"]]
    )
    assert "(pruned)" in [t if isinstance(t, str) else t["text"] for t in texts]


def test_a_pruned_tool_result_keeps_its_error_flag_images_and_marker() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A"}}
    sent = body(
        user("look"),
        assistant(thinking(), tool_use("t1")),
        user(
            tool_result(
                "t1", [text("long output " * 50), image], is_error=True, cache_control=EPHEMERAL
            )
        ),
        assistant("seen"),
        user("next"),
    )
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(replaced(internal, 2, content="long output ...(truncated)"), carrier)
    assert out["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [text("long output ...(truncated)"), image],
            "is_error": True,
            "cache_control": EPHEMERAL,
        }
    ]
    assert out["messages"][1] is sent["messages"][1]  # thinking and its signature untouched
    assert wire_problem(out) is None


def test_a_string_tool_result_stays_a_string_when_pruned() -> None:
    sent = body(user("go"), assistant(tool_use("t1")), user(tool_result("t1", "x" * 500)))
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(replaced(internal, 2, content="x...(cut)"), carrier)
    assert out["messages"][2]["content"] == [tool_result("t1", "x...(cut)")]


def test_a_marker_a_stage_adds_changes_only_its_block() -> None:
    sent = fixture("main_turn_thinking")["body"]
    internal, carrier = messages_to_internal(sent)
    last = len(internal["messages"]) - 1
    reply = 2  # the first assistant turn: thinking, text, tool_use
    prepared = replaced(
        internal,
        reply,
        content=[{**internal["messages"][reply]["content"][0], "cache_control": EPHEMERAL}],
    )
    out = internal_to_messages(prepared, carrier)
    blocks = out["messages"][1]["content"]
    original = sent["messages"][1]["content"]
    assert blocks[0] is original[0]  # thinking first, as sent
    assert blocks[1] == {**original[1], "cache_control": EPHEMERAL}
    assert blocks[2] is original[2]
    assert [m is s for m, s in zip(out["messages"], sent["messages"], strict=True)] == [
        True,
        False,
        True,
        True,
        True,
    ]
    assert out["messages"][-1] is sent["messages"][-1] and last > 0


def test_a_string_user_message_given_a_marker_becomes_one_marked_text_block() -> None:
    sent = body(user("hello"), assistant("hi"), user("again"))
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(
        replaced(internal, 2, content=[text("again", cache_control=EPHEMERAL)]), carrier
    )
    assert out["messages"][2] == user(text("again", cache_control=EPHEMERAL))
    assert out["messages"][:2] == sent["messages"][:2]


def test_a_summary_replacing_the_covered_turns_leads_the_kept_ones() -> None:
    sent = body(
        user("start"),
        assistant(thinking(), tool_use("t1")),
        user(tool_result("t1", "r1")),
        assistant("done with step one"),
        user("now step two"),
        assistant(thinking("again"), tool_use("t2")),
        user(tool_result("t2", "r2")),
    )
    internal, carrier = messages_to_internal(sent)
    summary = {"role": "user", "content": "[Conversation summary]\nStep one is done."}
    kept = internal["messages"][4:]  # from "now step two"
    out = internal_to_messages(with_messages(internal, [summary, *kept]), carrier)
    assert out["messages"][0] == user(
        text("[Conversation summary]\nStep one is done."), text("now step two")
    )
    assert out["messages"][1:] == sent["messages"][5:]
    assert all(a is b for a, b in zip(out["messages"][1:], sent["messages"][5:], strict=True))
    assert wire_problem(out) is None


def test_a_placeholder_result_joins_the_user_turn_with_the_other_results_first() -> None:
    sent = body(
        user("go"),
        assistant(tool_use("t1"), tool_use("t2")),
        user(tool_result("t1", "one"), text("and also")),
    )
    internal, carrier = messages_to_internal(sent)
    messages = internal["messages"]
    placeholder = {"role": "tool", "tool_call_id": "t2", "content": "[no result]"}
    out = internal_to_messages(
        with_messages(internal, [*messages[:3], placeholder, messages[3]]), carrier
    )
    assert out["messages"][2]["content"] == [
        sent["messages"][2]["content"][0],
        tool_result("t2", "[no result]"),
        text("and also"),
    ]
    assert wire_problem(out) is None


def test_two_user_turns_the_client_sent_apart_stay_apart() -> None:
    sent = body(user("one"), user("two"))
    internal, carrier = messages_to_internal(sent)
    prepared = replaced(internal, 1, content=[text("two", cache_control=EPHEMERAL)])
    out = internal_to_messages(prepared, carrier)
    assert [m["content"] for m in out["messages"]] == [
        "one",
        [text("two", cache_control=EPHEMERAL)],
    ]


def test_an_assistant_turn_with_new_text_keeps_thinking_first_and_tool_use_after() -> None:
    sent = body(
        user("q"), assistant(thinking(), text("old"), tool_use("t1")), user(tool_result("t1"))
    )
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(replaced(internal, 1, content=[text("new")]), carrier)
    assert out["messages"][1]["content"] == [thinking(), text("new"), tool_use("t1")]
