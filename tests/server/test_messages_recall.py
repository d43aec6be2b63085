"""The recall tool on `POST /v1/messages`: the `anthropic` SDK → ctxproxy → a fake upstream of
either kind playing a model that calls `ctx_recall`. The proxy answers the calls itself (in the
Messages API's form in front of an Anthropic upstream, as the chat route does in front of an
OpenAI one) and asks again; the client receives one message in which the tool never appears."""

from __future__ import annotations

import json
from typing import Any, Literal

import aiohttp
import pytest

from proxy.server.appkeys import STORE
from tests.e2e import test_recall_through_anthropic as via_anthropic
from tests.e2e import test_recall_through_proxy as via_chat
from tests.e2e.agent import settled, tool_call
from tests.fakes import openai_upstream
from tests.fakes.anthropic_upstream import Reply, overloaded, stream_events, text, tool_use
from tests.inbound.builders import chat_problem, wire_problem
from tests.server.messages_support import (
    MODEL,
    MakeMessagesProxy,
    MessagesProxy,
    make_messages_proxy,
)
from tests.server.test_messages import READ_TOOL, THOUGHT, long_session

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

JSON = dict[str, Any]
Kind = Literal["anthropic", "openai"]
ORIGINAL = "0\n" * 3_000
"""`toolu_0`'s result in `long_session()`, pruned in what goes upstream."""
SESSION = {"X-Claude-Code-Session-Id": "recall"}


def tool_names(body: JSON) -> list[str]:
    """The names of a Messages or a chat request's tools."""
    return [str((t.get("function") or t).get("name")) for t in body.get("tools") or []]


def recall_when_offered(body: JSON) -> Reply:
    """A model that calls the tool named `ctx_recall` whenever it may, else answers."""
    if "ctx_recall" in tool_names(body) and body.get("tool_choice") != {"type": "none"}:
        return tool_use(("toolu_r1", "ctx_recall", {"ref": "toolu_0"}), lead="Checking. ")
    return text("No recall here.")


def chat_recall_when_offered(body: JSON) -> openai_upstream.Reply:
    """`recall_when_offered` on the chat completions API."""
    if "ctx_recall" in tool_names(body) and body.get("tool_choice") != "none":
        call = tool_call("call_r1", "ctx_recall", ref="toolu_0")
        return openai_upstream.Reply(lead="Checking. ", tool_calls=[call])
    return openai_upstream.Reply(content="No recall here.")


@pytest.fixture(params=["anthropic", "openai"])
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=[False, True], ids=["json", "stream"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def echoing_proxy(make: MakeMessagesProxy, kind: Kind, **values: Any) -> MessagesProxy:
    """The proxy in front of a model that recalls `toolu_0`, then answers with what it got."""
    proxy = await make(kind=kind, **values)
    echoing = via_anthropic.echoing if kind == "anthropic" else via_chat.echoing
    proxy.fake.respond = echoing(ref="toolu_0")
    return proxy


def upstream_bodies(proxy: MessagesProxy) -> list[JSON]:
    """The model requests the upstream received (no summarizer call)."""
    if isinstance(proxy.fake, openai_upstream.FakeOpenAI):
        return [r.body for r in proxy.fake.chat]
    return [r.body for r in proxy.fake.received]


def problem(proxy: MessagesProxy, body: JSON) -> str | None:
    anthropic = not isinstance(proxy.fake, openai_upstream.FakeOpenAI)
    return wire_problem(body) if anthropic else chat_problem(body)


async def ask(proxy: MessagesProxy, *, stream: bool, **extra: Any) -> tuple[Any, dict[str, str]]:
    """The client's message (the SDK's, streamed or not) and the response headers."""
    body: JSON = {"model": MODEL, "max_tokens": 2000, "messages": long_session(),
                  "tools": [READ_TOOL], **extra}  # fmt: skip
    async with proxy.client(default_headers=SESSION) as client:
        if stream:
            async with client.messages.stream(**body) as events:
                answer = await events.get_final_message()
            return answer, {}
        raw = await client.messages.with_raw_response.create(**body)
        return await raw.parse(), dict(raw.headers)


def said(answer: Any) -> str:
    return "".join(block.text for block in answer.content if block.type == "text")


async def test_a_messages_client_is_never_handed_a_recall_tool_use(
    make_messages_proxy: MakeMessagesProxy, kind: Kind
) -> None:
    proxy = await make_messages_proxy(kind=kind)
    anthropic = kind == "anthropic"
    proxy.fake.respond = recall_when_offered if anthropic else chat_recall_when_offered
    async with proxy.client() as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=long_session(), tools=[READ_TOOL]
        )
    answer = await raw.parse()
    assert int(raw.headers["x-ctx-pruned-chars"]) > 0  # something was cut: the tool may be offered
    used = [b.name for b in answer.content if b.type == "tool_use"]
    assert "ctx_recall" not in used
    assert all(name in tool_names({"tools": [READ_TOOL]}) for name in used)


