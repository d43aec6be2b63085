"""A tenant's per-request series: token counts added as reported, stage counters summed."""

from __future__ import annotations

import pytest

from proxy.engine.tally import tally
from proxy.server.observe.metrics import Metrics
from proxy.server.observe.tenant_series import TOKEN_KINDS, TenantSeries, stage_totals
from proxy.types import StageReport
from proxy.usage import Usage


def token_values(metrics: Metrics, tenant: str) -> dict[str, float]:
    return {kind: metrics.tokens.labels(tenant, kind).value for kind in TOKEN_KINDS}


def test_stage_totals_sum_cuts_over_all_stages_and_own_counters_from_their_stage() -> None:
    reports = (
        StageReport("prune", {"chars_pruned": 500, "pruned": 2, "replayed": 0}),
        StageReport("budgets", {"chars_saved": 70, "persisted": 1, "truncated": 0},
                    outputs={"a": "x" * 40, "b": "y" * 2}),
        StageReport("validate", {"repairs": 3, "client_violations": 0}),
        StageReport("other", {"pruned": 1, "chars_saved": 1000, "repairs": 9, "sections": 4}),
    )  # fmt: skip
    assert stage_totals(tally(reports)) == {
        "chars_pruned": 500, "pruned": 3, "chars_saved": 70, "persisted": 1,
        "persisted_chars": 42, "repairs": 3,
    }  # fmt: skip


@pytest.mark.parametrize(
    "reports",
    [
        (),
        (StageReport("prune", {"chars_pruned": 0, "pruned": 0}),),
        (StageReport("bootstrap", {"sections": 4, "static_chars": 900}),),
        (StageReport("budgets", outputs={"a": ""}),),
    ],
    ids=["none", "zeros", "not-summed", "empty-output"],
)
def test_stage_totals_leave_out_what_adds_nothing(reports: tuple[StageReport, ...]) -> None:
    assert stage_totals(tally(reports)) == {}


def test_stage_counters_cover_every_name_stage_totals_can_give() -> None:
    series = TenantSeries(Metrics(), "acme")
    reports = (
        StageReport("prune", {"chars_pruned": 1, "pruned": 1, "replayed": 1}),
        StageReport(
            "budgets", {"chars_saved": 1, "persisted": 1, "truncated": 1}, outputs={"o": "x"}
        ),
        StageReport("validate", {"repairs": 1, "client_violations": 1}),
    )
    assert set(stage_totals(tally(reports))) == set(series.stage_counters)


def test_stage_counters_are_the_tenants_own_series() -> None:
    metrics = Metrics()
    series = TenantSeries(metrics, "acme")
    assert series.stage_counters["chars_pruned"] is metrics.chars.labels("acme", "prune")
    assert series.stage_counters["chars_saved"] is metrics.chars.labels("acme", "budgets")
    assert series.stage_counters["pruned"] is metrics.tool_results.labels("acme", "pruned")
    assert series.stage_counters["repairs"] is metrics.repairs.labels("acme")
    assert series.stage_counters["chars_pruned"] is not metrics.chars.labels("other", "prune")


def test_token_series_appear_at_the_first_usage_and_add_up_by_kind() -> None:
    metrics = Metrics()
    series = TenantSeries(metrics, "acme")
    assert metrics.tokens.series == {}
    series.add_tokens(Usage(prompt_tokens=10, completion_tokens=3, cached_tokens=4))
    series.add_tokens(Usage(prompt_tokens=5, cache_creation_tokens=2))
    assert token_values(metrics, "acme") == {
        "prompt": 15,
        "cached": 4,
        "cache_creation": 2,
        "completion": 3,
    }
    assert set(metrics.tokens.series) == {("acme", kind) for kind in TOKEN_KINDS}
