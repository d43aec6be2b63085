"""The recall tool end to end: the openai SDK → ctxproxy → the fake OpenAI upstream playing a model
that calls `ctx_recall`, streamed and not. The proxy answers the calls itself and asks again; the
client receives one ordinary answer in which the tool never appears."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

import aiohttp
import pytest

from proxy.server.appkeys import STORE
from tests.e2e.agent import settled, tool_call
from tests.fakes.openai_upstream import Reply, estimate_prompt_tokens
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy
from tests.server.observe.test_metrics import scrape, value

JSON = dict[str, Any]
LOG = "".join(f"line {i:04d}: status=ok value={i * 7}\n" for i in range(120))
"""A 4,000-character tool result, old enough to be pruned to 200 characters."""
BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
RECALL_OFF = "[tenants.default.recall]\nenabled = false\n"


def history(question: str = "What was on line 0042?") -> list[JSON]:
    """The client's history: `call_1`'s result (LOG) is pruned, `c2` and `c3` are kept whole."""
    return [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Check the log."},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", "read_log")]},
        {"role": "tool", "tool_call_id": "call_1", "content": LOG},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "three"},
        {"role": "user", "content": question},
    ]


def recall_call(call_id: str, **arguments: Any) -> JSON:
    return tool_call(call_id, "ctx_recall", **arguments)


def is_recall_result(message: JSON) -> bool:
    return message.get("role") == "tool" and str(message.get("tool_call_id")).startswith("rc_")


def echoing(**arguments: Any) -> Callable[[JSON], Reply]:
    """A model that calls the recall tool with `arguments`, then answers with what it got."""

    def respond(body: JSON) -> Reply:
        last = body["messages"][-1]
        if is_recall_result(last):
            return Reply(content=f"Recalled:\n{last['content']}")
        return Reply(lead="Checking. ", tool_calls=[recall_call("rc_1", **arguments)])

    return respond


class Answer(NamedTuple):
    """What the client received, streamed or not, as the SDK parsed it."""

    content: str
    tool_calls: list[JSON]
    finish_reasons: list[str]
    usage: JSON | None
    headers: dict[str, str]
    chunk_ids: set[str]
    role_deltas: int


async def ask(
    proxy: Proxy, *, stream: bool, messages: list[JSON] | None = None, **extra: Any
) -> Answer:
    body: JSON = {"model": "gpt-4o", "messages": messages or history(), **extra}
    async with proxy.client(default_headers={"X-Ctx-Session": "recall"}) as client:
        if not stream:
            raw = await client.chat.completions.with_raw_response.create(**body)
            done = raw.parse()
            message = done.choices[0].message
            calls = [c.model_dump() for c in message.tool_calls or []]
            usage = done.usage.model_dump() if done.usage else None
            finish = [done.choices[0].finish_reason]
            answer = Answer(
                message.content or "", calls, finish, usage, dict(raw.headers), set(), 0
            )
        else:
            options = {"stream_options": {"include_usage": True}}
            chunks = [c async for c in await client.chat.completions.create(
                **body, stream=True, **options)]  # fmt: skip
            answer = streamed(chunks)
    await settled(proxy.app)
    return answer


def streamed(chunks: list[Any]) -> Answer:
    content, finish, calls = "", [], {}
    roles, usage = 0, None
    for chunk in chunks:
        usage = chunk.usage.model_dump() if chunk.usage else usage
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            roles += delta.role is not None
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += (call.function.name or "") if call.function else ""
                entry["arguments"] += (call.function.arguments or "") if call.function else ""
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    ordered = [calls[i] for i in sorted(calls)]
    assert sorted(calls) == list(range(len(calls))), "client tool calls are indexed from 0"
    return Answer(content, ordered, finish, usage, {}, {c.id for c in chunks}, roles)


def sent(proxy: Proxy) -> list[JSON]:
    """The bodies the upstream received (chat rounds, no summarizer call)."""
    return [r.body for r in proxy.fake.chat]


def names(body: JSON) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


@pytest.fixture(params=[False, True], ids=["whole", "stream"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def test_a_recall_by_ref_is_answered_byte_for_byte_and_the_client_never_sees_the_tool(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy()
    proxy.fake.respond = echoing(ref="call_1")
    answer = await ask(proxy, stream=stream, tools=[BASH])
    assert answer.content == f"Checking. Recalled:\n{LOG}"
    assert answer.tool_calls == [] and answer.finish_reasons == ["stop"]
    first, second = sent(proxy)
    assert names(first) == names(second) == ["bash", "ctx_recall"]
    pruned = next(m for m in first["messages"] if m.get("tool_call_id") == "call_1")["content"]
    marker = f'...(truncated, original: {len(LOG)} chars; full text: ctx_recall(ref="call_1"))'
    assert pruned.endswith(marker)
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][-2]["tool_calls"] == [recall_call("rc_1", ref="call_1")]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "rc_1", "content": LOG}
    if stream:
        assert answer.chunk_ids == {"chatcmpl-fake"} and answer.role_deltas == 1
    else:
        assert answer.headers["x-ctx-recalls"] == "1"


async def test_a_recall_by_query_finds_the_line_and_names_its_ref(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy()
    proxy.fake.respond = echoing(query="LINE 0042")
    answer = await ask(proxy, stream=stream)
    assert '1 occurrence(s) of "LINE 0042" in cut content:' in answer.content
    assert 'ref="call_1" line 43' in answer.content
    assert ">    43| line 0042: status=ok value=294" in answer.content


async def test_mixed_calls_answer_the_recall_and_ask_again_for_the_clients_own(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy()
    proxy.fake.script.append(Reply(tool_calls=[recall_call("rc_1", ref="call_1"), tool_call("b1")]))
    proxy.fake.script.append(Reply(tool_calls=[tool_call("b2", cmd="grep 0042")]))
    answer = await ask(proxy, stream=stream, tools=[BASH])
    assert [(c.get("id"), c.get("name") or c["function"]["name"]) for c in answer.tool_calls] == [
        ("b2", "bash")
    ]
    assert answer.finish_reasons == ["tool_calls"]
    second = sent(proxy)[1]["messages"]
    assert second[-2]["tool_calls"] == [recall_call("rc_1", ref="call_1")], "b1 is re-issued"
    assert second[-1]["content"] == LOG


async def test_max_rounds_ends_with_a_round_that_may_not_call_the_tool(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy(tenant_extra="[tenants.default.recall]\nmax_rounds = 2\n")
    calls = iter(range(10))
    proxy.fake.respond = lambda body: Reply(
        lead=f"step {next(calls)}. ",
        tool_calls=[recall_call(f"rc_{len(body['messages'])}", query="ok")],
    )
    answer = await ask(proxy, stream=stream, tools=[BASH])
    bodies = sent(proxy)
    assert len(bodies) == 3 and [names(b) for b in bodies] == [["bash", "ctx_recall"]] * 3
    assert [b.get("tool_choice") for b in bodies] == [None, None, "none"]
    assert answer.content == "step 0. step 1. step 2. "
    assert answer.tool_calls == [] and answer.finish_reasons == ["stop"]
    samples = await scrape(proxy)
    assert (
        value(samples, "ctxproxy_recalls_total", tenant="default", kind="query", outcome="hit") == 2
    )


async def test_a_client_tool_of_the_same_name_is_the_clients(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy()
    theirs = {"type": "function", "function": {"name": "ctx_recall", "parameters": {}}}
    proxy.fake.script.append(Reply(tool_calls=[recall_call("t1", ref="call_1")]))
    answer = await ask(proxy, stream=stream, tools=[theirs])
    assert [names(b) for b in sent(proxy)] == [["ctx_recall"]] and len(sent(proxy)) == 1
    assert [c.get("id") for c in answer.tool_calls] == ["t1"]
    samples = await scrape(proxy)
    withheld = value(
        samples, "ctxproxy_recall_withheld_total", tenant="default", reason="name_clash"
    )
    assert withheld == 1


async def test_an_unknown_ref_is_explained_with_the_refs_that_exist(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy()
    proxy.fake.respond = echoing(ref="call_99")
    answer = await ask(proxy, stream=stream)
    assert 'No cut item has ref="call_99" in this conversation.' in answer.content
    assert f'- "call_1" (tool result, {len(LOG)} chars)' in answer.content


async def test_a_ref_of_another_conversation_is_unknown_here(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    proxy.fake.respond = echoing(ref="call_1")
    other = history()
    other[2:4] = [  # another conversation: its old result is `call_7`
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_7", "read_log")]},
        {"role": "tool", "tool_call_id": "call_7", "content": LOG.upper()},
    ]
    first = await ask(proxy, stream=False, messages=other)
    assert 'No cut item has ref="call_1" in this conversation.' in first.content
    assert '"call_7"' in first.content and "line 0042" not in first.content


async def test_usage_is_summed_for_the_client_and_the_session_records_the_last_round(
    make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy()
    proxy.fake.respond = echoing(ref="call_1")
    answer = await ask(proxy, stream=stream)
    prompts = [estimate_prompt_tokens(b) for b in sent(proxy)]
    assert answer.usage is not None
    assert answer.usage["prompt_tokens"] == sum(prompts)
    assert answer.usage["completion_tokens"] == 14
    state = await proxy.app[STORE].load("default", "recall")
    assert state.int_field("last_prompt_tokens") == prompts[-1]  # what the upstream holds
    assert state.int_field("cache_prompt_tokens") == prompts[0]  # what a cache could serve
    assert state.int_field("recall_offered") == 1
    events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=10)
    [request] = [e for _, e in events if e["kind"] == "request"]
    assert (request["recalls"], request["recall_rounds"]) == ("1", "2")


async def test_nothing_cut_sends_no_tool_and_relays_as_is(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    messages = [{"role": "user", "content": "hi"}]
    answer = await ask(proxy, stream=True, messages=messages)
    assert answer.content == "Hello from the fake upstream."
    assert "tools" not in sent(proxy)[0]


async def test_recall_off_sends_no_tool_even_when_something_was_cut(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=RECALL_OFF)
    await ask(proxy, stream=False)
    [body] = sent(proxy)
    assert "tools" not in body and "ctx_recall" not in json.dumps(body)


async def test_an_upstream_error_in_a_later_round_ends_the_stream_in_band(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy()
    proxy.fake.script.extend([
        Reply(lead="Checking. ", tool_calls=[recall_call("rc_1", ref="call_1")]),
        Reply(status=503),
    ])  # fmt: skip
    body = {"model": "gpt-4o", "messages": history(), "stream": True}
    url = proxy.server.make_url("/v1/chat/completions")
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        raw = await response.read()
    assert response.status == 200
    events = [json.loads(e.removeprefix("data: ")) for e in raw.decode().split("\n\n") if e]
    said = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1])
    assert said == "Checking. " and events[-1]["error"]["message"] == "scripted error"
    assert b"ctx_recall" not in raw and b"[DONE]" not in raw


async def test_an_upstream_error_in_a_later_round_returns_what_the_rounds_gave(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy()
    proxy.fake.script.extend([
        Reply(lead="Checking. ", tool_calls=[recall_call("rc_1", ref="call_1")]),
        Reply(status=503),
    ])  # fmt: skip
    answer = await ask(proxy, stream=False)
    assert answer.content == "Checking. " and answer.finish_reasons == ["stop"]
    assert answer.tool_calls == [] and answer.headers["x-ctx-recalls"] == "1"


async def test_a_stream_offered_the_tool_but_not_calling_it_goes_out_byte_for_byte(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy()
    body = {"model": "gpt-4o", "messages": history(), "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        url = proxy.server.make_url("/v1/chat/completions")
        async with http.post(url, json=body) as response:
            through = await response.read()
        [sent_up] = sent(proxy)
        assert names(sent_up) == ["ctx_recall"]
        upstream = str(proxy.settings.upstreams["fake"].base_url) + "/chat/completions"
        async with http.post(upstream, json=sent_up) as response:
            assert await response.read() == through


async def test_a_streamed_client_tool_call_reaches_the_client_when_the_tool_was_offered(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy()
    proxy.fake.script.append(Reply(lead="Running. ", tool_calls=[tool_call("b1", cmd="ls")]))
    answer = await ask(proxy, stream=True, tools=[BASH])
    assert answer.content == "Running. " and answer.finish_reasons == ["tool_calls"]
    assert answer.tool_calls == [{"id": "b1", "name": "bash", "arguments": '{"cmd": "ls"}'}]
    assert len(sent(proxy)) == 1
