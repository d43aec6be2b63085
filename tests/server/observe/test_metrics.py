"""`GET /metrics` after scripted traffic through the proxy: counters move by the right amounts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import openai
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.engine.prepared import tally
from proxy.server.appkeys import LIFECYCLE
from proxy.server.keys import digest
from proxy.server.observe.metrics import (
    LATENCY_BUCKETS,
    TOKEN_KINDS,
    Metrics,
    TenantSeries,
    stage_totals,
)
from proxy.server.observe.trace import Trace
from proxy.types import StageReport
from proxy.usage import Usage
from tests.factories import make_trace
from tests.fakes.openai_upstream import Reply
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

KEYED = f'keys = ["{digest("sk-good")}"]\n'
COMPACT_AT_100 = "[tenants.default.compact]\nthreshold_tokens = 100\n"

PRUNED_755 = "x" * 200 + '...(truncated, original: 755 chars; full text: ctx_recall(ref="call_0"))'
"""The oldest result of `tool_history([755, ...])` pruned (its marker names the recall call)."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def tool_history(sizes: list[int], *, question: str = "read the files") -> list[dict[str, Any]]:
    """A user turn, then one read_file call and its result (of `sizes[i]` chars) per size."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for index, size in enumerate(sizes):
        call = {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "f{index}"}}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{index}",
                "content": (f"line {index} " * size)[:size],
            }
        )
    return messages


def trace_of(
    *reports: StageReport,
    prepare_s: float = 0.001,
    upstream_s: float = 0.02,
    usage: Usage | None = None,
) -> Trace:
    return make_trace(
        *reports, tenant="default", usage=usage, prepare_s=prepare_s, upstream_s=upstream_s
    )


def parsed(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def rendered(metrics: Metrics) -> Samples:
    return parsed(generate_latest(metrics.registry).decode())


async def scrape(proxy: Proxy) -> Samples:
    await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))
    async with aiohttp.ClientSession() as http, http.get(proxy.server.make_url("/metrics")) as r:
        assert r.status == 200
        return parsed(await r.text())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_requests_are_counted_by_tenant_route_and_status_even_before_auth(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=KEYED)
    async with proxy.client(api_key="sk-wrong") as bad, proxy.client(api_key="sk-good") as good:
        for _ in range(2):
            with contextlib.suppress(openai.AuthenticationError):
                await bad.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
        await good.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    samples = await scrape(proxy)
    route = "/v1/chat/completions"
    assert (
        value(samples, "ctxproxy_http_requests_total", tenant="-", route=route, status="401") == 2
    )
    assert (
        value(samples, "ctxproxy_http_requests_total", tenant="default", route=route, status="200")
        == 1
    )


async def test_tokens_latency_and_first_byte_are_recorded(proxy: Proxy) -> None:
    proxy.fake.default = Reply(prompt_tokens=1234, cached_tokens=1000, completion_tokens=7)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        _ = [chunk async for chunk in stream]
    samples = await scrape(proxy)
    assert value(samples, "ctxproxy_tokens_total", tenant="default", kind="prompt") == 2468
    assert value(samples, "ctxproxy_tokens_total", tenant="default", kind="cached") == 2000
    assert value(samples, "ctxproxy_tokens_total", tenant="default", kind="completion") == 14
    assert value(samples, "ctxproxy_upstream_seconds_count", tenant="default", stream="false") == 1
    assert value(samples, "ctxproxy_upstream_seconds_count", tenant="default", stream="true") == 1
    assert value(samples, "ctxproxy_proxy_added_seconds_count", tenant="default") == 2
    assert value(samples, "ctxproxy_stream_first_byte_seconds_count", tenant="default") == 1
    assert value(samples, "ctxproxy_store_degraded") == 0


async def test_pruned_and_persisted_characters_are_counted(proxy: Proxy) -> None:
    messages = tool_history([755, 100, 60_000])  # oldest pruned; newest persisted by budgets
    async with proxy.client() as client:
        await client.chat.completions.create(model="m", messages=messages)
    samples = await scrape(proxy)
    assert value(
        samples, "ctxproxy_tool_result_chars_removed_total", tenant="default", stage="prune"
    ) == 755 - len(PRUNED_755)
    assert value(samples, "ctxproxy_tool_results_cut_total", tenant="default", action="pruned") == 1
    assert value(samples, "ctxproxy_persisted_chars_total", tenant="default") == 60_000
    assert (
        value(samples, "ctxproxy_tool_results_cut_total", tenant="default", action="persisted") == 1
    )
    assert (
        value(
            samples, "ctxproxy_tool_result_chars_removed_total", tenant="default", stage="budgets"
        )
        > 50_000
    )


async def test_series_a_request_touches_are_exported_at_zero_when_nothing_was_cut(
    proxy: Proxy,
) -> None:
    proxy.fake.default = Reply(prompt_tokens=10, cached_tokens=0, completion_tokens=2)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    samples = await scrape(proxy)
    zero = [
        ("ctxproxy_tool_result_chars_removed_total", {"stage": "prune"}),
        ("ctxproxy_tool_result_chars_removed_total", {"stage": "budgets"}),
        ("ctxproxy_persisted_chars_total", {}),
        *[
            ("ctxproxy_tool_results_cut_total", {"action": action})
            for action in ("pruned", "replayed", "persisted", "truncated")
        ],
        ("ctxproxy_validation_repairs_total", {}),
        ("ctxproxy_client_violations_total", {}),
        ("ctxproxy_tokens_total", {"kind": "cached"}),
        ("ctxproxy_tokens_total", {"kind": "cache_creation"}),
    ]
    for name, labels in zero:
        assert samples[(name, tuple(sorted({"tenant": "default", **labels}.items())))] == 0
    assert value(samples, "ctxproxy_tokens_total", tenant="default", kind="prompt") == 10
    assert ("ctxproxy_stream_interrupted_total", (("tenant", "default"),)) not in samples


async def test_compactions_and_summarizer_failures_by_outcome(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT_AT_100)
    history = tool_history([50] * 4)
    async with proxy.client() as client:
        await client.chat.completions.create(model="m", messages=history)
        await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))  # usage recorded
        history += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}]
        await client.chat.completions.create(model="m", messages=history)  # compacts
        await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))
        proxy.fake.summary_text = "<analysis>nothing usable</analysis>"
        other = tool_history([50] * 4, question="another conversation")
        await client.chat.completions.create(model="m", messages=other)
        await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))
        other += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
        await client.chat.completions.create(model="m", messages=other)  # summary unusable
    samples = await scrape(proxy)
    assert (
        value(
            samples,
            "ctxproxy_compactions_total",
            tenant="default",
            outcome="done",
            reason="compacted",
        )
        == 1
    )
    assert (
        value(
            samples,
            "ctxproxy_compactions_total",
            tenant="default",
            outcome="failed",
            reason="empty_summary",
        )
        == 1
    )
    assert (
        value(
            samples, "ctxproxy_summarizer_failures_total", tenant="default", reason="empty_summary"
        )
        == 1
    )
    assert (
        value(
            samples,
            "ctxproxy_compaction_request_prepare_seconds_count",
            tenant="default",
            outcome="done",
        )
        == 1
    )


async def test_no_label_carries_a_session_id_or_a_key(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=KEYED)
    async with proxy.client(api_key="sk-good") as client:
        await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "SECRET-CONTENT"}],
            extra_headers={"X-Ctx-Session": "session-xyz"},
        )
    async with aiohttp.ClientSession() as http, http.get(proxy.server.make_url("/metrics")) as r:
        text = await r.text()
    for needle in ("session-xyz", "sk-good", digest("sk-good"), "SECRET-CONTENT"):
        assert needle not in text


async def test_store_outage_shows_as_degraded(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(store_url="redis://127.0.0.1:1/0")
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    samples = await scrape(proxy)
    assert value(samples, "ctxproxy_store_degraded") == 1
    assert value(samples, "ctxproxy_store_degraded_requests_total", tenant="default") == 1


def buckets(samples: Samples, name: str, **labels: str) -> list[float]:
    """The cumulative bucket counts of one histogram series, +Inf last."""
    bounds = [*map(str, map(float, LATENCY_BUCKETS)), "+Inf"]
    return [value(samples, name + "_bucket", le=le, **labels) for le in bounds]


async def test_a_value_on_a_bound_counts_in_that_bucket_and_one_past_the_last_only_in_inf() -> None:
    metrics = Metrics()
    await metrics.on_request(trace_of(prepare_s=0.005, upstream_s=300.0))
    await metrics.on_request(trace_of(prepare_s=0.0050001, upstream_s=300.5))
    samples = rendered(metrics)
    added = "ctxproxy_proxy_added_seconds"
    assert buckets(samples, added, tenant="default") == [1, *[2] * 15]
    upstream, labels = "ctxproxy_upstream_seconds", {"tenant": "default", "stream": "false"}
    assert buckets(samples, upstream, **labels) == [0] * 14 + [1, 2]
    assert value(samples, upstream + "_count", **labels) == 2
    assert value(samples, upstream + "_sum", **labels) == 600.5
    assert (upstream + "_created", tuple(sorted(labels.items()))) in samples


async def test_a_tenants_series_exist_from_its_first_request_its_tokens_from_its_first_usage() -> (
    None
):
    metrics = Metrics()
    await metrics.on_request(trace_of(StageReport("prune", {"chars_pruned": -5, "pruned": 1})))
    first = rendered(metrics)
    assert value(first, "ctxproxy_tool_results_cut_total", tenant="default", action="pruned") == 1
    for stage in ("prune", "budgets"):  # a negative amount is not added: counters never go down
        key = (("stage", stage), ("tenant", "default"))
        assert first[("ctxproxy_tool_result_chars_removed_total", key)] == 0
    assert not [name for name, _ in first if name.startswith("ctxproxy_tokens")]
    assert not [labels for name, labels in first if ("stream", "true") in labels]
    await metrics.on_request(trace_of(usage=Usage(prompt_tokens=7, completion_tokens=0)))
    tokens = {
        dict(labels)["kind"]: count
        for (name, labels), count in rendered(metrics).items()
        if name == "ctxproxy_tokens_total"
    }
    assert tokens == {"prompt": 7, "cached": 0, "cache_creation": 0, "completion": 0}


async def test_a_skipped_stage_is_counted_by_stage_and_its_other_counters_still_add_up() -> None:
    metrics = Metrics()
    await metrics.on_request(
        trace_of(
            StageReport("bootstrap", skipped="OSError"),
            StageReport("prune", {"chars_pruned": 30, "pruned": 1}),
        )
    )
    await metrics.on_request(trace_of(StageReport("bootstrap", skipped="KeyError")))
    samples = rendered(metrics)
    assert value(samples, "ctxproxy_stage_skipped_total", stage="bootstrap") == 2
    assert value(samples, "ctxproxy_stage_skipped_total", stage="prune") == 0
    assert (
        value(samples, "ctxproxy_tool_result_chars_removed_total", tenant="default", stage="prune")
        == 30
    )


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