async def test_a_recall_by_ref_is_answered_byte_for_byte_and_never_shown(
    make_messages_proxy: MakeMessagesProxy, kind: Kind, stream: bool
) -> None:
    proxy = await echoing_proxy(make_messages_proxy, kind)
    answer, headers = await ask(proxy, stream=stream)
    assert said(answer) == f"Checking. Recalled:\n{ORIGINAL}"
    assert [b.type for b in answer.content if b.type == "tool_use"] == []
    assert stream or headers["x-ctx-recalls"] == "1", "a whole answer tells the recalls"
    assert answer.stop_reason == "end_turn"
    first, second = upstream_bodies(proxy)
    assert tool_names(first)[-1] == "ctx_recall" and tool_names(second) == tool_names(first)
    assert 'ctx_recall(ref=\\"toolu_0\\")' in json.dumps(first)  # the marker names the ref
    assert json.dumps(ORIGINAL) in json.dumps(second)  # the original went back upstream
    assert problem(proxy, first) is None and problem(proxy, second) is None
    if not stream:
        assert headers["x-ctx-recalls"] == "1"
    await settled(proxy.app)
    events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=20)
    [request] = [e for _, e in events if e["kind"] == "request"]
    assert (request["recalls"], request["recall_rounds"]) == ("1", "2")


async def test_usage_is_summed_over_the_rounds(
    make_messages_proxy: MakeMessagesProxy, kind: Kind, stream: bool
) -> None:
    proxy = await echoing_proxy(make_messages_proxy, kind)
    answer, _ = await ask(proxy, stream=stream)
    if kind == "anthropic":
        assert (answer.usage.input_tokens, answer.usage.output_tokens) == (24, 10)
        return
    prompts = [openai_upstream.estimate_prompt_tokens(b) for b in upstream_bodies(proxy)]
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (sum(prompts), 14)


