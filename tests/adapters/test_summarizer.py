"""Summarizer adapters against real in-process servers speaking the providers' wire formats."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anthropic
import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.summarizer import (
    AnthropicSummarizer,
    OpenAIResponsesSummarizer,
    OpenAISummarizer,
)
from proxy.compaction.compactor import Compactor
from proxy.compaction.plan import SUMMARY_PREFIX
from proxy.compaction.policy import CompactSettings
from proxy.compaction.prompt import build_summary_body
from proxy.content import body_with_messages
from tests.factories import assistant, compaction_job, draft, exchange, system, user
from tests.fakes.anthropic_upstream import FakeAnthropic, text
from tests.fakes.openai_upstream import FakeOpenAI as FakeUpstream

JSON = dict[str, Any]
ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


class FakeOpenAI:
    """`POST /v1/chat/completions`, non-streaming, recording every request."""

    def __init__(self, *, answer: str = "<analysis>x</analysis><summary>S</summary>") -> None:
        self.answer = answer
        self.status = 200
        self.delay_s = 0.0
        self.received: list[tuple[JSON, dict[str, str]]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.received.append((body, dict(request.headers)))
        await asyncio.sleep(self.delay_s)
        if self.status != 200:
            error = {"message": "boom", "type": "server_error", "param": None, "code": None}
            return web.json_response({"error": error}, status=self.status)
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.answer},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI()


@pytest.fixture
async def summarizer(
    fake: FakeOpenAI, aiohttp_server: ServerFactory
) -> AsyncIterator[OpenAISummarizer]:
    server = await aiohttp_server(fake.app())
    adapter = OpenAISummarizer(
        base_url=str(server.make_url("/v1")), api_key="sk-configured", timeout_s=2.0
    )
    yield adapter
    await adapter.close()


def summary_body() -> JSON:
    prefix = {
        "model": "gpt-4o",
        "messages": [system("sys"), user("the bucket is s3://acme-logs"), assistant("noted")],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
    }
    return build_summary_body(prefix, settings=CompactSettings(), model="gpt-4o")


async def test_openai_summarizer_sends_the_body_and_returns_the_text_and_usage(
    fake: FakeOpenAI, summarizer: OpenAISummarizer
) -> None:
    body = summary_body()
    answer = await summarizer.complete(body, api_key=None)
    assert answer.text == fake.answer
    assert answer.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    [(sent, headers)] = fake.received
    assert sent["messages"] == body["messages"] and sent["tools"] == body["tools"]
    assert sent["tool_choice"] == "none" and sent["max_tokens"] == body["max_tokens"]
    assert not sent.get("stream") and headers["Authorization"] == "Bearer sk-configured"


async def test_openai_summarizer_forwards_the_clients_key(
    fake: FakeOpenAI, summarizer: OpenAISummarizer
) -> None:
    await summarizer.complete(summary_body(), api_key="sk-client")
    assert fake.received[0][1]["Authorization"] == "Bearer sk-client"


async def test_openai_summarizer_raises_on_an_error_without_retrying(
    fake: FakeOpenAI, summarizer: OpenAISummarizer
) -> None:
    fake.status = 500
    with pytest.raises(openai.APIStatusError):
        await summarizer.complete(summary_body(), api_key=None)
    assert len(fake.received) == 1


async def test_openai_summarizer_times_out(fake: FakeOpenAI, aiohttp_server: ServerFactory) -> None:
    fake.delay_s = 2.0
    server = await aiohttp_server(fake.app())
    adapter = OpenAISummarizer(base_url=str(server.make_url("/v1")), api_key="k", timeout_s=0.1)
    with pytest.raises(openai.APITimeoutError):
        await adapter.complete(summary_body(), api_key=None)
    await adapter.close()


async def test_compaction_end_to_end_through_the_openai_summarizer(
    fake: FakeOpenAI, summarizer: OpenAISummarizer
) -> None:
    history = [user("my name is Grace, ticket INC-0042")]
    for i in range(3):
        history += [user(f"q{i}"), *exchange(f"c{i}", f"r{i}"), assistant(f"a{i}")]
    compactor = Compactor(store=MemoryStore(), summarizers={"openai": summarizer})
    job = compaction_job(
        draft([system("sys"), *history]), settings=CompactSettings(), tenant="t", session="s",
        upstream="openai",
        prefix_body_for=lambda ms: body_with_messages({"model": "gpt-4o"}, [system("sys"), *ms]),
    )  # fmt: skip
    outcome = await compactor.run(job)
    assert outcome.status == "done"
    assert outcome.messages[:2] == (history[0], user(SUMMARY_PREFIX + "S"))  # the task stays
    assert "INC-0042" in json.dumps(fake.received[0][0]["messages"])


async def test_responses_summarizer_needs_only_the_responses_api(
    aiohttp_server: ServerFactory,
) -> None:
    fake = FakeUpstream()
    fake.serves_chat = False  # a server that speaks only /responses
    server = await aiohttp_server(fake.app())
    adapter = OpenAIResponsesSummarizer(
        base_url=str(server.make_url("/v1")), api_key="sk-configured", timeout_s=2.0
    )
    body = summary_body()
    answer = await adapter.complete(body, api_key="sk-client")
    await adapter.close()
    assert answer.text == fake.summary_text
    assert answer.usage is not None and answer.usage["prompt_tokens"] > 0
    assert answer.usage["completion_tokens"] == 7
    [received] = fake.summary_requests
    sent = received.body
    assert (
        received.path == "/v1/responses" and received.headers["Authorization"] == "Bearer sk-client"
    )
    assert sent["instructions"] == "sys" and sent["store"] is False and not sent.get("stream")
    assert sent["tool_choice"] == "none" and sent["tools"][0]["name"] == "bash"
    assert sent["input"][0]["content"][0]["text"] == "the bucket is s3://acme-logs"
    assert sent["input"][-1]["content"][0]["text"] == body["messages"][-1]["content"]
    assert sent["max_output_tokens"] == body.get("max_tokens", body.get("max_completion_tokens"))


async def test_anthropic_summarizer_translates_and_returns_the_text_and_usage(
    aiohttp_server: ServerFactory,
) -> None:
    fake = FakeAnthropic(api_key="sk-ant-client")
    fake.script(text("<summary>S</summary>"))
    server = await aiohttp_server(fake.app())
    adapter = AnthropicSummarizer(
        base_url=str(server.make_url("")), api_key="sk-ant-configured", timeout_s=2.0
    )
    body = {**summary_body(), "model": "claude-sonnet-4-5"}
    answer = await adapter.complete(body, api_key="sk-ant-client")
    assert answer.text == "<summary>S</summary>"
    assert answer.usage is not None  # the fake's 12 in, 5 out, as chat-completions usage
    assert (answer.usage["prompt_tokens"], answer.usage["completion_tokens"]) == (12, 5)
    [received] = fake.received
    assert received.headers["x-api-key"] == "sk-ant-client"
    assert received.body["system"][0]["text"] == "sys"
    assert received.body["tool_choice"] == {"type": "none"}
    assert received.body["max_tokens"] == body["max_tokens"] and not received.body.get("stream")
    await adapter.close()


async def test_summarizers_send_the_loop_marker(
    fake: FakeOpenAI, aiohttp_server: ServerFactory
) -> None:
    server = await aiohttp_server(fake.app())
    adapter = OpenAISummarizer(base_url=str(server.make_url("/v1")), api_key="k", via="inst1")
    await adapter.complete(summary_body(), api_key=None)
    await adapter.close()
    anthropic_fake = FakeAnthropic(api_key="k")
    anthropic_fake.script(text("<summary>S</summary>"))
    anthropic_server = await aiohttp_server(anthropic_fake.app())
    other = AnthropicSummarizer(base_url=str(anthropic_server.make_url("")), api_key="k", via="i2")
    await other.complete({**summary_body(), "model": "claude-sonnet-4-5"}, api_key=None)
    await other.close()
    assert {k.lower(): v for k, v in fake.received[0][1].items()}["x-ctx-via"] == "inst1"
    assert anthropic_fake.received[0].headers["x-ctx-via"] == "i2"


async def _set_cookie(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Set-Cookie"] = "affinity=first-tenant; Path=/"


async def test_summarizers_never_send_back_a_cookie_an_upstream_set(
    aiohttp_server: ServerFactory,
) -> None:
    """One summarizer client serves every tenant of an upstream: a cookie set in one tenant's
    summary must not ride along on the next. A named host: cookie jars ignore IP hosts."""
    openai_fake, anthropic_fake = FakeOpenAI(), FakeAnthropic(api_key="k")
    anthropic_fake.script(text("<summary>S</summary>"), text("<summary>S</summary>"))
    apps = openai_fake.app(), anthropic_fake.app()
    for app in apps:
        app.on_response_prepare.append(_set_cookie)
    openai_port, anthropic_port = [(await aiohttp_server(app)).port for app in apps]
    adapters = (
        OpenAISummarizer(base_url=f"http://localhost:{openai_port}/v1", api_key="k"),
        AnthropicSummarizer(base_url=f"http://localhost:{anthropic_port}", api_key="k"),
    )
    for adapter in adapters:
        for _ in range(2):
            await adapter.complete({**summary_body(), "model": "m"}, api_key=None)
        await adapter.close()
    sent = [h for _, h in openai_fake.received] + [r.headers for r in anthropic_fake.received]
    assert len(sent) == 4
    assert [h.get("Cookie", h.get("cookie")) for h in sent] == [None] * 4


async def test_anthropic_summarizer_raises_on_a_rejected_key(
    aiohttp_server: ServerFactory,
) -> None:
    server = await aiohttp_server(FakeAnthropic(api_key="right").app())
    adapter = AnthropicSummarizer(base_url=str(server.make_url("")), api_key="wrong")
    with pytest.raises(anthropic.AuthenticationError):
        await adapter.complete(summary_body(), api_key=None)
    await adapter.close()


def fresh_python(script: str) -> str:
    """What `script` prints in a new interpreter (no SDK imported yet)."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


