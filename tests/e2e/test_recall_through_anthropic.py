"""The recall loop with an Anthropic upstream (`kind = "anthropic"`): the tool, the model's
`tool_use` of it and the proxy's `tool_result` go through the translation, streamed and not, and
the fake Messages API checks every round the way the real one does."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import MakeAnthropicProxy
from tests.e2e.test_recall_through_proxy import BASH, LOG, history, streamed
from tests.fakes.anthropic_upstream import Reply, text, tool_use

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-5"


def result_text(block: JSON) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def echoing(**arguments: Any) -> Any:
    """A model that calls the recall tool, then answers with the result it was given."""

    def respond(body: JSON) -> Reply:
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if last["role"] == "user" and results and results[-1]["tool_use_id"] == "toolu_r1":
            return text(f"Recalled:\n{result_text(results[-1])}")
        return tool_use(("toolu_r1", "ctx_recall", arguments), lead="Checking. ")

    return respond


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_recall_by_ref_goes_through_the_translation_and_never_reaches_the_client(
    make_anthropic_proxy: MakeAnthropicProxy, stream: bool
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.respond = echoing(ref="call_1")
    async with proxy.client() as client:
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model=MODEL, messages=history(), tools=[BASH], stream=True,
                stream_options={"include_usage": True})]  # fmt: skip
            answer = streamed(chunks)
            content, calls, finish, usage = (
                answer.content,
                answer.tool_calls,
                answer.finish_reasons,
                answer.usage,
            )
        else:
            done = await client.chat.completions.create(
                model=MODEL, messages=history(), tools=[BASH]
            )
            message = done.choices[0].message
            content, calls = message.content, message.tool_calls or []
            finish = [done.choices[0].finish_reason]
            usage = done.usage.model_dump() if done.usage else None
    assert content == f"Checking. Recalled:\n{LOG}"
    assert calls == [] and finish == ["stop"]
    first, second = (r.body for r in proxy.fake.received)
    assert [t["name"] for t in first["tools"]] == ["bash", "ctx_recall"]
    assert second["tools"] == first["tools"]
    assistant, results = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    used = {"type": "tool_use", "id": "toolu_r1", "name": "ctx_recall", "input": {"ref": "call_1"}}
    assert assistant["content"][1] == used
    assert results["content"][0]["tool_use_id"] == "toolu_r1"
    assert result_text(results["content"][0]) == LOG
    assert usage is not None and usage["prompt_tokens"] == 24 and usage["completion_tokens"] == 10


def always_recalling(body: JSON) -> Reply:
    """A model that calls the recall tool whenever it may; with `tool_choice` none it answers."""
    step = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if body.get("tool_choice") == {"type": "none"}:
        return text(f"step {step}: done.")
    return tool_use((f"toolu_r{step}", "ctx_recall", {"query": "ok"}), lead=f"step {step}. ")


@pytest.mark.parametrize("tools", [[], [BASH]], ids=["recall-only", "client-tool"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_max_rounds_keeps_the_tool_defined_and_forbids_its_use_in_the_last_round(
    make_anthropic_proxy: MakeAnthropicProxy, stream: bool, tools: list[JSON]
) -> None:
    """The last round's history holds `tool_use` blocks of the recall tool: the API refuses them
    without the tools defined, so the tool stays (the same bytes) and `tool_choice` is none."""
    proxy = await make_anthropic_proxy(tenant_extra="[tenants.default.recall]\nmax_rounds = 2\n")
    proxy.fake.respond = always_recalling
    extra: JSON = {"tools": tools} if tools else {}
    async with proxy.client() as client:
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model=MODEL, messages=history(), stream=True, **extra)]  # fmt: skip
            content, finish = streamed(chunks).content, streamed(chunks).finish_reasons
        else:
            done = await client.chat.completions.create(model=MODEL, messages=history(), **extra)
            content, finish = done.choices[0].message.content, [done.choices[0].finish_reason]
    assert content == "step 3. step 4. step 5: done." and finish == ["stop"]
    bodies = [r.body for r in proxy.fake.received]
    assert len(bodies) == 3
    assert bodies[2]["tools"] == bodies[1]["tools"] == bodies[0]["tools"]
    assert [t["name"] for t in bodies[0]["tools"]] == [*(["bash"] if tools else []), "ctx_recall"]
    assert [b.get("tool_choice") for b in bodies] == [None, None, {"type": "none"}]
