"""The official openai SDK's Responses API (`responses.create`, `responses.stream`, function
tools, `previous_response_id`, `responses.compact`) through ctxproxy, in front of each upstream
kind: the answers are the SDK's own types, and every request that reached an upstream is one it
accepts."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest

from proxy.inbound.compaction_handle import PREFIX
from proxy.server.appkeys import STORE
from tests.e2e.agent import settled
from tests.e2e.conftest import MakeAnthropicProxy
from tests.e2e.responses_upstreams import KINDS, Upstream, make_upstream
from tests.fakes.openai_upstream import Reply
from tests.inbound.responses_builders import events_of
from tests.server.conftest import MakeProxy
from tests.server.observe.test_metrics import scrape, value

JSON = dict[str, Any]
MODEL = "gpt-5"
WEATHER = {
    "type": "function",
    "name": "weather",
    "description": "The weather in a city.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(params=KINDS)
async def upstream(
    request: pytest.FixtureRequest, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy
) -> Upstream:
    return await make_upstream(request.param, make_proxy, make_anthropic_proxy)


def assert_all_valid(upstream: Upstream) -> None:
    for n, body in enumerate(upstream.requests):
        assert upstream.problem(body) is None, f"upstream request {n}"


async def test_create_answers_with_a_response_and_bootstraps_the_instructions(
    upstream: Upstream,
) -> None:
    upstream.say("Hi Maya.")
    async with upstream.client() as client:
        response = await client.responses.create(
            model=MODEL, input="hello", instructions="Answer in one line."
        )
    assert response.output_text == "Hi Maya." and response.status == "completed"
    assert response.usage is not None and response.usage.input_tokens > 0
    # the client's instructions echoed; a Responses upstream's answer is relayed as it came,
    # echoing what it was sent: the bootstrap, then the client's
    assert str(response.instructions).endswith("Answer in one line.") or (
        "Answer in one line.\n\n<user_profile>" in str(response.instructions)
    )
    sent = upstream.text_sent(upstream.requests[-1])
    assert "Wren" in sent and "Answer in one line." in sent  # bootstrap, then the client's
    assert_all_valid(upstream)


async def test_a_stream_sends_the_responses_events_and_usage_on_completion(
    upstream: Upstream,
) -> None:
    upstream.say("A streamed answer, in pieces.")
    async with (
        upstream.client() as client,
        client.responses.stream(model=MODEL, input="stream please") as stream,
    ):
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert {"response.output_item.added", "response.output_text.delta"} <= set(kinds)
    assert kinds[-1] == "response.completed"
    assert final.output_text == "A streamed answer, in pieces."
    assert final.usage is not None and final.usage.input_tokens > 0
    assert_all_valid(upstream)


async def test_function_tools_and_a_continuation_by_previous_response_id(
    upstream: Upstream,
) -> None:
    upstream.call(
        ("call_1", "weather", {"city": "Lisbon"}), ("call_2", "weather", {"city": "Oslo"})
    )
    upstream.say("Sunny in Lisbon, snow in Oslo.")
    async with upstream.client() as client:
        first = await client.responses.create(model=MODEL, input="weather?", tools=[WEATHER])
        calls = [item for item in first.output if item.type == "function_call"]
        assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
            ("call_1", "weather", {"city": "Lisbon"}), ("call_2", "weather", {"city": "Oslo"})
        ]  # fmt: skip
        await settled(upstream.proxy.app)
        outputs = [
            {"type": "function_call_output", "call_id": c.call_id, "output": f"{c.call_id}: ok"}
            for c in calls
        ]
        second = await client.responses.create(
            model=MODEL, input=outputs, tools=[WEATHER], previous_response_id=first.id
        )
    assert second.output_text == "Sunny in Lisbon, snow in Oslo."
    if upstream.kind != "responses":  # a Responses upstream's answer is relayed as it came
        assert second.previous_response_id == first.id
    sent = upstream.requests[-1]
    assert "previous_response_id" not in sent  # expanded by the proxy, whatever the upstream
    text = upstream.text_sent(sent)
    assert "weather?" in text and "call_2: ok" in text
    assert_all_valid(upstream)


async def test_an_unknown_previous_response_id_is_a_clear_400_unless_the_upstream_can_know_it(
    upstream: Upstream,
) -> None:
    async with upstream.client() as client:
        if upstream.kind != "responses":
            with pytest.raises(openai.BadRequestError) as refused:
                await client.responses.create(
                    model=MODEL, input="go on", previous_response_id="resp_elsewhere"
                )
            assert refused.value.code == "previous_response_not_found"
            assert "resp_elsewhere" in refused.value.message and not upstream.requests
            return
        with pytest.raises(openai.BadRequestError):  # the fake upstream does not know it either
            await client.responses.create(
                model=MODEL, input="go on", previous_response_id="resp_elsewhere"
            )
    assert upstream.requests[-1]["previous_response_id"] == "resp_elsewhere"


async def test_compact_returns_one_item_that_later_requests_expand_to_the_summary(
    upstream: Upstream,
) -> None:
    history: list[Any] = [
        {"role": "user", "content": "Our deploy port is 8421."},
        {"role": "assistant", "content": "Noted: 8421."},
    ]
    upstream.summarizes()
    upstream.say("Still 8421.")
    async with upstream.client() as client:
        compacted = await client.responses.compact(model=MODEL, input=history)
        assert [item.type for item in compacted.output] == ["compaction"]
        item = compacted.output[0].model_dump(exclude_none=True)
        assert item["encrypted_content"].startswith(PREFIX)
        later = [item, {"role": "user", "content": "Which port?"}]
        answer = await client.responses.create(model=MODEL, input=later)
        assert answer.output_text == "Still 8421."
        sent = upstream.text_sent(upstream.requests[-1])
        assert "SUMMARY OF EARLIER TURNS" in sent and PREFIX not in sent
        payload, signature = item["encrypted_content"].rsplit(".", 1)
        flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
        tampered = {**item, "encrypted_content": f"{payload}.{flipped}"}
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(model=MODEL, input=[tampered, later[1]])
    assert refused.value.code == "invalid_encrypted_content"
    assert "forged or tampered" in refused.value.message
    assert len(upstream.requests) == 1
    assert_all_valid(upstream)


async def compaction_events(upstream: Upstream) -> list[JSON]:
    await settled(upstream.proxy.app)
    found = await upstream.proxy.app[STORE].read_events("0-0", block_ms=0, count=100)
    return [fields for _, fields in found if fields["kind"] == "compaction"]


async def test_a_compaction_reports_the_summarizers_usage_and_is_counted_like_others(
    upstream: Upstream,
) -> None:
    history: list[Any] = [
        {"role": "user", "content": "Our deploy port is 8421."},
        {"role": "assistant", "content": "Noted: 8421."},
    ]
    upstream.summarizes()
    async with upstream.client() as client:
        compacted = await client.responses.compact(model=MODEL, input=history)
    usage = compacted.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    [event] = await compaction_events(upstream)
    assert (event["outcome"], event["reason"], event["client"]) == ("done", "compacted", "compact")
    assert event["summary_prompt_tokens"] == str(usage.input_tokens)
    assert event["summary_completion_tokens"] == str(usage.output_tokens)
    samples = await scrape(upstream.proxy)  # type: ignore[arg-type]
    done = {"tenant": "default", "outcome": "done", "reason": "compacted"}
    assert value(samples, "ctxproxy_compactions_total", **done) == 1


async def test_a_failed_compaction_is_a_502_counted_by_its_reason(make_proxy: MakeProxy) -> None:
    upstream = await make_upstream("chat", make_proxy, None)  # type: ignore[arg-type]
    upstream._openai.summary_status = 500
    async with upstream.client() as client:
        with pytest.raises(openai.APIStatusError) as failed:
            await client.responses.compact(model=MODEL, input="Our deploy port is 8421.")
    assert failed.value.status_code == 502
    [event] = await compaction_events(upstream)
    assert (event["outcome"], event["reason"]) == ("failed", "summarizer")
    samples = await scrape(upstream.proxy)  # type: ignore[arg-type]
    labels = {"tenant": "default", "outcome": "failed", "reason": "summarizer"}
    assert value(samples, "ctxproxy_compactions_total", **labels) == 1
    assert value(samples, "ctxproxy_summarizer_failures_total", tenant="default",
                 reason="summarizer") == 1  # fmt: skip


async def test_a_compaction_trigger_reports_the_summarizers_usage_on_completion(
    upstream: Upstream,
) -> None:
    upstream.summarizes()
    body = {
        "model": MODEL,
        "stream": True,
        "input": [
            {"role": "user", "content": "Our deploy port is 8421."},
            {"role": "assistant", "content": "Noted: 8421."},
            {"type": "compaction_trigger"},
        ],
    }
    url = upstream.proxy.server.make_url("/v1/responses")
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json=body, headers={"Authorization": "Bearer sk-client"}) as answer,
    ):
        events = events_of(await answer.read())
    assert events[-1]["type"] == "response.completed"
    usage = events[-1]["response"]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    [event] = await compaction_events(upstream)
    assert event["client"] == "trigger"
    assert event["summary_prompt_tokens"] == str(usage["input_tokens"])


async def test_an_upstream_that_speaks_only_the_responses_api_summarizes_through_it(
    make_proxy: MakeProxy,
) -> None:
    upstream = await make_upstream("responses", make_proxy, None)  # type: ignore[arg-type]
    upstream._openai.serves_chat = False
    upstream.say("Still 8421.")
    history: list[Any] = [
        {"role": "user", "content": "Our deploy port is 8421."},
        {"role": "assistant", "content": "Noted: 8421."},
    ]
    async with upstream.client() as client:
        compacted = await client.responses.compact(model=MODEL, input=history)
        item = compacted.output[0].model_dump(exclude_none=True)
        answer = await client.responses.create(
            model=MODEL, input=[item, {"role": "user", "content": "Which port?"}]
        )
    assert compacted.usage.input_tokens > 0 and answer.output_text == "Still 8421."
    assert "SUMMARY OF EARLIER TURNS" in upstream.text_sent(upstream.requests[-1])
    assert {r.path for r in upstream._openai.received} == {"/v1/responses"}
    assert len(upstream._openai.summary_requests) == 1 and len(upstream.requests) == 1
    assert_all_valid(upstream)


async def test_report_usage_client_scales_input_tokens_to_the_full_history(
    make_proxy: MakeProxy,
) -> None:
    results = {}
    for policy in ("upstream", "client"):
        proxy = await make_proxy(
            workspace=False,
            upstream_extra='api = "responses"',
            tenant_extra=f'report_usage = "{policy}"\n',
        )
        items: list[JSON] = [{"role": "user", "content": "read the logs"}]
        for n in range(4):  # old tool results are pruned: the upstream sees less than was sent
            items.append(
                {"type": "function_call", "call_id": f"c{n}", "name": "cat", "arguments": "{}"}
            )
            items.append({"type": "function_call_output", "call_id": f"c{n}", "output": "x" * 4000})
        async with proxy.client() as client:
            response = await client.responses.create(model=MODEL, input=items)
        upstream = proxy.fake.received[-1].body
        results[policy] = (response.usage, upstream)
    upstream_usage, client_usage = results["upstream"][0], results["client"][0]
    assert upstream_usage is not None and client_usage is not None
    assert client_usage.input_tokens > upstream_usage.input_tokens * 1.3
    assert client_usage.output_tokens == upstream_usage.output_tokens


async def test_a_stream_the_upstream_cuts_ends_with_response_failed(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(workspace=False)
    proxy.fake.script.append(Reply(content="a long answer cut short", chunks=4, cut_after=2))
    body = {"model": MODEL, "input": "hello", "stream": True}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            proxy.server.make_url("/v1/responses"),
            json=body,
            headers={"Authorization": "Bearer k", "X-Ctx-Session": "cut-1"},
        ) as answer,
    ):
        raw = await answer.read()
    events = events_of(raw)
    assert answer.status == 200
    assert "response.output_text.delta" in [e["type"] for e in events]
    assert events[-1]["type"] == "response.failed"
    assert "cut" in events[-1]["response"]["error"]["message"]
    await settled(proxy.app)
    state = await proxy.app[STORE].load("default", "cut-1")
    assert state.int_field("requests") == 1  # recorded, without usage: the answer never completed
    assert state.int_field("last_prompt_tokens") == 0
