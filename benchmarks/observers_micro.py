"""CPU of the after-request observers, in process: µs per call, best of N rounds.

`python -m benchmarks.observers_micro [--rounds 7] [--calls 2000]` builds a real `Trace` (the
`small` and `agentic` bodies of the overhead benchmark through a real `ContextEngine`, so the stage
reports are what a request really carries) and times `Metrics.on_request`, `request_event`,
`EventEmitter.entries` and `notify` with the metrics observer.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchmarks.engine_rig import make_engine
from benchmarks.payloads import body_for
from proxy.adapters.memory.store import MemoryStore
from proxy.engine.pipeline import draft_from_body
from proxy.server.observe.events import EventEmitter, request_event
from proxy.server.observe.metrics import Metrics
from proxy.server.observe.trace import Trace, notify
from proxy.server.relay import Relayed
from proxy.usage import Usage


async def make_trace(tmp: Path, size: str, *, stream: bool) -> Trace:
    """The trace of one `size` request answered with usage (and a first byte when streamed)."""
    engine = make_engine(tmp)
    body = body_for(size, stream=stream)
    turn = await engine.load_turn("default", f"bench-{size}", draft_from_body(body))
    prepared = await engine.prepare(body, turn=turn, api_key=None, recall=True)
    usage = Usage(prompt_tokens=1234, completion_tokens=56, cached_tokens=1024)
    relayed = Relayed(usage=usage, completed=True, first_byte_s=0.012 if stream else None)
    return Trace(
        stream=stream, status=200, prepared=prepared, relayed=relayed,
        messages_in=len(body["messages"]), prepare_s=0.000412, upstream_s=0.0231, bytes_out=2345,
    )  # fmt: skip


async def best_us(call: Callable[[], Awaitable[object]], *, rounds: int, calls: int) -> float:
    """The fastest round's mean CPU µs per call (CPU time: the machine is shared)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            await call()
        best = min(best, (time.process_time() - started) / calls)
    return best * 1e6


async def sync(value: object) -> object:
    return value


async def measure(trace: Trace, *, rounds: int, calls: int) -> dict[str, float]:
    metrics = Metrics()
    store = MemoryStore()  # events are a bounded ring: no growth over the rounds
    emitter = EventEmitter(lambda: store)
    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "Metrics.on_request": lambda: metrics.on_request(trace),
        "request_event": lambda: sync(request_event(trace, now=1.7e9)),
        "EventEmitter.entries": lambda: sync(emitter.entries(trace)),
        "notify (metrics)": lambda: notify([metrics], trace),
    }
    return {name: await best_us(call, rounds=rounds, calls=calls) for name, call in cases.items()}


async def run(rounds: int, calls: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-observers-"))
    for size in ("small", "agentic"):
        for stream in (False, True):
            trace = await make_trace(tmp, size, stream=stream)
            label = f"{size}{' stream' if stream else ''}"
            for name, us in (await measure(trace, rounds=rounds, calls=calls)).items():
                print(f"{label:<15} {name:<24} {us:7.2f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.observers_micro")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.calls))


if __name__ == "__main__":
    main()
