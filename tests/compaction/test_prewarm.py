"""The prewarm request, built from a compaction's job (`proxy.compaction.prewarm`)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from proxy.compaction.job import CompactionJob, Sending
from proxy.compaction.policy import CompactSettings
from proxy.compaction.prewarm import client_request, messages_prewarm, prewarm_body, prewarm_skip
from proxy.types import JSON
from tests.factories import assistant, compaction_job, draft, system, user

SYSTEM = system("sys")
HISTORY = [user("a"), assistant("b"), user("c"), assistant("d"), user("e")]


def job_with_body(body: JSON | None) -> CompactionJob:
    """A compaction's job as the engine builds it, with the client's `body`."""
    job = compaction_job(draft([SYSTEM, *HISTORY]), settings=CompactSettings(keep_recent=2))
    return replace(job, client_body=body)


def test_the_client_request_is_its_body_with_system_and_history_as_sent() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    job = job_with_body({"model": "m", "tools": tools, "temperature": 0})
    body = client_request(job)
    assert body == {"model": "m", "tools": tools, "temperature": 0,
                    "messages": [SYSTEM, *job.client_history]}  # fmt: skip
    assert body["messages"][1] is job.client_history[0], "nothing copied"


def test_the_prewarm_body_asks_one_token_unstreamed_and_keeps_every_other_key() -> None:
    prepared = {
        "model": "m", "messages": [SYSTEM], "stream": True,
        "stream_options": {"include_usage": True}, "max_tokens": 900, "n": 2,
        "prompt_cache_key": "ctxproxy-0123", "tools": [], "temperature": 0.2,
    }  # fmt: skip
    before = copy.deepcopy(prepared)
    assert prewarm_body(prepared) == {
        "model": "m", "messages": [SYSTEM], "prompt_cache_key": "ctxproxy-0123", "tools": [],
        "temperature": 0.2, "max_completion_tokens": 1,
    }  # fmt: skip
    assert prepared == before
    assert prewarm_body({"messages": [], "max_completion_tokens": 50})["max_completion_tokens"] == 1


@pytest.mark.parametrize(
    ("style", "api", "body", "reason"),
    [
        ("anthropic", "chat", {"model": "m"}, ""),
        ("openai", "chat", {}, ""),
        ("none", "chat", {"model": "m"}, "no_cache"),
        ("openai", "responses", {"model": "m"}, "responses_api"),
        ("anthropic", "chat", None, "no_body"),
    ],
)
def test_a_prewarm_needs_a_prompt_cache_the_chat_api_and_the_clients_body(
    style: str, api: str, body: JSON | None, reason: str
) -> None:
    assert prewarm_skip(job_with_body(body), cache_style=style, api=api, kind="anthropic") == reason


def test_the_background_copy_of_a_job_copies_its_client_body() -> None:
    body = {"model": "m", "tools": [{"type": "function"}]}
    job = job_with_body(body)
    copied = job.detached()
    assert copied.client_body == body and copied.client_body is not body
    assert copied.client_body["tools"] is not body["tools"]


@pytest.mark.parametrize(
    ("body", "kind", "reason"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "anthropic", "thinking"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "openai", "thinking"),
        ({"thinking": {"type": "adaptive"}}, "anthropic", "thinking"),
        ({"thinking": {"type": "disabled"}}, "anthropic", ""),
        ({"reasoning_effort": "low"}, "anthropic", "thinking"),
        ({"reasoning_effort": "low"}, "openai", ""),
        ({"reasoning_effort": "none"}, "anthropic", ""),
    ],
)
def test_a_session_that_asks_for_thinking_gets_no_prewarm(
    body: JSON, kind: str, reason: str
) -> None:
    job = job_with_body(body)
    assert prewarm_skip(job, cache_style="anthropic", api="chat", kind=kind) == reason


def test_a_session_sent_with_another_credential_or_carried_thinking_gets_no_prewarm() -> None:
    job = job_with_body({"model": "m"})
    bearer = replace(job, sending=Sending(same_key=False))
    thinks = replace(job, sending=Sending(thinking=True))
    assert (
        prewarm_skip(bearer, cache_style="anthropic", api="chat", kind="anthropic") == "credential"
    )
    assert prewarm_skip(thinks, cache_style="anthropic", api="chat", kind="anthropic") == "thinking"


def test_a_messages_prewarm_asks_one_token_unstreamed_and_keeps_every_other_key() -> None:
    rendered = {"model": "m", "max_tokens": 900, "stream": True, "messages": [], "metadata": {}}
    before = copy.deepcopy(rendered)
    assert messages_prewarm(rendered) == {"model": "m", "max_tokens": 1, "messages": [],
                                          "metadata": {}}  # fmt: skip
    assert rendered == before


def test_the_background_copy_of_a_job_copies_the_messages_body() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    job = replace(job_with_body({}), sending=Sending(messages=body))
    copied = job.detached().sending.messages
    assert copied == body and copied is not body and copied["messages"] is not body["messages"]
