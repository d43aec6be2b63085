"""Section 5, memory: RSS of ctxproxy and of the bare pass-through (baseline) after warm-up,
after a stretch of mixed load, and at peak while relaying a 20 MiB stream to a slow reader."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchmarks import targets
from benchmarks.common import rss_mib
from benchmarks.overhead import Cell, LoadGen
from benchmarks.targets import Target

BIG = orjson.dumps(
    {
        "model": "bench-big-stream",
        "stream": True,
        "messages": [{"role": "user", "content": "stream a lot"}],
    }
)


async def slow_read(
    url: str, pids: list[int], *, chunk: int = 65_536, pause_s: float = 0.005
) -> dict[str, float]:
    """Relay the big stream to a reader that takes `chunk` bytes per `pause_s`; sample RSS."""
    before, peak, received = rss_mib(pids), 0.0, 0
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
    started = time.perf_counter()
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=BIG, headers=headers) as response,
    ):
        while data := await response.content.read(chunk):
            received += len(data)
            peak = max(peak, rss_mib(pids))
            await asyncio.sleep(pause_s)
    return {
        "received_mib": received / 2**20,
        "seconds": time.perf_counter() - started,
        "rss_before_mib": before,
        "rss_peak_mib": peak,
        "peak_growth_mib": peak - before,
    }


def mixed_load(
    gen: LoadGen,
    target: Target,
    seconds: float,
    sizes: tuple[str, ...] = ("small", "agentic", "large"),
) -> int:
    cells = itertools.cycle(
        [Cell(s, st, c) for s in sizes for st in (False, True) for c in (1, 16)]
    )
    deadline, done = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        done += gen.run(target.url, next(cells), 0.5)["requests"]
    return done


def measure(gen: LoadGen, target: Target, seconds: float) -> dict[str, Any]:
    """RSS after warm-up, during a slow stream, then once a minute of mixed load (a leak shows as
    a slope in `rss_by_minute_mib`)."""
    pids = target.pids()
    mixed_load(gen, target, 5.0, ("small", "agentic"))
    warm = rss_mib(pids)
    stream = asyncio.run(slow_read(target.url, pids))  # before large bodies grow the heap
    requests, timeline, left = 0, [], seconds
    while left > 0:
        requests += mixed_load(gen, target, min(60.0, left))
        timeline.append(rss_mib(pids))
        left -= 60.0
    return {
        "target": target.name,
        "rss_warm_mib": warm,
        "rss_after_load_mib": timeline[-1],
        "rss_by_minute_mib": timeline,
        "load_s": seconds,
        "load_requests": requests,
        **stream,
    }


def run(tmp: Path, *, quick: bool, minutes: float | None = None) -> dict[str, Any]:
    seconds = minutes * 60 if minutes else 10.0 if quick else 60.0
    with contextlib.ExitStack() as stack:
        up = stack.enter_context(targets.upstream(tmp))
        base = up.url.removesuffix("/chat/completions")
        found = [
            stack.enter_context(targets.passthrough(tmp, base)),
            stack.enter_context(targets.ctxproxy(tmp, base)),
        ]
        gen = LoadGen()
        try:
            rows = [measure(gen, target, seconds) for target in found]
        finally:
            gen.close()
    for row in rows:
        print(
            f"  memory {row['target']}: warm {row['rss_warm_mib']:.0f} MiB, after load "
            f"{row['rss_after_load_mib']:.0f} MiB, stream peak +{row['peak_growth_mib']:.1f}",
            flush=True,
        )
    return {"rows": rows}
