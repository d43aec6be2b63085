"""Markdown tables for each section of the results."""

from __future__ import annotations

import statistics
from typing import Any


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _cell(rows: list[dict[str, Any]], target: str, **where: Any) -> dict[str, Any] | None:
    return next(
        (r for r in rows if r["target"] == target and all(r[k] == v for k, v in where.items())),
        None,
    )


def ratios(rows: list[dict[str, Any]], key: str, a: str, b: str, **where: Any) -> list[float]:
    """`a`'s value over `b`'s in every cell matching `where`, where both ran."""
    out = []
    for row in rows:
        if row["target"] != a or any(row[k] != v for k, v in where.items()):
            continue
        other = _cell(
            rows, b, size=row["size"], stream=row["stream"], concurrency=row["concurrency"]
        )
        if other and other[key]:
            out.append(row[key] / other[key])
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def headline(results: dict[str, Any]) -> str:
    rows = results["overhead"]["rows"]
    out = []
    for size, limit in (("small", 1.5), ("agentic", 2.0)):
        value = _median(ratios(rows, "cpu_us", "ctxproxy", "aiohttp pass-through", size=size))
        out.append(
            [
                f"CPU/request vs bare pass-through, {size} (median of cells)",
                f"≤ {limit}×",
                f"{value:.2f}×",
                _ok(value <= limit),
            ]
        )
    added = [
        r["ttfb_p50_ms"] - d["ttfb_p50_ms"]
        for r in rows
        if r["target"] == "ctxproxy"
        and r["stream"]
        and r["concurrency"] == 1
        and (d := _cell(rows, "direct", size=r["size"], stream=True, concurrency=1))
    ]
    small_ttfb = added[0] if added else float("nan")
    out.append(
        [
            "added TTFB p50 at c=1, small stream",
            "≤ 1 ms",
            f"{small_ttfb:.2f} ms",
            _ok(small_ttfb <= 1.0),
        ]
    )
    vs = ratios(rows, "rps", "ctxproxy", "LiteLLM")
    if vs:
        out.append(
            [
                "throughput vs LiteLLM (min / median of cells)",
                "≥ 20×",
                f"{min(vs):.1f}× / {_median(vs):.1f}×",
                _ok(min(vs) >= 20),
            ]
        )
    out += _savings_headline(results) + _cache_headline(results)
    return table(["target", "goal", "measured", "holds"], out)


def _ok(flag: bool) -> str:
    return "yes" if flag else "**no**"


def _savings_headline(results: dict[str, Any]) -> list[list[Any]]:
    out = []
    for label, rows in results.get("savings", {}).get("configs", {}).items():
        goal = 0.7 if "aggressive" in label else 0.4
        saved = 1 - sum(r["proxy_tokens"] for r in rows) / sum(r["direct_tokens"] for r in rows)
        invalid = sum(r["invalid_proxy"] for r in rows)
        out.append(
            [
                f"prompt tokens saved, {label}",
                f"≥ {goal:.0%}, 0 invalid",
                f"{saved:.1%}, {invalid} invalid",
                _ok(saved >= goal and not invalid),
            ]
        )
    return out


def _cache_headline(results: dict[str, Any]) -> list[list[Any]]:
    rows = results.get("cache", {}).get("rows", [])
    found = [r for r in rows if r["provider"] == "anthropic" and "ctxproxy" in r["setup"]]
    return [
        [
            f"Anthropic cached share after turn 1, {r['setup']}",
            "≥ 80%",
            f"{r['cached_share_after_first']:.1%}",
            _ok(r["cached_share_after_first"] >= 0.8),
        ]
        for r in found
    ]


def overhead_table(results: dict[str, Any]) -> str:
    data = results["overhead"]
    ceiling = "; ".join(
        f"c={r['concurrency']}: {r['rps']:.0f} req/s, upstream at "
        f"{r['upstream_cpu_share']:.0%} of a core"
        for r in data["ceiling"]
    )
    head = (
        f"Upstream ceiling alone (small, direct): {ceiling}. Each cell: {data['rounds']} "
        f"interleaved rounds of {data['duration_s']} s per target.\n\n"
    )
    rows = [
        [
            r["size"],
            "stream" if r["stream"] else "json",
            r["concurrency"],
            r["target"],
            r["rps"],
            r["p50_ms"],
            r["p99_ms"],
            r["ttfb_p50_ms"] if r["stream"] else "",
            r["cpu_us"] if r["target"] != "direct" else "",
            r["errors"],
        ]
        for r in data["rows"]
    ]
    names = [
        n for n in ("ctxproxy", "ctxproxy + Redis") if any(r["target"] == n for r in data["rows"])
    ]
    ratio_tables = [_cpu_ratio_table(data["rows"], name) for name in names]
    return (
        head
        + "\n\n".join(ratio_tables)
        + "\n\n"
        + table(
            [
                "size",
                "mode",
                "c",
                "target",
                "req/s",
                "p50 ms",
                "p99 ms",
                "TTFB p50 ms",
                "proxy CPU µs/req",
                "errors",
            ],
            rows,
        )
    )


