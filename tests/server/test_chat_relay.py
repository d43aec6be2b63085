"""End to end: the official openai SDK → ctxproxy → a fake OpenAI-compatible upstream."""

from __future__ import annotations

import asyncio

import openai
import pytest

from proxy.identity import derived_session_id
from tests.fakes.openai_upstream import Reply
from tests.server.harness import Proxy

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


async def test_non_streaming_answer_and_unknown_fields_pass_through(proxy: Proxy) -> None:
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            tools=TOOLS,
            tool_choice="auto",
            extra_body={"vendor_knob": {"x": 1}},
        )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from the fake upstream."
    sent = proxy.fake.chat[-1].body
    assert sent["vendor_knob"] == {"x": 1}
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto"
    assert raw.headers["x-ctx-session"]
    assert sent["messages"][-1] == {"role": "user", "content": "hi"}


async def test_sync_client_works_too(proxy: Proxy) -> None:
    def call() -> str | None:
        with proxy.sync_client() as client:
            done = client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
            return done.choices[0].message.content

    assert await asyncio.to_thread(call) == "Hello from the fake upstream."


async def test_bootstrap_reaches_the_upstream_as_one_leading_system_message(proxy: Proxy) -> None:
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "system", "content": "CLIENT RULES"},
                {"role": "user", "content": "hi"},
            ],
        )
    messages = proxy.fake.chat[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert system.index("<soul>") < system.index("CLIENT RULES") < system.index("<user_profile>")


async def test_stream_relays_chunks_and_hides_the_usage_chunk_it_added(proxy: Proxy) -> None:
    proxy.fake.default = Reply(content="abcdefghij", chunks=5, prompt_tokens=1234)
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "abcdefghij"
    assert all(c.choices for c in chunks), "the usage chunk the proxy asked for leaked"
    assert proxy.fake.chat[-1].body["stream_options"] == {"include_usage": True}
    await _settled(proxy)
    rows = await _sessions(proxy)
    assert rows[0]["last_prompt_tokens"] == "1234"


@pytest.mark.parametrize("choices_null", [False, True])
async def test_stream_keeps_the_usage_chunk_the_client_asked_for(
    proxy: Proxy, choices_null: bool
) -> None:
    proxy.fake.default = Reply(prompt_tokens=99, usage_choices_null=choices_null)
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 99


async def test_upstream_error_passes_through_with_status_body_and_retry_after(proxy: Proxy) -> None:
    error = {
        "message": "Rate limit reached",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    proxy.fake.script.append(
        Reply(
            status=429,
            error=error,
            headers={"Retry-After": "7", "x-ratelimit-remaining-requests": "0"},
        )
    )
    async with proxy.client() as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert caught.value.body == error
    assert len(proxy.fake.chat) == 1


async def test_stream_cut_by_the_upstream_makes_the_sdk_raise(proxy: Proxy) -> None:
    proxy.fake.default = Reply(content="abcdef", chunks=3, cut_after=1, half_event=True)
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        got: list[str] = []
        with pytest.raises(openai.APIError):
            async for chunk in stream:
                got.append(chunk.choices[0].delta.content or "")
    assert "".join(got) == "ab"
    await _settled(proxy)
    assert "last_prompt_tokens" not in (await _sessions(proxy))[0]


async def test_upstream_credential_is_the_clients_bearer_by_default(proxy: Proxy) -> None:
    async with proxy.client(api_key="sk-client-own") as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert proxy.fake.chat[-1].headers["Authorization"] == "Bearer sk-client-own"


async def test_other_v1_paths_pass_through(proxy: Proxy) -> None:
    async with proxy.client() as client:
        models = await client.models.list()
        embedding = await client.embeddings.create(model="e", input="hello")
    assert [m.id for m in models.data] == ["fake-model"]
    assert embedding.data[0].embedding == [0.1, 0.2]
    assert (
        proxy.fake.received[-1].body
        == {"model": "e", "input": "hello", "encoding_format": "base64"}
        or proxy.fake.received[-1].body["input"] == "hello"
    )


async def _settled(proxy: Proxy) -> None:
    from proxy.server.appkeys import LIFECYCLE

    tasks = list(proxy.app[LIFECYCLE].tasks)
    await asyncio.gather(*tasks)


async def _sessions(proxy: Proxy) -> list[dict[str, str]]:
    from proxy.server.appkeys import STORE

    return await proxy.app[STORE].list_sessions("default", limit=10)


async def test_a_session_without_a_named_id_gets_the_derived_one_every_turn(proxy: Proxy) -> None:
    rules = {"role": "system", "content": "Project rules. " * 200}
    first = {"role": "user", "content": "Fix the parser."}
    turns = [
        [rules, first],
        [
            rules,
            first,
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Now the tests."},
        ],
    ]
    seen = []
    async with proxy.client() as client:
        for messages in turns * 2:
            raw = await client.chat.completions.with_raw_response.create(
                model="m",
                messages=messages,  # type: ignore[arg-type]
            )
            seen.append(raw.headers["x-ctx-session"])
        other = await client.chat.completions.with_raw_response.create(
            model="m", messages=[rules, {"role": "user", "content": "Another task."}]
        )
    assert set(seen) == {derived_session_id("default", [rules], [first])}
    assert other.headers["x-ctx-session"] != seen[0]
