"""The memos of all tenants' stacks stay within one app-wide budget."""

from __future__ import annotations

from pathlib import Path

from proxy.engine.pipeline import MEMO_BUDGET, TENANT_MEMO_BYTES, build_stack, memo_bytes_per_tenant
from proxy.settings import TenantSettings, UpstreamSettings


def test_a_tenant_share_shrinks_with_the_number_of_tenants() -> None:
    assert memo_bytes_per_tenant(1) == TENANT_MEMO_BYTES
    assert memo_bytes_per_tenant(8) == MEMO_BUDGET // 8
    assert memo_bytes_per_tenant(8) * 8 <= MEMO_BUDGET
    assert memo_bytes_per_tenant(10_000) == 1_000_000  # a floor, so that a memo still helps


def test_a_stack_bounds_its_memos_by_its_share() -> None:
    tenant = TenantSettings(name="t", upstream="u", workspace=Path("."))
    upstream = UpstreamSettings(name="u", base_url="http://127.0.0.1:9/v1")
    stack = build_stack(tenant, upstream, memo_bytes=6_000_000)
    assert stack.matches._entries._max_bytes == 4_000_000
    assert stack.lineages._entries._max_bytes == 1_000_000
    budgets = [stage for _, stage in (*stack.before, *stack.before_degraded)
               if stage.func.__module__.endswith("budgets")]  # fmt: skip
    [memo] = {id(stage.keywords["memo"]): stage.keywords["memo"] for stage in budgets}.values()
    assert memo._max_chars == 1_000_000  # one error memo, shared by both budgets variants
