"""The pipeline alone, in process: µs per `ContextEngine.prepare` (and per record step) for the
small and agentic bodies of the overhead benchmark, one session repeated (steady state).

    .venv/bin/python -m benchmarks.pipeline_micro [--runs 7] [--calls 300] [--profile small]

Best of `--runs` timings of `--calls` calls each (a tenth of them for agentic): the machine is
shared, the minimum is the least disturbed. Every call gets a freshly decoded copy of the body.
`--profile SIZE` prints a cProfile of prepare() on that body instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.engine_rig import make_engine
from benchmarks.payloads import body_for
from proxy.engine.engine import ContextEngine, Prepared
from proxy.engine.pipeline import draft_from_body
from proxy.types import JSON, Turn
from proxy.usage import Usage

SESSION = "micro"
SIZES = ("small", "agentic", "coding")


async def steady_turn(engine: ContextEngine, body: dict[str, Any]) -> Turn:
    """The session's turn after two earlier requests of the same body (decisions, lineage)."""
    for _ in range(2):
        turn = await engine.load_turn("default", SESSION, draft_from_body(body))
        prepared = await engine.prepare(body, turn=turn, api_key=None, recall=True)
        await record(engine, prepared, body)
    turn = await engine.load_turn("default", SESSION, draft_from_body(body))
    return turn


async def record(engine: ContextEngine, prepared: Prepared, body: dict[str, Any]) -> None:
    await engine.persist_outputs(prepared)
    await engine.record(
        prepared, usage=Usage(prompt_tokens=100), completed=True, messages_in=len(body["messages"])
    )


async def best_us(step: Any, *, runs: int, calls: int, raw: bytes) -> float:
    """The fastest of `runs` averages over `calls` awaits of `step(body)`, in µs per call.

    Each call gets its own freshly decoded body, as a server would (no string hash is cached)."""
    best = float("inf")
    for _ in range(runs):
        bodies = [orjson.loads(raw) for _ in range(calls)]
        started = time.process_time()
        for body in bodies:
            await step(body)
        best = min(best, (time.process_time() - started) / calls)
    return best * 1e6


async def measure(size: str, *, runs: int, calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(Path(tmp))
        raw = orjson.dumps(body_for(size, stream=False))
        turn = await steady_turn(engine, orjson.loads(raw))
        prepared = await engine.prepare(orjson.loads(raw), turn=turn, api_key=None, recall=True)

        async def prepare(body: JSON) -> None:  # the turn of this very body, as the server's
            fresh = turn._replace(client=draft_from_body(body))
            await engine.prepare(body, turn=fresh, api_key=None, recall=True)

        async def load(body: JSON) -> None:
            await engine.load_turn("default", SESSION, draft_from_body(body))

        async def recorded(body: JSON) -> None:
            await record(engine, prepared, body)

        steps = {"prepare": prepare, "load_turn": load, "record": recorded}
        return {
            name: await best_us(step, runs=runs, calls=calls, raw=raw)
            for name, step in steps.items()
        }


async def profile(size: str, *, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(Path(tmp))
        raw = orjson.dumps(body_for(size, stream=False))
        turn = await steady_turn(engine, orjson.loads(raw))
        bodies = [orjson.loads(raw) for _ in range(calls)]
        profiler = cProfile.Profile()
        profiler.enable()
        for body in bodies:
            fresh = turn._replace(client=draft_from_body(body))
            await engine.prepare(body, turn=fresh, api_key=None, recall=True)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--profile", choices=SIZES)
    args = parser.parse_args()
    if args.profile:
        asyncio.run(profile(args.profile, calls=args.calls))
        return
    for size in SIZES:
        calls = args.calls if size == "small" else max(args.calls // 10, 10)
        result = asyncio.run(measure(size, runs=args.runs, calls=calls))
        print(f"{size:8} " + "  ".join(f"{k} {v:8.1f} µs" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
