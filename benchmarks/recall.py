"""Section 9, recall: is everything ctxproxy cuts within the model's reach, and what does offering
the tool cost? `python -m benchmarks.recall [--quick]` (about 2 minutes; `--quick` about 1).

1. Hit rate. Every trace of ../shared/traces/ is replayed (at most `REQUESTS` requests per
   trace, evenly spaced, the last included; streamed and not, alternately) through ctxproxy in
   process with aggressive settings (`AGGRESSIVE`), in front of a scripted upstream
   (`benchmarks.recall_model`) that, wherever a request carries the recall tool, calls it for
   cut items by ref and for distinctive lines of them by query, and checks each answer byte for
   byte against the original the client sent. Reported: needles and hits by ref and by query,
   the extra upstream rounds, and any answer to the client naming the tool (there must be none).
2. CPU. Two ctxproxy processes (`python -m proxy serve`) with the same aggressive settings, one
   with recall on (the tool offered, never called) and one with it off, take turns on the same
   requests (those of part 1 that carried the tool) against the fast fake upstream
   (`benchmarks.upstream`); CPU per request is each process's utime+stime over its turns (the
   first turn of each is a warm-up and not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import targets
from benchmarks.common import PYTHON, free_port, running
from benchmarks.payloads import load_trace
from benchmarks.recall_model import RecallModel
from benchmarks.replay import requests_of, serving, trace_names
from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.server.appkeys import LIFECYCLE

REQUESTS = 60
AGGRESSIVE = """
[tenants.default.prune]
recent_keep = 1
max_chars = 300
keep_chars = 100
when_cache_cold_s = 0
[tenants.default.budgets]
persist_over_chars = 8000
command_max_chars = 4000
error_head_tail_chars = 1000
[tenants.default.compact]
threshold_tokens = 12000
keep_recent = 4
keep_first_user_max_chars = 2000
"""
RECALL_OFF = "[tenants.default.recall]\nenabled = false\n"
HEADERS = {"Authorization": "Bearer sk-bench"}


def spaced(items: list[Any], limit: int) -> list[Any]:
    if len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(k * step)] for k in range(limit - 1)] + [items[-1]]


async def hit_rate(tmp: Path, names: list[str], *, limit: int) -> tuple[dict[str, Any], list]:
    """Part 1: the tally, and the requests that carried the tool (for part 2)."""
    model = RecallModel()
    offered: list[tuple[str, dict[str, Any]]] = []
    requests = leaks = 0
    async with serving(model.app()) as upstream:
        config = targets.ctxproxy_config(tmp, str(upstream.make_url("/v1")), 9)
        config.write_text(config.read_text() + AGGRESSIVE)
        app = create_app(load_settings(config, environ={"BENCH_UPSTREAM_KEY": "sk-fake"}))
        async with serving(app) as proxy, aiohttp.ClientSession() as http:
            url = proxy.make_url("/v1/chat/completions")
            for name in names:
                headers = {**HEADERS, "X-Ctx-Session": name}
                bodies = spaced(list(requests_of(load_trace(name), "gpt-4o")), limit)
                for number, body in enumerate(bodies):
                    body = {**body, "stream": number % 2 == 1}
                    model.expect(body["messages"])
                    before = model.tally.offered
                    async with http.post(url, json=body, headers=headers) as response:
                        raw = await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{name}: status {response.status}: {raw[:200]!r}")
                    requests += 1
                    leaks += b"ctx_recall" in raw
                    if model.tally.offered > before:
                        offered.append((name, body))
                    await asyncio.gather(*list(app[LIFECYCLE].tasks))
    t = model.tally
    result = {
        "traces": len(names), "requests": requests, "offered": t.offered,
        "ref_needles": t.ref_needles, "ref_hits": t.ref_hits, "ref_kinds": t.ref_kinds,
        "query_needles": t.query_needles, "query_hits": t.query_hits,
        "extra_rounds": t.rounds - requests, "leaks": leaks, "misses": t.misses,
    }  # fmt: skip
    return result, offered


def cpu_ns(pids: list[int]) -> int:
    """Nanoseconds on CPU of every thread of `pids` (/proc/<pid>/task/<tid>/schedstat): the
    clock-tick counts of /proc/<pid>/stat (10 ms) are too coarse for a 5% difference here."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    total += int((task / "schedstat").read_text().split()[0])
    return total