def _cpu_ratio_table(rows: list[dict[str, Any]], name: str) -> str:
    """`name`'s CPU per request over the pass-through's, cell by cell."""
    levels = sorted({r["concurrency"] for r in rows})
    body = []
    for size in dict.fromkeys(r["size"] for r in rows):
        for stream in (False, True):
            found = [
                ratios(
                    rows,
                    "cpu_us",
                    name,
                    "aiohttp pass-through",
                    size=size,
                    stream=stream,
                    concurrency=c,
                )
                for c in levels
            ]
            body.append(
                [
                    size,
                    "stream" if stream else "json",
                    *[f"{r[0]:.2f}×" if r else "" for r in found],
                ]
            )
    return f"CPU per request, {name} ÷ aiohttp pass-through:\n\n" + table(
        ["size", "mode", *[f"c={c}" for c in levels]], body
    )


def instructions_table(results: dict[str, Any]) -> str:
    rows = results["instructions"]["rows"]
    body = [
        [
            r["size"],
            r["target"],
            f"{r['instructions'] / 1e3:,.0f} k",
            f"{r['ratio']:.2f}×" if r.get("ratio") else "",
        ]
        for r in rows
    ]
    return (
        "User-space instructions per request under callgrind (`benchmarks/instructions.py`, "
        f"{results['instructions']['requests']} requests one at a time, JSON answers): steady "
        "whatever the machine's load, but without kernel work, so the ratio overstates the "
        "CPU-time ratio.\n\n"
        + table(["size", "target", "instructions/request", "÷ pass-through"], body)
    )


def features_table(results: dict[str, Any]) -> str:
    data = results["features"]
    if "skipped" in data:
        return f"Skipped: {data['skipped']}."
    base, floor = data["ctxproxy"], data["passthrough"]
    body = [
        [
            f"`{r['feature']}`",
            r["removes"],
            f"{r['instructions_off'] / 1e3:,.0f} k",
            f"{r['cost'] / 1e3:,.0f} k",
            f"{r['share']:.0%}",
        ]
        for r in data["rows"]
    ]
    return (
        f"ctxproxy with one feature switched off at a time (`benchmarks/feature_cost.py`, "
        f"ablations in `benchmarks/ablations.py`) at {data.get('revision', '?')}, under "
        f"callgrind, {data['requests']} {data['size']} JSON requests one at a time: "
        f"ctxproxy runs {base / 1e3:,.0f} k "
        f"instructions per request (mean of a run first and one last, "
        f"{data['noise'] / 1e3:,.1f} k apart: the noise), the aiohttp pass-through "
        f"{floor / 1e3:,.0f} k, so {(base - floor) / 1e3:,.0f} k extra. *cost* = ctxproxy − "
        "ctxproxy with the feature off; *share* = that cost ÷ the extra.\n\n"
        + table(["off", "what it removes", "instructions/request", "cost", "share"], body)
        + "\n\nThe ablations overlap, so the shares do not add up: `after` includes "
        "`record`, `metrics`, `events` and `task`; *all of the above* switches every one off "
        "at once, and what it leaves above the pass-through is code no ablation isolates "
        "(the handler, the middleware, the per-request objects, the relay). The pipeline's "
        "stage reports make the after-work dearer, so `pipeline` and `after` overlap too. "
        "Switching the pipeline off also changes the body sent upstream: no bootstrap "
        "content (smaller), no pruning (larger, on agentic histories); a negative cost is a "
        "feature that saves more than it costs. `session_id` is overstated: OpenSSL's sha256 "
        "runs a generic slow path under valgrind. Kernel work is not counted."
    )


def scaling_table(results: dict[str, Any]) -> str:
    data = results["scaling"]
    rows = [
        [r["messages"], r["chars"], r["fresh_ms"], r["repeat_ms"], r["us_per_msg"]]
        for r in data["sizes"]
    ]
    grow = data["growing"]
    trips = results.get("redis", {})
    text = table(
        [
            "messages",
            "chars",
            "ms/request (new session)",
            "ms/request (same session again)",
            "µs per message",
        ],
        rows,
    )
    text += (
        f"\n\nOne session growing by 4 messages per request over {grow['requests']} "
        f"requests: {grow['first_us_per_msg']:.1f} µs/message in the first tenth, "
        f"{grow['last_us_per_msg']:.1f} in the last (flat = linear overall).\n"
    )
    if "round_trips_per_request" in trips:
        text += (
            f"\nRedis (real redis-server): {trips['round_trips_per_request']:.1f} round "
            f"trips and {trips['commands_per_request']:.1f} commands per request "
            f"({trips['commands']}).\n"
        )
    return text


