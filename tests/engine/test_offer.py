"""The recall tool is offered when something was cut, kept once offered (same bytes, same place),
and withheld, with a reason, when the client's request rules it out."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson

from proxy.engine.offer import OFFERED_FIELD, RecallOffer, offered_body, prefix_with_tool
from proxy.engine.pipeline import draft_from_body
from proxy.recall.tool import RecallSettings, recall_tool
from proxy.types import JSON, SessionState
from tests.engine.test_engine_workspace import Clock, make_engine
from tests.factories import exchange, tool, user

SETTINGS = RecallSettings()
CLIENT_TOOL = {"type": "function", "function": {"name": "bash", "parameters": {}}}


def request(**extra: object) -> tuple[JSON, JSON]:
    """(the client's body, its prepared form with the old result pruned)."""
    messages = [user("go"), *exchange("c1", "a" * 900), user("and?")]
    body = {"model": "m", "messages": messages, "tools": [CLIENT_TOOL], **extra}
    cut = [*messages[:2], tool("c1", "a" * 200 + "...(cut)"), messages[3]]
    return body, {**body, "messages": cut}


def offer(
    body: JSON, outgoing: JSON, state: SessionState | None = None
) -> tuple[JSON, RecallOffer]:
    return offered_body(body, outgoing, settings=SETTINGS, state=state or SessionState(), covers=0)


def test_a_cut_request_gets_the_tool_after_the_clients_own() -> None:
    body, outgoing = request()
    before = copy.deepcopy(outgoing)
    out, made = offer(body, outgoing)
    assert made == RecallOffer(True, "", cut=True)
    assert out["tools"] == [CLIENT_TOOL, recall_tool(tool_name="ctx_recall")]
    assert outgoing == before


def test_nothing_cut_offers_nothing_and_copies_nothing() -> None:
    body, _ = request()
    out, made = offer(body, body)
    assert out is body and made == RecallOffer()


def test_a_session_offered_once_keeps_the_same_bytes_when_nothing_is_cut() -> None:
    body, outgoing = request()
    first, _ = offer(body, outgoing)
    later, made = offer(body, body, SessionState(fields={OFFERED_FIELD: "1"}))
    assert made.offered and not made.cut
    assert orjson.dumps(later["tools"]) == orjson.dumps(first["tools"])


def test_tool_choice_none_and_a_same_named_client_tool_withhold_it_with_a_reason() -> None:
    body, outgoing = request(tool_choice="none")
    out, made = offer(body, outgoing)
    assert out is outgoing and made == RecallOffer(False, "tool_choice_none", cut=True)
    clash = {"type": "function", "function": {"name": "ctx_recall", "parameters": {}}}
    body, outgoing = request(tools=[clash])
    out, made = offer(body, outgoing)
    assert out is outgoing and made.reason == "name_clash"
    nothing, _ = request(tools=[clash])
    assert offer(nothing, nothing)[1] == RecallOffer(), "no cut, no session offer: not counted"


def test_recall_off_computes_nothing() -> None:
    body, outgoing = request()
    out, made = offered_body(
        body, outgoing, settings=RecallSettings(enabled=False), state=SessionState(), covers=0
    )
    assert out is outgoing and made == RecallOffer()


async def test_the_engine_offers_it_and_its_record_keeps_it_offered(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, Clock())
    messages = [user("go"), *exchange("c1", "a" * 900), *exchange("c2", "b"), *exchange("c3", "c")]
    body = {"model": "gpt-4o", "messages": messages}
    turn = await engine.load_turn("a", "s1", draft_from_body(body))
    prepared = await engine.prepare(body, turn=turn, api_key=None, recall=True)
    assert prepared.recall.offered and prepared.body["tools"][-1] == recall_tool(
        tool_name="ctx_recall"
    )
    assert await engine.record(prepared, usage=None, completed=True, messages_in=7)
    short = {"model": "gpt-4o", "messages": [user("new task")]}
    turn = await engine.load_turn("a", "s1", draft_from_body(short))
    again = await engine.prepare(short, turn=turn, api_key=None, recall=True)
    assert again.recall.offered and again.body["tools"] == prepared.body["tools"]
    other = await engine.load_turn("a", "s2", draft_from_body(short))
    assert "tools" not in (await engine.prepare(short, turn=other, api_key=None, recall=True)).body


async def test_the_engine_offers_nothing_unless_the_caller_runs_the_loop(tmp_path: Path) -> None:
    """A route that answers no recall call must not offer the tool: offering is opt-in."""
    engine = make_engine(tmp_path, Clock())
    messages = [user("go"), *exchange("c1", "a" * 900), *exchange("c2", "b"), *exchange("c3", "c")]
    body = {"model": "gpt-4o", "messages": messages}
    turn = await engine.load_turn("a", "s1", draft_from_body(body))
    prepared = await engine.prepare(body, turn=turn, api_key=None)
    assert prepared.body["messages"] != messages, "something was cut"
    assert not prepared.recall.offered and "tools" not in prepared.body


def test_a_summarizers_prefix_carries_the_tool_when_the_sessions_requests_do() -> None:
    body, _ = request()
    prefix = {"model": "m", "messages": body["messages"][:2], "tools": [CLIENT_TOOL]}
    offered = SessionState(fields={OFFERED_FIELD: "1"})
    out = prefix_with_tool(prefix, body, settings=SETTINGS, state=offered)
    assert out["tools"] == [CLIENT_TOOL, recall_tool(tool_name="ctx_recall")]
    assert prefix_with_tool(prefix, body, settings=SETTINGS, state=SessionState()) is prefix
    none, _ = request(tool_choice="none")
    assert prefix_with_tool(prefix, none, settings=SETTINGS, state=offered) is prefix
