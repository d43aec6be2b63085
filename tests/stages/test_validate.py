"""Pre-flight validation: the proxy's own faults are repaired, the client's pass through."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.content import find_body_markers
from proxy.stages.validate import (
    PLACEHOLDER,
    _late_system,
    _pairing_faults,
    repair_markers,
    validate_request,
)
from proxy.types import JSON, Message
from tests.factories import assistant, call, exchange, system, tool, user

EPHEMERAL = {"type": "ephemeral"}


def user_parts(parts: list[dict[str, Any]]) -> Message:
    return {"role": "user", "content": parts}


def check(
    messages: list[Message], client: list[Message], *, allow: bool = True, **body: Any
) -> tuple[JSON, dict[str, int]]:
    sent = {"model": "m", **body, "messages": messages}
    before = copy.deepcopy((sent, client))
    out, report = validate_request(sent, client_messages=client, allow_cache_control=allow)
    assert (sent, client) == before
    return out, dict(report.counters)


def placeholder(call_id: str) -> Message:
    return tool(call_id, PLACEHOLDER)


def test_a_valid_body_is_returned_as_it_is() -> None:
    history = [system("s"), user("hi"), *exchange("c1", "out"), user_parts([marked("q")])]
    sent = {"model": "m", "messages": history}
    out, report = validate_request(sent, client_messages=history, allow_cache_control=True)
    assert out is sent
    assert report.counters["repairs"] == 0


def test_orphan_result_the_proxy_produced_is_dropped() -> None:
    client = [user("hi"), *exchange("c1", "out"), user("q")]
    out, counters = check([user("hi"), tool("c1", "out"), user("q")], client)
    assert out["messages"] == [user("hi"), user("q")]
    assert counters["repairs"] == counters["orphans_dropped"] == 1


def test_orphan_result_the_client_sent_passes_through() -> None:
    client = [user("hi"), tool("c9", "stray"), user("q")]
    out, counters = check(list(client), client)
    assert out["messages"] == client
    assert counters["repairs"] == 0
    assert counters["client_violations"] == 1


def test_unanswered_call_the_proxy_caused_gets_a_placeholder_at_the_end_of_its_block() -> None:
    calls = assistant(None, call("a"), call("b"))
    client = [user("hi"), calls, tool("a", "A"), tool("b", "B"), user("q")]
    out, counters = check([user("hi"), calls, tool("a", "A"), user("q")], client)
    assert out["messages"] == [user("hi"), calls, tool("a", "A"), placeholder("b"), user("q")]
    assert counters["results_filled"] == counters["repairs"] == 1


def test_unanswered_last_call_is_filled_at_the_end() -> None:
    client = [user("hi"), *exchange("c1", "out")]
    out, _ = check([user("hi"), assistant(None, call("c1"))], client)
    assert out["messages"][-1] == placeholder("c1")


def test_unanswered_call_the_client_sent_passes_through() -> None:
    client = [user("hi"), assistant(None, call("c1")), user("q")]
    out, counters = check(list(client), client)
    assert out["messages"] == client
    assert counters["client_violations"] == 1


def test_result_separated_from_its_call_by_the_proxy_is_repaired() -> None:
    client = [user("hi"), *exchange("c1", "out"), user("q")]
    broken = [user("hi"), assistant(None, call("c1")), user("q"), tool("c1", "out")]
    out, counters = check(broken, client)
    assert out["messages"] == [
        user("hi"),
        assistant(None, call("c1")),
        placeholder("c1"),
        user("q"),
    ]
    assert counters["repairs"] == 2


def test_duplicate_result_is_an_orphan() -> None:
    client = [user("hi"), *exchange("c1", "out")]
    out, _ = check([user("hi"), *exchange("c1", "out"), tool("c1", "again")], client)
    assert out["messages"] == client


def test_system_message_the_proxy_put_mid_history_becomes_a_user_message() -> None:
    client = [system("s"), user("hi"), user("q")]
    out, counters = check([system("s"), user("hi"), system("[summary]"), user("q")], client)
    assert out["messages"][2] == user("[summary]")
    assert counters["systems_demoted"] == counters["repairs"] == 1


def test_system_message_the_client_put_mid_history_passes_through() -> None:
    client = [system("s"), user("hi"), {"role": "developer", "content": "note"}, user("q")]
    out, counters = check(list(client), client)
    assert out["messages"] == client
    assert counters["client_violations"] == 1


def test_excess_markers_of_ours_are_removed_newest_first() -> None:
    client = [user_parts([marked("a"), marked("b")]), user("q")]
    ours = [
        {"role": "system", "content": [marked("S"), marked("C")]},
        user_parts([marked("a"), marked("b")]),
        user_parts([marked("q")]),
    ]
    out, counters = check(ours, client)
    assert out["messages"][:2] == ours[:2]
    assert out["messages"][2]["content"] == [{"type": "text", "text": "q"}]
    assert counters["markers_removed"] == counters["repairs"] == 1


@pytest.mark.parametrize("body", [{"model": "m"}, {"model": "m", "messages": []}])
def test_a_body_without_messages_is_left_alone(body: JSON) -> None:
    out, report = validate_request(body, client_messages=[], allow_cache_control=True)
    assert out is body and report.counters["repairs"] == 0


# --- properties -----------------------------------------------------------------------------

texts = st.text(alphabet="abc ", max_size=6)


@st.composite
def client_histories(draw: st.DrawFn) -> list[Message]:
    """Agent histories with parallel calls, client markers and some client-made faults."""
    out: list[Message] = [system("s")]
    for n in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "stray", "unanswered", "late"]))
        if kind in ("tools", "unanswered"):
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            out.append(assistant(None, *(call(i) for i in ids)))
            answered = ids if kind == "tools" else ids[: draw(st.integers(0, len(ids) - 1))]
            out += [tool(i, draw(texts)) for i in answered]
        elif kind == "stray":
            out.append(tool(f"stray{n}", draw(texts)))
        elif kind == "late":
            out.append(system(f"late {n}"))
        elif draw(st.booleans()):
            out.append({"role": kind, "content": [marked(f"m{n}")]})
        else:
            out.append({"role": kind, "content": draw(texts)})
    return out


@st.composite
def proxy_breakage(draw: st.DrawFn) -> tuple[list[Message], list[Message]]:
    """A client history and what a faulty proxy made of it: dropped/moved messages, extra
    markers, a summary as a mid-history system message."""
    client = draw(client_histories())
    out = list(client)
    for _ in range(draw(st.integers(0, 3))):
        if len(out) > 1:
            del out[draw(st.integers(1, len(out) - 1))]
    if draw(st.booleans()) and len(out) > 1:
        out.insert(draw(st.integers(1, len(out))), system("[Conversation summary] proxy"))
    for n in range(draw(st.integers(0, 4))):
        out.insert(draw(st.integers(1, len(out))), user_parts([marked(f"proxy {n}")]))
    return client, out


def faults(messages: list[Message]) -> tuple[set[Any], set[Any]]:
    orphans, unanswered = _pairing_faults(messages)
    return {messages[i].get("tool_call_id") for i in orphans}, {c for _, c in unanswered}


def count_markers(messages: list[Message]) -> int:
    lists = [m["content"] for m in messages if isinstance(m.get("content"), list)]
    return sum("cache_control" in part for content in lists for part in content)


@settings(max_examples=300, deadline=None)
@given(proxy_breakage(), st.booleans())
def test_validation_repairs_what_the_proxy_broke_and_is_idempotent(
    case: tuple[list[Message], list[Message]], allow: bool
) -> None:
    client, messages = case
    out, _ = check(messages, client, allow=allow)
    result = out["messages"]
    client_orphans, client_unanswered = faults(client)
    orphans, unanswered = faults(result)
    assert orphans <= client_orphans and unanswered <= client_unanswered
    if allow:
        assert count_markers(result) <= max(4, count_markers(client))
    else:
        assert count_markers(result) <= count_markers(client)
        assert "proxy" not in str([m for m in result if "cache_control" in str(m)])
    again, second = check(result, client, allow=allow)
    assert again["messages"] == result
    assert second["repairs"] == 0


def test_a_clean_body_reports_zero_repairs_and_zero_client_violations() -> None:
    _, counters = check([user("hi"), assistant("hello")], [user("hi"), assistant("hello")])
    assert counters == {"repairs": 0, "client_violations": 0}


@given(st.lists(st.sampled_from(["system", "developer", "user", "assistant", "tool", None])))
def test_late_system_lists_system_messages_after_the_first_other_role(
    roles: list[str | None],
) -> None:
    messages = [{"role": r} if r else {} for r in roles]
    first = next((i for i, r in enumerate(roles) if r not in ("system", "developer")), len(roles))
    expected = [i for i in range(first, len(roles)) if roles[i] in ("system", "developer")]
    assert _late_system(messages) == expected


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
