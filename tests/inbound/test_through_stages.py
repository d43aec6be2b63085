"""Messages bodies through the real stages (no I/O: a tenant's stack, a turn, no store) and back:
faithful where nothing changed, valid for the Messages API where something did."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.messages_request import messages_to_internal
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.stages.prune import PruneSettings
from proxy.types import CacheStyle, Message, SessionState, StageReport, WorkspaceView
from tests.inbound.builders import (
    assistant,
    body,
    fixture,
    marker_count,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
    wire_problem,
)
from tests.inbound.pipeline_rig import WORKSPACE, run_pipeline, stored_summary
from tests.inbound.strategies import bodies

JSON = dict[str, Any]
RECORDED = ["main_turn_thinking", "four_markers", "topic_prefill", "legacy_images", "count_tokens"]


def prepare(
    sent: JSON,
    *,
    hide: bool = False,
    tenant: TenantSettings | None = None,
    style: CacheStyle = "anthropic",
    state: SessionState | None = None,
    workspace: WorkspaceView | None = None,
) -> tuple[JSON, list[StageReport]]:
    """What the proxy would send an Anthropic upstream for `sent`."""
    internal, carrier = messages_to_internal(sent, hide_message_markers=hide)
    prepared, reports = run_pipeline(
        internal,
        tenant=tenant or TenantSettings(),
        upstream=UpstreamSettings(kind="anthropic", cache_style=style),
        state=state,
        workspace=workspace,
    )
    return internal_to_messages(prepared, carrier), reports


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_a_body_the_stages_leave_alone_goes_upstream_as_the_client_sent_it(sent: JSON) -> None:
    kept = copy.deepcopy(sent)
    out, _ = prepare(sent, style="none")
    assert out == kept


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_in_anthropic_style_only_markers_are_added(sent: JSON) -> None:
    out, _ = prepare(sent)
    assert unmarked(out) == unmarked(sent)
    assert marker_count(out) >= marker_count(sent)  # the client's own are all kept
    if marker_count(sent) <= 4:
        assert marker_count(out) <= 4


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_requests_leave_valid_with_the_clients_markers_kept(name: str) -> None:
    sent = fixture(name)["body"]
    out, _ = prepare(sent)
    assert wire_problem(out) is None
    assert marker_count(out) <= 4
    assert unmarked(out) == unmarked(sent)
    for new, old in zip(out["messages"], sent["messages"], strict=True):
        assert new is old or unmarked(new) == unmarked(old)
    assert out.get("system") is sent.get("system")


def long_session(turns: int = 4, size: int = 2_000) -> JSON:
    messages: list[JSON] = [user("Start.")]
    for n in range(turns):
        messages.append(
            assistant(thinking(f"step {n}", f"sig{n}"), tool_use(f"t{n}", command=f"cat f{n}"))
        )
        messages.append(user(tool_result(f"t{n}", f"line {n}\n" * (size // 7), is_error=n == 0)))
    messages.append(assistant("All read."))
    messages.append(user("Summarise them."))
    return body(*messages, thinking={"type": "enabled", "budget_tokens": 2048}, max_tokens=8000)


def test_old_tool_results_are_pruned_and_everything_else_goes_as_sent() -> None:
    sent = long_session()
    tenant = TenantSettings(prune=PruneSettings(recent_keep=1))
    out, reports = prepare(sent, tenant=tenant)
    assert wire_problem(out) is None
    pruned = next(r for r in reports if r.stage == "prune")
    assert pruned.counters["pruned"] == 3
    results = [m["content"][0] for m in out["messages"][2:9:2]]
    assert [len(r["content"]) < 400 for r in results] == [True, True, True, False]
    assert results[0]["is_error"] is True and "truncated, original" in results[0]["content"]
    for index in (1, 3, 5, 7, 9):  # assistant turns: thinking and signatures as sent
        assert unmarked(out["messages"][index]) == sent["messages"][index]
    assert out["thinking"] is sent["thinking"]


def test_bootstrap_puts_the_static_part_first_then_the_clients_blocks_then_the_dynamic() -> None:
    sent = fixture("four_markers")["body"]
    out, _ = prepare(sent, workspace=WORKSPACE)
    system = out["system"]
    billing, *client = sent["system"]
    assert system[0] is billing  # Claude Code's attribution line stays first
    assert system[1]["text"].startswith("<soul>")
    assert system[2:4] == client
    assert all(a is b for a, b in zip(system[2:4], client, strict=True))
    assert system[4]["text"].startswith("<user_profile>")
    assert marker_count(out) == 4  # the client's four: no room for ours
    assert wire_problem(out) is None
    assert out["messages"] == sent["messages"]


def test_bootstrap_marks_the_static_part_when_there_is_room() -> None:
    soul = "You are Ada. " + "Keep answers exact and short. " * 200  # over the cacheable minimum
    workspace = WorkspaceView(files={"soul": (soul,)})
    sent = fixture("main_turn_thinking")["body"]
    tenant = TenantSettings(bootstrap=replace(TenantSettings().bootstrap, max_chars_per_file=8000))
    out, _ = prepare(sent, workspace=workspace, tenant=tenant)
    assert out["system"][1].get("cache_control") == {"type": "ephemeral"}
    assert [out["system"][0], *out["system"][2:]] == sent["system"]
    assert marker_count(out) == 4 and wire_problem(out) is None


def test_a_stored_summary_replaces_the_turns_it_covers() -> None:
    sent = long_session()
    internal, _ = messages_to_internal(sent)
    summary: Message = {"role": "user", "content": "[Conversation summary]\nFour files were read."}
    stored = stored_summary(internal, summary, keep_recent=4)
    out, reports = prepare(sent, state=SessionState(compactions=(stored,)))
    assert [r.counters.get("applied") for r in reports if r.stage == "compact"] == [1]
    assert out["messages"][0]["content"][0] == text(summary["content"])
    kept = len(out["messages"]) - 1
    assert out["messages"][1:] == sent["messages"][-kept:]
    assert wire_problem(out) is None


def test_an_oversized_tool_result_is_persisted_and_the_request_stays_valid() -> None:
    sent = long_session(turns=1, size=60_000)
    out, reports = prepare(sent)
    budgets = next(r for r in reports if r.stage == "budgets")
    assert budgets.counters["persisted"] == 1 and len(budgets.outputs) == 1
    assert out["messages"][2]["content"][0]["content"].startswith("<persisted-output")
    assert wire_problem(out) is None


def test_claude_codes_marker_on_its_newest_turn_keeps_pruning_off_unless_hidden() -> None:
    sent = fixture("main_turn_thinking")["body"]  # marks its newest turn, as on every request
    tenant = TenantSettings(prune=PruneSettings(recent_keep=1))
    shown, reports = prepare(sent, tenant=tenant)
    assert next(r for r in reports if r.stage == "prune").counters["pruned"] == 0
    assert shown["messages"][2] is sent["messages"][2]
    hidden, reports = prepare(sent, tenant=tenant, hide=True)
    assert next(r for r in reports if r.stage == "prune").counters["pruned"] == 1
    read = hidden["messages"][2]["content"][0]
    assert "truncated, original" in read["content"]
    assert hidden["messages"][4] is sent["messages"][4]  # the newest, marked turn as sent
    assert marker_count(hidden) == 3 and wire_problem(hidden) is None  # ours fell on its own
    assert unmarked(hidden["messages"][1]) == sent["messages"][1]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_with_markers_hidden_the_clients_markers_all_come_back(sent: JSON) -> None:
    out, _ = prepare(sent, hide=True)
    assert unmarked(out) == unmarked(sent)
    assert marker_count(out) >= marker_count(sent)
    if marker_count(sent) <= 4:
        assert marker_count(out) <= 4