@contextlib.contextmanager
def proxy_process(tmp: Path, base: str, extra: str, name: str) -> Iterator[targets.Target]:
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = targets.ctxproxy_config(tmp, base, port)
    config.write_text(config.read_text() + AGGRESSIVE + extra)
    argv = [PYTHON, "-m", "proxy", "serve", "--config", str(config), "--log-level", "WARNING"]
    env = {"BENCH_UPSTREAM_KEY": "sk-fake"}
    with running(argv, port=port, log=tmp / "ctxproxy.log", env=env) as proc:
        yield targets.Target(name, f"http://127.0.0.1:{port}{targets.CHAT}", proc.pid)


async def turns(
    pair: list[targets.Target], bodies: list[tuple[str, dict[str, Any]]], rounds: int
) -> dict[str, Any]:
    """CPU µs per request of each target: every body goes to both, one after the other (which
    one first alternates), so both see the same load; each round's CPU is read for both at its
    start and end. The first round warms up and is not counted."""
    spent: dict[str, list[float]] = {t.name: [] for t in pair}
    async with aiohttp.ClientSession() as http:
        for number in range(rounds + 1):
            before = {t.name: cpu_ns(t.pids()) for t in pair}
            for index, (name, body) in enumerate(bodies):
                headers = {**HEADERS, "X-Ctx-Session": name}
                for target in pair if (number + index) % 2 == 0 else pair[::-1]:
                    async with http.post(target.url, json=body, headers=headers) as response:
                        await response.read()
                        assert response.status == 200, response.status
            await asyncio.sleep(0.2)  # the proxies' bookkeeping after the last answers
            if number:
                for t in pair:
                    spent[t.name].append((cpu_ns(t.pids()) - before[t.name]) / len(bodies) / 1e3)
    on, off = (spent[t.name] for t in pair)
    return {
        "cpu_us": {name: sum(values) / len(values) for name, values in spent.items()},
        "round_ratios": [a / b for a, b in zip(on, off, strict=True)],
    }


def cpu_cost(tmp: Path, bodies: list[tuple[str, dict[str, Any]]], *, rounds: int) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    with targets.upstream(tmp) as upstream:
        base = upstream.url.removesuffix("/chat/completions")
        with (proxy_process(tmp / "on", base, "", "recall on") as on,
              proxy_process(tmp / "off", base, RECALL_OFF, "recall off") as off):  # fmt: skip
            measured = asyncio.run(turns([on, off], bodies, rounds))
    cpu = measured["cpu_us"]
    return {"bodies": len(bodies), "rounds": rounds, "cpu_us": cpu,
            "ratio": cpu["recall on"] / cpu["recall off"],
            "median_round_ratio": statistics.median(measured["round_ratios"])}  # fmt: skip


def run(tmp: Path, *, quick: bool) -> dict[str, Any]:
    started = time.monotonic()
    names = trace_names()
    (tmp / "hits").mkdir(parents=True)
    limit = REQUESTS // 2 if quick else REQUESTS
    result, offered = asyncio.run(hit_rate(tmp / "hits", names, limit=limit))
    print(f"  part 1: {json.dumps({k: v for k, v in result.items() if k != 'misses'})}", flush=True)
    bodies = spaced(sorted(offered, key=lambda o: len(json.dumps(o[1]))), 16 if quick else 32)
    result["cpu"] = cpu_cost(tmp / "cpu", bodies, rounds=6 if quick else 24)
    result["seconds"] = time.monotonic() - started
    print(summary(result), flush=True)
    return result


def summary(result: dict[str, Any]) -> str:
    r, cpu = result, result["cpu"]
    return (
        f"  recall by ref {r['ref_hits']}/{r['ref_needles']}, by query "
        f"{r['query_hits']}/{r['query_needles']}; {r['offered']} of {r['requests']} requests "
        f"offered the tool, {r['extra_rounds']} extra rounds, {r['leaks']} leaks\n"
        f"  CPU/request recall on {cpu['cpu_us']['recall on']:,.0f} µs, off "
        f"{cpu['cpu_us']['recall off']:,.0f} µs: {cpu['ratio']:.3f}× (median of rounds "
        f"{cpu['median_round_ratio']:.3f}×; {r['seconds']:.0f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recall")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        result = run(Path(tmp), quick=args.quick)
    for miss in result["misses"]:
        print("  miss:", miss)


if __name__ == "__main__":
    main()