def test_serving_does_not_load_the_sdks_until_a_summary_is_asked_for() -> None:
    """The SDKs weigh ~90 MiB and thousands of modules; most requests never compact."""
    script = (
        "import sys\n"
        "from proxy.adapters.summarizer import AnthropicSummarizer, OpenAISummarizer\n"
        "from proxy.adapters.summarizer import OpenAIResponsesSummarizer\n"
        "import proxy.cli.main, proxy.server.app\n"
        "OpenAISummarizer(base_url='http://127.0.0.1:9/v1', api_key='k')\n"
        "AnthropicSummarizer(base_url='http://127.0.0.1:9', api_key='k')\n"
        "OpenAIResponsesSummarizer(base_url='http://127.0.0.1:9/v1', api_key='k')\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'pydantic') if m in sys.modules))\n"
    )
    assert fresh_python(script).strip() == "[]"
    summarizer = OpenAISummarizer(base_url="http://127.0.0.1:9/v1", api_key="k")
    assert isinstance(summarizer.client(), openai.AsyncOpenAI)  # built when first needed


def test_the_first_summary_imports_its_sdk_without_stalling_the_event_loop() -> None:
    """The import takes about a second; the loop must keep turning meanwhile (a fresh
    interpreter, so the SDK is not loaded yet)."""
    script = (
        "import asyncio, sys, time\n"
        "from proxy.adapters.summarizer import AnthropicSummarizer\n"
        "async def main():\n"
        "    gaps, done = [], asyncio.Event()\n"
        "    async def tick():\n"
        "        last = time.perf_counter()\n"
        "        while not done.is_set():\n"
        "            await asyncio.sleep(0.005)\n"
        "            now = time.perf_counter(); gaps.append(now - last); last = now\n"
        "    ticker = asyncio.ensure_future(tick())\n"
        "    started = time.perf_counter()\n"
        "    try:\n"
        "        await AnthropicSummarizer(base_url='http://127.0.0.1:9', api_key='k', "
        "timeout_s=0.5).complete({'model': 'm', 'messages': [{'role': 'user', "
        "'content': 'x'}]}, api_key=None)\n"
        "    except Exception:\n"
        "        pass  # nothing listens on port 9: only the import matters here\n"
        "    took = time.perf_counter() - started\n"
        "    done.set(); await ticker\n"
        "    print(took, max(gaps), 'anthropic' in sys.modules)\n"
        "asyncio.run(main())\n"
    )
    out = fresh_python(script)
    took, longest_gap, loaded = out.split()
    assert loaded == "True"
    assert float(longest_gap) < float(took) / 3, out