def savings_table(results: dict[str, Any]) -> str:
    out = [
        f"Fake upstream reports prompt_tokens = characters of the JSON messages+tools it "
        f"received / 4; model {results['savings']['model']}.\n"
    ]
    for label, rows in results["savings"]["configs"].items():
        body = [
            [
                r["trace"],
                r["requests"],
                r["direct_tokens"],
                r["proxy_tokens"],
                f"{1 - r['proxy_tokens'] / r['direct_tokens']:.0%}",
                r["summarizer_tokens"],
                r["direct_max"],
                r["proxy_max"],
                r["compactions"],
                r["pruned_chars_last"],
                r["invalid_proxy"],
            ]
            for r in rows
        ]
        direct = sum(r["direct_tokens"] for r in rows)
        proxied = sum(r["proxy_tokens"] for r in rows)
        summ = sum(r["summarizer_tokens"] for r in rows)
        body.append(
            [
                "**total**",
                sum(r["requests"] for r in rows),
                direct,
                proxied,
                f"{1 - proxied / direct:.1%}",
                summ,
                max(r["direct_max"] for r in rows),
                max(r["proxy_max"] for r in rows),
                sum(r["compactions"] for r in rows),
                "",
                sum(r["invalid_proxy"] for r in rows),
            ]
        )
        out.append(
            f"**{label}** (saved incl. summarizer calls: "
            f"{1 - (proxied + summ) / direct:.1%})\n\n"
            + table(
                [
                    "session",
                    "requests",
                    "tokens direct",
                    "tokens via ctxproxy",
                    "saved",
                    "summarizer tokens",
                    "largest direct",
                    "largest via ctxproxy",
                    "compactions",
                    "pruned chars (last req)",
                    "invalid",
                ],
                body,
            )
        )
    return "\n\n".join(out)


def cache_table(results: dict[str, Any]) -> str:
    rows = [
        [
            r["provider"],
            r["setup"],
            r["prompt_tokens"],
            r["cached_tokens"],
            f"{r['cached_share']:.1%}",
            f"{r['cached_share_after_first']:.1%}",
            f"{r['relative_cost']:.2f}",
        ]
        for r in results["cache"]["rows"]
    ]
    return (
        f"{results['cache']['traces']} sessions, simulated caches (see "
        "`proxy/cost/cachesim.py`); relative cost = input cost with cache pricing / direct "
        "prompt tokens without cache.\n\n"
        + table(
            [
                "provider",
                "setup",
                "prompt tokens",
                "cached",
                "cached share",
                "after turn 1",
                "relative cost",
            ],
            rows,
        )
    )


def memory_table(results: dict[str, Any]) -> str:
    rows = [
        [
            r["target"],
            r["rss_warm_mib"],
            r["rss_after_load_mib"],
            r["load_s"],
            r["load_requests"],
            r["received_mib"],
            r["peak_growth_mib"],
        ]
        for r in results["memory"]["rows"]
    ]
    text = table(
        [
            "target",
            "RSS warm MiB",
            "RSS after mixed load MiB",
            "load s",
            "requests",
            "slow stream MiB",
            "peak RSS growth during stream MiB",
        ],
        rows,
    )
    timelines = [
        (r["target"], r["rss_by_minute_mib"])
        for r in results["memory"]["rows"]
        if len(r.get("rss_by_minute_mib", ())) > 1
    ]
    if timelines:
        text += "\n\nRSS (MiB) at the end of each minute of mixed load:\n\n" + table(
            ["target", *[f"{m + 1} min" for m in range(len(timelines[0][1]))]],
            [[name, *[f"{v:.0f}" for v in values]] for name, values in timelines],
        )
    return text


def recall_table(results: dict[str, Any]) -> str:
    r = results["recall"]
    cpu = r["cpu"]
    rows = [
        ["by ref", "100%", f"{r['ref_hits']} / {r['ref_needles']}",
         _ok(r["ref_hits"] == r["ref_needles"])],
        ["by query (≥ 200 needles)", "≥ 95%", f"{r['query_hits']} / {r['query_needles']}",
         _ok(r["query_needles"] >= 200 and r["query_hits"] >= 0.95 * r["query_needles"])],
        ["answers naming the tool to the client", "0", r["leaks"], _ok(r["leaks"] == 0)],
        ["CPU/request, recall on (not called) vs off", "≤ 1.05×",
         f"{cpu['cpu_us']['recall on']:,.0f} / {cpu['cpu_us']['recall off']:,.0f} µs = "
         f"{cpu['ratio']:.3f}×", _ok(cpu["ratio"] <= 1.05)],
    ]  # fmt: skip
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(r["ref_kinds"].items()))
    return (
        f"{r['traces']} traces, {r['requests']} requests ({r['offered']} offered the tool), "
        f"{r['extra_rounds']} extra upstream rounds; refs recalled: {kinds}. CPU: "
        f"{cpu['bodies']} requests × {cpu['rounds']} rounds each way, median of rounds "
        f"{cpu['median_round_ratio']:.3f}×.\n\n"
        + table(["recall", "goal", "measured", "holds"], rows)
    )
