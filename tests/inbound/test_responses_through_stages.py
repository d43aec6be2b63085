"""Responses bodies through the real stages (no I/O: a tenant's stack, a turn, no store) and
back: faithful where nothing changed, valid for the Responses API — and, as a chat request, for a
chat upstream — where something did. The recorded Codex and Agents SDK requests included."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from proxy.inbound.chat_request import chat_request
from proxy.inbound.compaction_handle import sign_handle
from proxy.inbound.responses_compaction import handles_in, without_trigger
from proxy.inbound.responses_render import internal_to_responses
from proxy.inbound.responses_request import responses_to_internal
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.stages.prune import PruneSettings
from proxy.translate.anthropic_request import to_messages_request
from proxy.types import CacheStyle, Message, SessionState, StageReport, WorkspaceView
from tests.inbound.builders import chat_problem
from tests.inbound.builders import wire_problem as messages_problem
from tests.inbound.pipeline_rig import WORKSPACE, run_pipeline, stored_summary
from tests.inbound.responses_builders import fixture, fixture_names, wire_problem
from tests.inbound.responses_strategies import bodies

JSON = dict[str, Any]
SECRET = b"s" * 32


def prepare(
    sent: JSON,
    *,
    tenant: TenantSettings | None = None,
    style: CacheStyle = "openai",
    state: SessionState | None = None,
    workspace: WorkspaceView | None = None,
    summaries: dict[str, list[Message]] | None = None,
) -> tuple[JSON, JSON, list[StageReport]]:
    """(the Responses body for a Responses upstream, the chat request for a chat upstream, the
    stage reports) for `sent`."""
    internal, carrier = responses_to_internal(sent, summaries=summaries)
    prepared, reports = run_pipeline(
        internal,
        tenant=tenant or TenantSettings(),
        # no prompt_cache_key added: the body goes as the client sent it
        upstream=UpstreamSettings(kind="openai", cache_style=style, send_prompt_cache_key=False),
        state=state,
        workspace=workspace,
    )
    return internal_to_responses(prepared, carrier), chat_request(prepared), reports


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_a_body_the_stages_leave_alone_goes_upstream_as_the_client_sent_it(sent: JSON) -> None:
    kept = copy.deepcopy(sent)
    out, _, _ = prepare(sent, style="none")
    assert out == kept


@pytest.mark.parametrize("name", fixture_names())
def test_recorded_requests_go_upstream_as_sent_and_as_valid_chat(name: str) -> None:
    sent = without_trigger(fixture(name)["body"])
    out, chat, _ = prepare(sent, tenant=TenantSettings(prune=PruneSettings(enabled=False)))
    assert out == sent
    assert all(a is b for a, b in zip(out["input"], sent["input"], strict=True))
    assert wire_problem(out) is None
    assert chat_problem(chat) is None


@pytest.mark.parametrize("name", fixture_names())
def test_recorded_requests_reach_an_anthropic_upstream_as_valid_messages(name: str) -> None:
    """`kind = "anthropic"`: the prepared chat request, translated as the chat route does."""
    sent = without_trigger(fixture(name)["body"])
    _, chat, _ = prepare(sent, workspace=WORKSPACE)
    request = to_messages_request(chat)
    assert messages_problem({**request, "max_tokens": request.get("max_tokens", 1024)}) is None


@pytest.mark.parametrize("name", fixture_names())
def test_recorded_requests_with_bootstrap_and_pruning_stay_valid(name: str) -> None:
    sent = without_trigger(fixture(name)["body"])
    tenant = TenantSettings(prune=PruneSettings(recent_keep=1))
    out, chat, _ = prepare(sent, tenant=tenant, workspace=WORKSPACE)
    assert wire_problem(out) is None and chat_problem(chat) is None
    assert out["instructions"].startswith("<soul>")
    assert out["instructions"].endswith("</user_profile>")
    if sent.get("instructions"):
        assert sent["instructions"] in out["instructions"]
    assert [i.get("type") for i in out["input"]] == [i.get("type") for i in sent["input"]]


def test_codexs_old_outputs_are_pruned_and_every_other_item_goes_as_sent() -> None:
    sent = fixture("codex_turn")["body"]
    tenant = TenantSettings(prune=PruneSettings(recent_keep=1))
    out, chat, reports = prepare(sent, tenant=tenant)
    assert next(r for r in reports if r.stage == "prune").counters["pruned"] == 1
    changed = [
        n for n, (a, b) in enumerate(zip(out["input"], sent["input"], strict=True)) if a is not b
    ]
    assert changed == [6]  # the first shell output: cut, its call_id and type kept
    assert "truncated, original" in out["input"][6]["output"]
    assert out["input"][6]["call_id"] == "call_A1"
    assert wire_problem(out) is None and chat_problem(chat) is None


def test_a_stored_summary_replaces_the_items_it_covers() -> None:
    sent = fixture("codex_turn")["body"]
    internal, _ = responses_to_internal(sent)
    summary: Message = {
        "role": "user",
        "content": "[Conversation summary]\nThe coupon bug is fixed.",
    }
    stored = stored_summary(internal, summary, keep_recent=2)
    out, chat, reports = prepare(sent, state=SessionState(compactions=(stored,)))
    assert [r.counters.get("applied") for r in reports if r.stage == "compact"] == [1]
    assert out["input"][0] is sent["input"][0]  # the developer message leads the system content
    assert out["input"][1]["content"][0]["text"] == summary["content"]
    assert out["input"][2:] == sent["input"][-2:]
    assert wire_problem(out) is None and chat_problem(chat) is None


def test_a_compaction_item_of_ctxproxys_reaches_any_upstream_as_its_summary() -> None:
    sent = copy.deepcopy(fixture("codex_after_compaction")["body"])
    token = sign_handle(
        secret=SECRET, tenant="default", prefix_hash="p", summary_id="s", expires_at=2e9
    )
    [index] = [n for n, item in enumerate(sent["input"]) if item.get("type") == "compaction"]
    sent["input"][index]["encrypted_content"] = token
    assert handles_in(sent) == [(index, token)]
    summary: Message = {
        "role": "user",
        "content": "[Conversation summary]\nThe coupon bug is fixed.",
    }
    out, chat, _ = prepare(sent, summaries={token: [summary]})
    assert out["input"][index] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": summary["content"]}],
    }
    assert token not in str(out) and token not in str(chat)
    assert wire_problem(out) is None and chat_problem(chat) is None


def test_an_openai_compaction_item_is_carried_to_a_responses_upstream_only() -> None:
    sent = fixture("codex_after_compaction")["body"]
    out, chat, _ = prepare(sent)
    assert out == sent
    assert "gAAAAABo-placeholder-compaction-summary" not in str(chat)


def test_an_oversized_output_is_persisted_and_both_requests_stay_valid() -> None:
    sent = copy.deepcopy(fixture("agents_sdk_turn")["body"])
    sent["input"][3]["output"] = "row\n" * 20_000
    tenant = TenantSettings(budgets=replace(TenantSettings().budgets, persist_over_chars=50_000))
    out, chat, reports = prepare(sent, tenant=tenant)
    assert next(r for r in reports if r.stage == "budgets").counters["persisted"] == 1
    assert out["input"][3]["output"].startswith("<persisted-output")
    assert wire_problem(out) is None and chat_problem(chat) is None
