"""The recall tool on `POST /v1/responses`: the openai SDK's `responses.create` → ctxproxy → a fake
upstream of each kind (a Responses one natively) playing a model that calls `ctx_recall`, JSON
and streamed. The proxy answers the calls itself; the client gets one Response in which the tool
never appears."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from proxy.server.appkeys import STORE
from tests.e2e import test_recall_through_anthropic as via_anthropic
from tests.e2e import test_recall_through_proxy as via_chat
from tests.e2e.agent import settled
from tests.e2e.conftest import MakeAnthropicProxy
from tests.e2e.responses_upstreams import Upstream, make_upstream
from tests.e2e.test_recall_through_proxy import LOG, recall_call
from tests.fakes.openai_upstream import FakeOpenAI, Reply, estimate_prompt_tokens
from tests.inbound.responses_builders import events_of
from tests.server.conftest import MakeProxy

JSON = dict[str, Any]
MODEL = "gpt-5"
SESSION = {"X-Ctx-Session": "recall"}


def items(question: str = "What was on line 0042?") -> list[JSON]:
    """The client's input: `call_1`'s output (LOG) is old enough to be pruned."""
    out: list[JSON] = [{"role": "user", "content": "Check the log."}]
    for call_id, output in (("call_1", LOG), ("c2", "two"), ("c3", "three")):
        out.append({"type": "function_call", "call_id": call_id, "name": "bash",
                    "arguments": "{}"})  # fmt: skip
        out.append({"type": "function_call_output", "call_id": call_id, "output": output})
    out.append({"role": "user", "content": question})
    return out


async def looping_upstream(
    kind: str, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy, **values: Any
) -> Upstream:
    """`kind`'s upstream playing a model that recalls `call_1`, then answers with what it got."""
    upstream = await make_upstream(kind, make_proxy, make_anthropic_proxy, **values)
    echoing = via_anthropic.echoing if kind == "anthropic" else via_chat.echoing
    upstream.proxy.fake.respond = echoing(ref="call_1")
    return upstream


def offers_recall(upstream: Upstream) -> list[bool]:
    """Whether each upstream request (any wire shape) offers the recall tool."""
    return ['"ctx_recall"' in json.dumps(body.get("tools")) for body in upstream.requests]


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
async def test_a_recall_is_answered_and_the_response_never_shows_the_tool(
    kind: str, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy
) -> None:
    upstream = await looping_upstream(kind, make_proxy, make_anthropic_proxy)
    async with upstream.client(default_headers=SESSION) as client:
        raw = await client.responses.with_raw_response.create(model=MODEL, input=items())  # type: ignore[arg-type]
    response = raw.parse()
    assert response.output_text == f"Checking. Recalled:\n{LOG}"
    assert [item.type for item in response.output] == ["message"]
    assert "ctx_recall" not in raw.text and raw.headers["x-ctx-recalls"] == "1"
    assert offers_recall(upstream) == [True, True]
    assert upstream.problem(upstream.requests[1]) is None
    assert json.dumps(LOG)[1:-1] in json.dumps(upstream.requests[1])  # the original went up
    assert response.usage is not None
    assert response.usage.input_tokens == sum(prompt_tokens(upstream))  # summed over the rounds
    await settled(upstream.proxy.app)
    events = await upstream.proxy.app[STORE].read_events("0-0", block_ms=0, count=20)
    [request] = [e for _, e in events if e["kind"] == "request"]
    assert (request["recalls"], request["recall_rounds"]) == ("1", "2")


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
async def test_a_streamed_recall_continues_the_same_response_stream(
    kind: str, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy
) -> None:
    upstream = await looping_upstream(kind, make_proxy, make_anthropic_proxy)
    async with upstream.client(default_headers=SESSION) as client:
        stream = client.responses.stream(model=MODEL, input=items())  # type: ignore[arg-type]
        async with stream as events:
            kinds = [event.type async for event in events]
            final = await events.get_final_response()
    assert final.output_text == f"Checking. Recalled:\n{LOG}"
    assert [item.type for item in final.output] == ["message"]
    assert kinds.count("response.created") == 1 and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" not in kinds
    assert len(upstream.requests) == 2


