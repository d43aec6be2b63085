"""Section 1, proxy overhead: every target on every cell, interleaved (A B C … A B C …).

A cell is (size, stream, concurrency). For each round, each target gets the same load for the
same duration from one load-generator process; the proxy's CPU time is read from /proc around it.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchmarks import targets
from benchmarks.common import PYTHON, ROOT, cpu_seconds, percentile
from benchmarks.targets import Target


@dataclass
class Cell:
    size: str
    stream: bool
    concurrency: int


@dataclass
class Sample:
    """Everything measured for one target on one cell, summed over the rounds."""

    requests: int = 0
    errors: int = 0
    elapsed: float = 0.0
    cpu: float = 0.0
    upstream_cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)
    ttfbs: list[float] = field(default_factory=list)

    def add(self, result: dict[str, Any], cpu: float, upstream_cpu: float) -> None:
        self.requests += result["requests"]
        self.errors += result["errors"]
        self.elapsed += result["elapsed"]
        self.cpu += cpu
        self.upstream_cpu += upstream_cpu
        self.latencies += result["latencies"]
        self.ttfbs += result["ttfbs"]

    def summary(self) -> dict[str, float]:
        n = max(self.requests, 1)
        return {
            "requests": self.requests,
            "errors": self.errors,
            "rps": self.requests / self.elapsed if self.elapsed else 0.0,
            "p50_ms": percentile(self.latencies, 0.5) * 1e3,
            "p99_ms": percentile(self.latencies, 0.99) * 1e3,
            "ttfb_p50_ms": percentile(self.ttfbs, 0.5) * 1e3,
            "ttfb_p99_ms": percentile(self.ttfbs, 0.99) * 1e3,
            "cpu_us": self.cpu / n * 1e6,
            "upstream_cpu_share": self.upstream_cpu / self.elapsed if self.elapsed else 0.0,
        }


class LoadGen:
    """The load-generator subprocess, driven one JSON line at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "benchmarks.loadgen"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the load generator exited")
        return dict(orjson.loads(line))

    def run(self, url: str, cell: Cell, duration: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        command = {
            "url": url,
            "size": cell.size,
            "stream": cell.stream,
            "concurrency": cell.concurrency,
            "duration": duration,
        }
        self.proc.stdin.write(orjson.dumps(command) + b"\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def measure(
    gen: LoadGen, target: Target, upstream: Target, cell: Cell, duration: float
) -> tuple[dict[str, Any], float, float]:
    """One run; (result, proxy CPU s, upstream CPU s)."""
    pids, up_pids = target.pids(), upstream.pids()
    cpu0, up0 = cpu_seconds(pids), cpu_seconds(up_pids)
    result = gen.run(target.url, cell, duration)
    return result, cpu_seconds(pids) - cpu0, cpu_seconds(up_pids) - up0


def cells_for(quick: bool) -> list[Cell]:
    """Every size and mode at c = 1, 16, 64; coding at 1 and 16 only; `quick`: no large, no
    coding, no c = 64."""
    sizes = ("small", "agentic") if quick else ("small", "agentic", "large")
    levels = (1, 16) if quick else (1, 16, 64)
    cells = [Cell(s, st, c) for s, st, c in itertools.product(sizes, (False, True), levels)]
    if not quick:
        cells += [Cell("coding", st, c) for st, c in itertools.product((False, True), (1, 16))]
    return cells


@contextlib.contextmanager
def all_targets(tmp: Path, *, with_litellm: bool) -> Iterator[tuple[Target, list[Target]]]:
    """The upstream, then every available target in front of it (direct first)."""
    with contextlib.ExitStack() as stack:
        up = stack.enter_context(targets.upstream(tmp))
        base = up.url.removesuffix("/chat/completions")
        port = int(base.split(":")[2].split("/")[0])
        found = [
            Target("direct", up.url, None),
            stack.enter_context(targets.passthrough(tmp, base)),
            stack.enter_context(targets.nginx(tmp, port)),
            stack.enter_context(targets.ctxproxy(tmp, base)),
            stack.enter_context(targets.ctxproxy_redis(tmp, base)),
        ]
        if with_litellm:
            found.append(stack.enter_context(targets.litellm(tmp, base)))
        yield up, [t for t in found if t is not None]


def run_cells(
    gen: LoadGen,
    up: Target,
    found: list[Target],
    cells: list[Cell],
    *,
    rounds: int,
    duration: float,
) -> list[dict[str, Any]]:
    rows = []
    for cell in cells:
        samples = {t.name: Sample() for t in found}
        for _ in range(rounds):
            for target in found:
                samples[target.name].add(*measure(gen, target, up, cell, duration))
        for name, sample in samples.items():
            rows.append(
                {
                    "size": cell.size,
                    "stream": cell.stream,
                    "concurrency": cell.concurrency,
                    "target": name,
                    **sample.summary(),
                }
            )
        print(
            f"  overhead {cell}: "
            + ", ".join(
                f"{r['target']} {r['rps']:.0f}/s {r['cpu_us']:.0f}us" for r in rows[-len(found) :]
            ),
            flush=True,
        )
    return rows


def warm_up(gen: LoadGen, found: list[Target], sizes: Sequence[str]) -> None:
    for target in found:
        for size in sizes:
            gen.run(target.url, Cell(size, False, 2), 0.3)
            gen.run(target.url, Cell(size, True, 2), 0.2)


def run(tmp: Path, *, quick: bool, with_litellm: bool = True) -> dict[str, Any]:
    duration, rounds = (0.5, 2) if quick else (1.2, 2)
    with all_targets(tmp, with_litellm=with_litellm) as (up, found):
        gen = LoadGen()
        try:
            cells = cells_for(quick)
            warm_up(gen, found, list(dict.fromkeys(c.size for c in cells)))
            ceiling = run_cells(
                gen,
                up,
                found[:1],
                [Cell("small", False, 16), Cell("small", False, 64)],
                rounds=1,
                duration=1.0,
            )
            rows = run_cells(gen, up, found, cells, rounds=rounds, duration=duration)
        finally:
            gen.close()
    return {
        "ceiling": ceiling,
        "rows": rows,
        "targets": [t.name for t in found],
        "duration_s": duration,
        "rounds": rounds,
    }
