"""`POST /v1/messages` in front of the fake Anthropic API, driven by the official `anthropic` SDK:
what no stage changes goes upstream as the client sent it, the answer (JSON or events) comes back
as the upstream sent it, and every mechanism acts on the Messages shape."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import anthropic
import pytest

from proxy.server.appkeys import STORE
from proxy.server.keys import digest
from tests.e2e.agent import settled
from tests.fakes.anthropic_upstream import (
    ErrorReply,
    Reply,
    overloaded,
    rate_limited,
    stream_events,
    text,
    tool_use,
)
from tests.inbound.builders import fixture, marker_count, tool_result, wire_problem
from tests.server.messages_support import (
    MODEL,
    MakeMessagesProxy,
    MessagesAgent,
    blocks_of,
    make_messages_proxy,
)

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

HELLO = [{"role": "user", "content": "hello"}]
THOUGHT = {"type": "thinking", "thinking": "Read the file first.", "signature": "c2lnLTE="}
READ_TOOL = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


async def test_the_sdk_gets_the_upstreams_answer_and_the_upstream_the_clients_body(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    proxy.fake.script(text("Hi there.", usage={"input_tokens": 30, "output_tokens": 4}))
    async with proxy.client() as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=HELLO, metadata={"user_id": "u-1"}
        )
    answer = await raw.parse()
    assert (answer.id, answer.content[0].text, answer.usage.input_tokens) == (  # type: ignore[union-attr]
        "msg_fake0001", "Hi there.", 30)  # fmt: skip
    assert raw.headers["x-ctx-session"] == "u-1" and raw.headers["request-id"] == "req_fake"
    assert proxy.sent == {"max_tokens": 100, "messages": HELLO, "metadata": {"user_id": "u-1"},
                          "model": MODEL}  # fmt: skip
    assert proxy.fake.received[-1].headers["x-api-key"] == "sk-ant-upstream"


async def test_the_sync_sdk_is_served_too(make_messages_proxy: MakeMessagesProxy) -> None:
    proxy = await make_messages_proxy()
    proxy.fake.script(text("From a thread."))

    def ask() -> Any:
        with proxy.sync_client() as client:
            return client.messages.create(model=MODEL, max_tokens=50, messages=HELLO)

    answer = await asyncio.to_thread(ask)
    assert answer.content[0].text == "From a thread."


async def test_a_stream_reaches_the_client_byte_for_byte(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    reply = Reply(content=(THOUGHT, {"type": "text", "text": "Streamed words."}))
    proxy.fake.script(reply)
    body = {"model": MODEL, "max_tokens": 2000, "messages": HELLO, "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 1024}}  # fmt: skip
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.base_url + "/v1/messages", json=body, headers={"x-api-key": "k"}) as got,
    ):
        relayed = await got.read()
    message = {"id": "msg_fake0001", "type": "message", "role": "assistant", "model": MODEL,
               "content": list(reply.content), "stop_reason": "end_turn", "stop_sequence": None,
               "usage": reply.usage}  # fmt: skip
    expected = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        for name, data in stream_events(message, reply)
    )
    assert relayed == expected
    assert got.headers["content-type"].startswith("text/event-stream")


async def test_the_sdks_stream_helper_rebuilds_thinking_with_its_signature(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}
    proxy.fake.script(
        Reply(
            content=(THOUGHT, {"type": "text", "text": "Reading."}, call), stop_reason="tool_use"
        ),
        Reply(content=(THOUGHT, {"type": "text", "text": "Done."})),
    )
    thinking = {"type": "enabled", "budget_tokens": 1024}
    async with proxy.client() as client:
        history: list[dict[str, Any]] = [{"role": "user", "content": "read a.py"}]
        async with client.messages.stream(
            model=MODEL, max_tokens=2000, messages=history, tools=[READ_TOOL], thinking=thinking
        ) as stream:
            first = await stream.get_final_message()
        assert first.content[0].type == "thinking"
        assert first.content[0].signature == THOUGHT["signature"]
        history.append({"role": "assistant", "content": blocks_of(first)})
        history.append({"role": "user", "content": [tool_result("toolu_1", "print('a')")]})
        second = await client.messages.create(
            model=MODEL, max_tokens=2000, messages=history, tools=[READ_TOOL], thinking=thinking
        )
    assert second.content[-1].text == "Done."  # type: ignore[union-attr]
    sent = proxy.sent
    assert sent["messages"] == history  # thinking, signature and tool use as the client sent
    assert sent["tools"] == [READ_TOOL] and sent["thinking"] == thinking


async def test_tool_use_comes_back_and_its_result_goes_up(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    proxy.fake.script(
        tool_use(("toolu_1", "Read", {"path": "a.py"}), ("toolu_2", "Read", {"path": "b.py"})),
        text("Both read."),
    )
    agent = MessagesAgent(proxy.client(), proxy.app)
    agent.add({"role": "user", "content": "read both"})
    first = await agent.turn(tools=[READ_TOOL])
    assert first.stop_reason == "tool_use"
    assert [b.id for b in first.content] == ["toolu_1", "toolu_2"]
    agent.add(
        {"role": "user", "content": [tool_result("toolu_1", "A"), tool_result("toolu_2", "B")]}
    )
    assert (await agent.turn(tools=[READ_TOOL])).content[0].text == "Both read."
    assert proxy.sent["messages"] == agent.history[:-1]


async def test_claude_codes_own_request_goes_upstream_as_sent_with_its_headers_and_query(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    recorded = fixture("main_turn_thinking")
    headers = {k: v for k, v in recorded["headers"].items() if k != "content-type"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.base_url + recorded["path"], json=recorded["body"], headers=headers) as got,
    ):
        assert got.status == 200, await got.text()
        await got.read()
    received = proxy.fake.received[-1]
    assert received.body == recorded["body"]  # context_management, metadata, markers: all as sent
    assert received.query == "beta=true"
    for name in ("anthropic-version", "anthropic-beta", "user-agent", "x-app"):
        assert received.headers[name] == headers[name]
    assert received.headers["x-api-key"] == "sk-ant-upstream"
    assert got.headers["x-ctx-session"] == headers["x-claude-code-session-id"]


async def test_upstream_errors_reach_the_sdk_as_they_came(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    proxy.fake.script(rate_limited("7"), overloaded())
    async with proxy.client() as client:
        with pytest.raises(anthropic.RateLimitError) as limited:
            await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
        with pytest.raises(anthropic.APIStatusError) as overload:
            await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert limited.value.response.headers["retry-after"] == "7"
    assert limited.value.body == {"type": "error", "request_id": "req_fake", "error": {
        "type": "rate_limit_error", "message": rate_limited().message}}  # fmt: skip
    assert overload.value.status_code == 529
    assert overload.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


async def test_the_proxys_own_errors_are_anthropic_shaped(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    keyed = f'keys = ["{digest("sk-proxy")}"]\n'
    proxy = await make_messages_proxy(tenant_extra=keyed, max_body_bytes=4000)
    async with proxy.client(api_key="sk-wrong") as client:
        with pytest.raises(anthropic.AuthenticationError) as denied:
            await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    refused = "Invalid or missing API key for this proxy."
    assert denied.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": refused},
    }
    async with proxy.client(api_key="sk-proxy") as client:
        with pytest.raises(anthropic.BadRequestError) as bad:
            await client.messages.create(
                model=MODEL,
                max_tokens=10,
                messages=[{"role": "system", "content": "x"}],  # type: ignore[list-item]
            )
        with pytest.raises(anthropic.APIStatusError) as large:
            big = [{"role": "user", "content": "x" * 5000}]
            await client.messages.create(model=MODEL, max_tokens=10, messages=big)  # type: ignore[arg-type]
    assert bad.value.body == {"type": "error", "error": {"type": "invalid_request_error",
        "message": "messages.0.role: Input should be 'user' or 'assistant'"}}  # fmt: skip
    assert large.value.status_code == 413
    assert large.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    assert proxy.fake.received == []


async def test_an_anthropic_clients_key_in_x_api_key_opens_the_other_routes_too(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(tenant_extra=f'keys = ["{digest("sk-proxy")}"]\n')
    async with aiohttp.ClientSession() as http:
        for key, status in (("sk-proxy", 200), ("sk-wrong", 401)):
            url = proxy.base_url + "/v1/models"
            async with http.get(url, headers={"x-api-key": key}) as got:
                assert got.status == status, await got.text()
    assert [r.path for r in proxy.fake.received] == ["/v1/models"]  # the wrong key stopped here
    assert proxy.fake.received[0].headers["x-api-key"] == "sk-ant-upstream"


@pytest.mark.parametrize("as_bearer", [False, True])
async def test_the_clients_key_goes_upstream_the_way_it_came(
    make_messages_proxy: MakeMessagesProxy, as_bearer: bool
) -> None:
    proxy = await make_messages_proxy(forward_client_key=True)
    key = proxy.fake.api_key = "sk-ant-oat01-login"  # an OAuth login's token, say
    sent = {"Authorization": f"Bearer {key}"} if as_bearer else {"x-api-key": key}
    body = {"model": MODEL, "max_tokens": 10, "messages": HELLO}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.base_url + "/v1/messages", json=body, headers=sent) as got,
    ):
        assert got.status == 200
    headers = proxy.fake.received[-1].headers
    assert {k: v for k, v in headers.items() if k in ("authorization", "x-api-key")} == {
        k.lower(): v for k, v in sent.items()
    }


async def test_claude_codes_session_id_names_the_session(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    user_id = json.dumps({"device_id": "d", "account_uuid": "", "session_id": "sess-7"})
    async with proxy.client() as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=HELLO, metadata={"user_id": user_id}
        )
        header = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=HELLO,
            extra_headers={"X-Claude-Code-Session-Id": "cc-1"},
        )  # fmt: skip
    assert raw.headers["x-ctx-session"] == "sess-7"
    assert header.headers["x-ctx-session"] == "cc-1"
    await settled(proxy.app)
    state = await proxy.app[STORE].load("default", "sess-7")
    assert state.int_field("requests") == 1 and state.int_field("last_prompt_tokens") == 12


async def test_bootstrap_goes_first_in_the_system_blocks_and_is_marked(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    low = "[tenants.default.cache]\nmin_cacheable_tokens = 100\n"
    proxy = await make_messages_proxy(workspace=True, tenant_extra=low)
    system = [{"type": "text", "text": "Client rules.", "cache_control": {"type": "ephemeral"}}]
    async with proxy.client() as client:
        await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO, system=system)  # type: ignore[arg-type]
    sent = proxy.sent["system"]
    assert sent[0]["text"].startswith("<soul>") and sent[0]["cache_control"] == {
        "type": "ephemeral"
    }
    assert sent[1] == system[0]
    assert sent[2]["text"].startswith("<user_profile>")
    assert wire_problem(proxy.sent) is None and marker_count(proxy.sent) <= 4


def long_session(results: int = 4, size: int = 3_000) -> list[dict[str, Any]]:
    """A history as Claude Code sends it: tool results, its marker on the newest turn."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look at the files."}]
    for n in range(results):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"path": f"{n}"}}
        messages.append({"role": "assistant", "content": [call]})
        messages.append({"role": "user", "content": [tool_result(f"toolu_{n}", f"{n}\n" * size)]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return messages


@pytest.mark.parametrize("stop", [False, True])
async def test_old_tool_results_are_pruned_behind_claude_codes_marker_unless_it_stops_pruning(
    make_messages_proxy: MakeMessagesProxy, stop: bool
) -> None:
    extra = "messages_markers_stop_pruning = true\n" if stop else ""
    proxy = await make_messages_proxy(tenant_extra=extra)
    history = long_session()
    async with proxy.client() as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=history, tools=[READ_TOOL]
        )
    sent = proxy.sent["messages"]
    results = [m["content"][0]["content"] for m in sent[2::2]]
    if stop:
        assert sent == history and raw.headers["x-ctx-pruned-chars"] == "0"
        return
    assert ["truncated, original" in r for r in results] == [True, True, False, False]
    assert int(raw.headers["x-ctx-pruned-chars"]) > 10_000
    assert sent[-1] == history[-1]  # the newest turn, its marker as the client set it
    assert marker_count(proxy.sent) == 1 and wire_problem(proxy.sent) is None


async def test_count_tokens_counts_the_prepared_request_upstream(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    history = long_session(results=6)
    async with proxy.client() as client:
        counted = await client.messages.count_tokens(model=MODEL, messages=history)  # type: ignore[arg-type]
    received = proxy.fake.received[-1]
    assert received.path == "/v1/messages/count_tokens"
    assert "max_tokens" not in received.body and "truncated, original" in received.raw.decode()
    unpruned = len(json.dumps({"system": None, "messages": history, "tools": None})) // 4
    assert 0 < counted.input_tokens < unpruned // 2


async def test_prompt_too_long_compacts_and_retries_once(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    # keep_first_user off: this test is about the summary standing for the covered turns
    proxy = await make_messages_proxy(
        tenant_extra="[tenants.default.compact]\nkeep_first_user = false\n"
    )
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    proxy.fake.script(
        ErrorReply(400, "invalid_request_error", too_long),
        text("<summary>Read four files.</summary>"),
        text("After the retry."),
    )
    history = [*long_session(), {"role": "assistant", "content": "Read."},
               {"role": "user", "content": "Go on."}]  # fmt: skip
    agent = MessagesAgent(proxy.client(), proxy.app, history=history)
    answer = await agent.turn()
    assert answer.content[0].text == "After the retry."
    retried = proxy.sent["messages"]
    summary = retried[0]["content"][0]["text"]  # its last line names the recall ref of the turns
    assert summary.startswith("[Conversation summary]\nRead four files.\n[Messages 0-")
    assert 'ctx_recall(ref="turns:0-' in summary
    assert retried[1:-1] == history[-5:-2]  # the kept turns as sent (the answer came after)
    assert retried[-1]["content"][0]["text"] == "Go on."  # with our marker, for the cache
    assert agent.header("X-Ctx-Compacted") == "1" and wire_problem(proxy.sent) is None