async def test_the_streamed_events_are_numbered_and_name_no_recall(make_proxy: MakeProxy) -> None:
    upstream = await looping_upstream("chat", make_proxy, make_proxy)
    body = {"model": MODEL, "input": items(), "stream": True}
    url = upstream.proxy.server.make_url("/v1/responses")
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as got:
        raw = await got.read()
    assert b"ctx_recall" not in raw and b"rc_1" not in raw
    events = events_of(raw)  # checked: each valid for the SDK, numbered 0, 1, 2 …
    assert events[-1]["type"] == "response.completed"
    assert (
        events[-1]["response"]["output"][0]["content"][0]["text"] == f"Checking. Recalled:\n{LOG}"
    )


def recalling_natively(ref: str) -> Callable[[JSON], Reply]:
    """A reasoning model on `/v1/responses`: reasons, then calls the recall tool for `ref`;
    given the result, reasons and answers with it."""

    def respond(body: JSON) -> Reply:
        last = body["input"][-1]
        if last.get("type") == "function_call_output" and last["call_id"] == "rc_1":
            return Reply(content=f"Recalled:\n{last['output']}", reasoning="gAAA-answering")
        return Reply(tool_calls=[recall_call("rc_1", ref=ref)], reasoning="gAAA-recalling")

    return respond


async def native_upstream(make_proxy: MakeProxy) -> Upstream:
    upstream = await make_upstream("responses", make_proxy, make_proxy)
    fake = upstream.proxy.fake
    assert isinstance(fake, FakeOpenAI)
    fake.respond_responses = recalling_natively("call_1")
    return upstream


def without_instructions(payload: JSON) -> JSON:
    """A Response (or an event holding one) less the `instructions` it echoes: the bootstrap's,
    which names the recall tool to the model."""
    if isinstance(payload.get("response"), dict):
        return {**payload, "response": without_instructions(payload["response"])}
    return {k: v for k, v in payload.items() if k != "instructions"}


def served_input_tokens(upstream: Upstream) -> int:
    fake = upstream.proxy.fake
    assert isinstance(fake, FakeOpenAI)
    return sum(r["usage"]["input_tokens"] for r in fake.served.values())


async def test_a_native_responses_upstream_recalls_and_the_reasoning_stays_whole(
    make_proxy: MakeProxy,
) -> None:
    upstream = await native_upstream(make_proxy)
    async with upstream.client(default_headers=SESSION) as client:
        raw = await client.responses.with_raw_response.create(model=MODEL, input=items())  # type: ignore[arg-type]
    response = raw.parse()
    assert response.output_text == f"Recalled:\n{LOG}"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert "gAAA-recalling" not in raw.text  # its item was the recall call: dropped with it
    assert "ctx_recall" not in json.dumps(without_instructions(json.loads(raw.text)))
    assert raw.headers["x-ctx-recalls"] == "1"
    assert offers_recall(upstream) == [True, True]
    second = upstream.requests[1]
    assert upstream.problem(second) is None
    assert [i.get("type") for i in second["input"][-3:]] == [
        "reasoning", "function_call", "function_call_output"]  # fmt: skip
    assert second["input"][-1]["output"].startswith(LOG[:200])  # the original went up
    assert response.usage is not None
    assert response.usage.input_tokens == served_input_tokens(upstream)


async def test_a_native_streamed_recall_is_one_response_stream(make_proxy: MakeProxy) -> None:
    upstream = await native_upstream(make_proxy)
    async with upstream.client(default_headers=SESSION) as client:
        stream = client.responses.stream(model=MODEL, input=items())  # type: ignore[arg-type]
        async with stream as events:
            kinds = [event.type async for event in events]
            final = await events.get_final_response()
    assert final.output_text == f"Recalled:\n{LOG}"
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert kinds.count("response.created") == 1 and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" not in kinds
    assert final.usage is not None and final.usage.input_tokens == served_input_tokens(upstream)
    body = {"model": MODEL, "input": items(), "stream": True}
    url = upstream.proxy.server.make_url("/v1/responses")
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=SESSION) as got:
        raw = await got.read()
    assert b"gAAA-recalling" not in raw and b"rc_1" not in raw
    sent = events_of(raw)  # checked: each valid for the SDK, numbered 0, 1, 2 …
    assert "ctx_recall" not in json.dumps([without_instructions(e) for e in sent])
    added = [e for e in sent if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"]) for e in added] == [
        (0, "reasoning"), (1, "message")]  # fmt: skip


def prompt_tokens(upstream: Upstream) -> list[int]:
    """The input tokens each round's answer reported, as the fakes compute them."""
    if upstream.kind == "anthropic":
        return [12 for _ in upstream.requests]
    return [estimate_prompt_tokens(b) for b in upstream.requests]