async def test_anthropic_rounds_keep_the_thinking_blocks_and_the_stream_is_one_message(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    recall = {
        "type": "tool_use",
        "id": "toolu_r1",
        "name": "ctx_recall",
        "input": {"ref": "toolu_0"},
    }
    proxy.fake.script(
        Reply(content=(THOUGHT, {"type": "text", "text": "Checking. "}, recall),
              stop_reason="tool_use"),
        Reply(content=(THOUGHT, {"type": "text", "text": "Done."})),
    )  # fmt: skip
    thinking = {"type": "enabled", "budget_tokens": 1024}
    body = {"model": MODEL, "max_tokens": 2000, "messages": long_session(), "stream": True,
            "tools": [READ_TOOL], "thinking": thinking}  # fmt: skip
    url = proxy.base_url + "/v1/messages"
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as got:
        raw = await got.read()
    assert b"ctx_recall" not in raw and b"toolu_r1" not in raw and b"msg_fake0002" not in raw
    assert raw.count(b"event: message_start") == raw.count(b"event: message_stop") == 1
    starts = [json.loads(line[6:]) for line in raw.split(b"\n") if b'"content_block_start"' in line]
    assert [(s["index"], s["content_block"]["type"]) for s in starts] == [
        (0, "thinking"), (1, "text"), (2, "thinking"), (3, "text")]  # fmt: skip
    continued = upstream_bodies(proxy)[1]["messages"][-2]
    assert continued == {"role": "assistant", "content": [THOUGHT, {"type": "text",
        "text": "Checking. "}, recall]}  # fmt: skip
    assert wire_problem(upstream_bodies(proxy)[1]) is None


async def test_mixed_calls_answer_the_recall_and_the_client_gets_its_own_reissued(
    make_messages_proxy: MakeMessagesProxy, kind: Kind, stream: bool
) -> None:
    proxy = await make_messages_proxy(kind=kind)
    read_1, read_2 = ({"path": "a.py"}, {"path": "b.py"})
    if kind == "anthropic":
        proxy.fake.script(
            tool_use(("toolu_r1", "ctx_recall", {"ref": "toolu_0"}), ("toolu_b1", "Read", read_1)),
            tool_use(("toolu_b2", "Read", read_2)),
        )
    else:
        proxy.fake.script.extend([
            openai_upstream.Reply(tool_calls=[tool_call("call_r1", "ctx_recall", ref="toolu_0"),
                                              tool_call("b1", "Read", **read_1)]),
            openai_upstream.Reply(tool_calls=[tool_call("b2", "Read", **read_2)]),
        ])  # fmt: skip
    answer, _ = await ask(proxy, stream=stream)
    uses = [(b.name, b.input) for b in answer.content if b.type == "tool_use"]
    assert uses == [("Read", read_2)] and answer.stop_reason == "tool_use"
    second = json.dumps(upstream_bodies(proxy)[1])
    assert "a.py" not in second and json.dumps(ORIGINAL) in second  # b1 re-issued by the model


async def test_max_rounds_ends_with_a_round_that_cannot_recall(
    make_messages_proxy: MakeMessagesProxy, kind: Kind, stream: bool
) -> None:
    extra = "[tenants.default.recall]\nmax_rounds = 2\n"
    proxy = await make_messages_proxy(kind=kind, tenant_extra=extra)
    proxy.fake.respond = recall_when_offered if kind == "anthropic" else chat_recall_when_offered
    answer, _ = await ask(proxy, stream=stream)
    bodies = upstream_bodies(proxy)
    assert len(bodies) == 3
    # the tools stay (the history holds their calls, the prefix stays cached); no choice left
    none = {"type": "none"} if kind == "anthropic" else "none"
    assert [b.get("tool_choice") for b in bodies] == [None, None, none]
    assert [tool_names(b)[-1:] for b in bodies] == [["ctx_recall"]] * 3
    assert all(problem(proxy, b) is None for b in bodies)
    assert (
        said(answer) == "Checking. Checking. No recall here." and answer.stop_reason == "end_turn"
    )
    assert [b.type for b in answer.content if b.type == "tool_use"] == []


async def test_a_later_rounds_error_ends_the_stream_in_band_in_anthropics_shape(
    make_messages_proxy: MakeMessagesProxy, kind: Kind
) -> None:
    proxy = await make_messages_proxy(kind=kind)
    if kind == "anthropic":
        proxy.fake.script(recall_when_offered({"tools": [{"name": "ctx_recall"}]}), overloaded())
    else:
        proxy.fake.script.extend([
            chat_recall_when_offered({"tools": [{"name": "ctx_recall"}]}),
            openai_upstream.Reply(status=503),
        ])  # fmt: skip
    body = {"model": MODEL, "max_tokens": 100, "messages": long_session(), "stream": True}
    url = proxy.base_url + "/v1/messages"
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as got:
        raw = await got.read()
    assert got.status == 200 and b"ctx_recall" not in raw and b"message_stop" not in raw
    last = raw.strip().split(b"\n\n")[-1]
    assert last.startswith(b"event: error\n")
    assert json.loads(last.split(b"data: ", 1)[1])["type"] == "error"


async def test_a_stream_offered_the_tool_but_not_calling_it_goes_out_byte_for_byte(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    reply = Reply(content=(THOUGHT, {"type": "text", "text": "No recall needed."}))
    proxy.fake.script(reply)
    body = {"model": MODEL, "max_tokens": 2000, "messages": long_session(), "stream": True}
    url = proxy.base_url + "/v1/messages"
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as got:
        relayed = await got.read()
    [sent] = upstream_bodies(proxy)
    assert tool_names(sent) == ["ctx_recall"]
    message = {"id": "msg_fake0001", "type": "message", "role": "assistant", "model": MODEL,
               "content": list(reply.content), "stop_reason": "end_turn", "stop_sequence": None,
               "usage": reply.usage}  # fmt: skip
    expected = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        for name, data in stream_events(message, reply)
    )
    assert relayed == expected


async def test_count_tokens_counts_the_recall_tool_the_request_would_carry(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    async with proxy.client() as client:
        await client.messages.count_tokens(model=MODEL, messages=long_session())  # type: ignore[arg-type]
    assert tool_names(proxy.fake.received[-1].body) == ["ctx_recall"]


async def test_a_prefilled_answer_is_not_offered_the_tool(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    proxy.fake.respond = recall_when_offered
    history = [*long_session(), {"role": "assistant", "content": "The answer is"}]
    async with proxy.client() as client:
        answer = await client.messages.create(
            model=MODEL, max_tokens=10, messages=history, tools=[READ_TOOL]
        )
    assert said(answer) == "No recall here." and tool_names(upstream_bodies(proxy)[0]) == ["Read"]
