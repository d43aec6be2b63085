"""The task survives compaction (`keep_first_user`), twice, and what a summary stands for can be
recalled; a tenant never recalls another tenant's stored output. The openai SDK → ctxproxy → the
fake OpenAI upstream, which records every round and plays the summarizer."""

from __future__ import annotations

import hashlib
import re

from tests.e2e.agent import Agent, tool_call
from tests.e2e.test_recall_through_proxy import echoing
from tests.fakes.openai_upstream import Reply
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

COMPACT = "[tenants.default.compact]\nthreshold_tokens = 500\nkeep_recent = 2\n"
OTHER = f"""
[tenants.other]
keys = ["{hashlib.sha256(b"sk-other").hexdigest()}"]
workspace = "ws"
upstream = "fake"

[tenants.other.compact]
threshold_tokens = 500
keep_recent = 2
"""
TASK = (
    "TASK: port the billing module.\n"
    + "".join(f"rule {i:03d}: keep the public names stable.\n" for i in range(150))
    + "SECRET-RULE: submit with `echo COMPLETE`\n"
    + "".join(f"rule {i:03d}: write a test first.\n" for i in range(150, 300))
    + "Finish by running `submit`."
)
"""About 12,000 characters: over keep_first_user_max_chars (8,000), so kept head and tail."""
BIG = "".join(f"build {i:06d}: compiling unit\n" for i in range(2_500))
"""Over 50,000 characters: persisted by budgets, in the store under its tenant."""


def said(proxy: Proxy, text: str) -> None:
    """The next answer: long (so a summary saves enough), reporting a prompt over 500 tokens."""
    proxy.fake.script.append(Reply(content=text * 2_500, prompt_tokens=1_000))


async def test_the_task_survives_two_compactions_and_its_cut_middle_is_recalled(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False, tenant_extra=COMPACT)
    agent = Agent(proxy.client(default_headers={"X-Ctx-Session": "task"}), proxy.app)
    agent.add({"role": "user", "content": TASK})
    for question, letter in (("go on", "A"), ("more", "B"), ("q3", "C"), ("q4", "D")):
        said(proxy, letter)
        await agent.turn()
        agent.add({"role": "user", "content": question})
    assert len(proxy.fake.summary_requests) == 2
    first_summary, second = (r.body for r in proxy.fake.summary_requests)
    assert "tools" not in first_summary  # nothing was cut before it: never offered
    # the session's requests carry the tool since: the summarizer reuses their very prefix
    assert second["tools"] == proxy.fake.chat[2].body["tools"]
    assert second["tools"][-1]["function"]["name"] == "ctx_recall"
    assert [agent.header("X-Ctx-Compacted", i) for i in range(4)] == ["0", "0", "1", "1"]
    for request in proxy.fake.chat[2:4]:  # after the first compaction, after the second
        kept, summary = request.body["messages"][1:3]
        assert kept["role"] == "user" and len(kept["content"]) <= 8_000
        assert kept["content"].startswith("TASK: port the billing module.\n")
        assert kept["content"].endswith("Finish by running `submit`.")
        assert 'chars cut here; full text: ctx_recall(ref="turns:0-0")]' in kept["content"]
        assert summary["content"].startswith("[Conversation summary]\n")
    assert proxy.fake.chat[2].body["messages"][1] == proxy.fake.chat[3].body["messages"][1]
    second_summary = proxy.fake.chat[3].body["messages"][2]["content"]
    assert second_summary.endswith(
        '[Messages 0-4 are summarized above; full text: ctx_recall(ref="turns:0-4")]'
    )
    proxy.fake.respond = echoing(ref="turns:0-0")
    answer = await agent.turn()
    assert answer["content"] == f"Checking. Recalled:\n{TASK}"
    proxy.fake.respond = echoing(query="secret-rule")
    agent.add({"role": "user", "content": "and the secret rule?"})
    answer = await agent.turn()
    assert "SECRET-RULE: submit with `echo COMPLETE`" in answer["content"]


async def stored_output(proxy: Proxy) -> str:
    """Run a tenant-default request whose tool result budgets persist; the output's id."""
    agent = Agent(proxy.client(default_headers={"X-Ctx-Session": "build"}), proxy.app)
    agent.add({"role": "user", "content": "Build it."})
    proxy.fake.script.append(Reply(tool_calls=[tool_call("b1", cmd="make")], prompt_tokens=10))
    await agent.turn()
    agent.add({"role": "tool", "tool_call_id": "b1", "content": BIG})
    proxy.fake.script.append(Reply(content="Built.", prompt_tokens=10))
    await agent.turn()
    found = re.search(r'<persisted-output id="([0-9a-f]{32})"', str(proxy.fake.chat[-1].body))
    assert found is not None
    return found[1]


async def recall_after_a_summary_naming(proxy: Proxy, output: str, *, key: str) -> str:
    """A compacted conversation of the tenant of `key` whose summary names `output`; the model
    then recalls it: what the recall answered."""
    proxy.fake.summary_text = (
        f'<summary>The build log was read: ctx_recall(ref="{output}").</summary>'
    )
    client = proxy.client(api_key=key, default_headers={"X-Ctx-Session": f"s-{key}"})
    agent = Agent(client, proxy.app)
    agent.add({"role": "user", "content": "Look at the build."})
    for question, letter in (("more", "A"), ("what did the build log say?", "B")):
        said(proxy, letter)
        await agent.turn()
        agent.add({"role": "user", "content": question})
    proxy.fake.respond = echoing(ref=output)
    answer = await agent.turn()
    assert agent.header("X-Ctx-Compacted") == "1"
    return str(answer["content"])


async def test_a_tenant_never_recalls_another_tenants_stored_output(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(workspace=False, tenant_extra=COMPACT + OTHER)
    output = await stored_output(proxy)
    theirs = await recall_after_a_summary_naming(proxy, output, key="sk-other")
    assert f'The output ref="{output}" is no longer stored.' in theirs
    assert "build 000000" not in theirs
    own = await recall_after_a_summary_naming(proxy, output, key="sk-client")
    assert own.startswith(f"Checking. Recalled:\n{BIG[:10_000]}")
    assert f'the rest: ctx_recall(ref="{output}", offset=' in own
