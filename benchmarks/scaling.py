"""Section 2, pipeline cost at scale: the engine alone on histories of 10 … 10,000 messages,
repeated requests of one session, and Redis round trips per request against a real Redis."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.engine_rig import body_of, cycled_messages, make_engine, one_request

SIZES = (10, 100, 1_000, 10_000)


async def time_history(tmp: Path, count: int, *, budget_s: float) -> dict[str, Any]:
    """Median time per request for a history of `count` messages, each in a new session, and
    the same history sent again in its session (state replayed)."""
    engine = make_engine(tmp)
    body = body_of(cycled_messages(count))
    chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
    fresh, again = [], []
    deadline = time.perf_counter() + budget_s
    index = 0
    while (time.perf_counter() < deadline or index < 3) and index < 200:
        index += 1
        fresh.append(await one_request(engine, body, f"s{count}-{index}"))
        again.append(await one_request(engine, body, f"s{count}-{index}"))
    return {
        "messages": len(body["messages"]),
        "chars": chars,
        "runs": index,
        "fresh_ms": statistics.median(fresh) * 1e3,
        "repeat_ms": statistics.median(again) * 1e3,
    }


async def time_growing_session(tmp: Path, *, requests: int) -> dict[str, Any]:
    """One session growing turn by turn: time per request divided by history length should
    stay flat (nothing quadratic in the number of requests)."""
    engine = make_engine(tmp)
    history = cycled_messages(requests * 4)
    per_message = []
    for turn in range(1, requests + 1):
        body = body_of(history[: turn * 4])
        seconds = await one_request(engine, body, "growing")
        per_message.append(seconds / len(body["messages"]) * 1e6)
    tenth = max(1, requests // 10)
    return {
        "requests": requests,
        "first_us_per_msg": statistics.median(per_message[:tenth]),
        "last_us_per_msg": statistics.median(per_message[-tenth:]),
    }


async def run(tmp: Path, *, quick: bool) -> dict[str, Any]:
    budget = 1.0 if quick else 3.0
    rows = [await time_history(tmp, count, budget_s=budget) for count in SIZES]
    for row in rows:
        row["us_per_msg"] = row["fresh_ms"] * 1e3 / row["messages"]
        print(f"  pipeline {row['messages']} msgs: {row['fresh_ms']:.2f} ms", flush=True)
    growing = await time_growing_session(tmp, requests=100 if quick else 300)
    return {"sizes": rows, "growing": growing}
