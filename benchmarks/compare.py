"""A quick A/B of ctxproxy against the bare pass-through, for performance work.

`python -m benchmarks.compare [--sizes small,agentic,coding] [--levels 1,16] [--rounds 4]
[--duration 1]` runs the overhead section's cells for direct, the pass-through and ctxproxy only,
interleaved, and prints ctxproxy's CPU per request over the pass-through's and its added TTFB at
c=1 — the figures of the targets, without nginx and LiteLLM.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import statistics
import tempfile
from pathlib import Path

from benchmarks import targets
from benchmarks.overhead import Cell, LoadGen, run_cells, warm_up
from benchmarks.payloads import SIZES
from benchmarks.report_tables import ratios
from benchmarks.targets import Target


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare")
    parser.add_argument("--sizes", default="small,agentic")
    parser.add_argument("--levels", default="1,16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=0.8)
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    if unknown := sorted(set(sizes) - set(SIZES)):
        parser.error(f"unknown sizes {', '.join(unknown)} (known: {', '.join(SIZES)})")
    levels = [int(c) for c in args.levels.split(",")]
    cells = [Cell(s, st, c) for s, st, c in itertools.product(sizes, (False, True), levels)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    with contextlib.ExitStack() as stack:
        up = stack.enter_context(targets.upstream(tmp))
        base = up.url.removesuffix("/chat/completions")
        found = [
            Target("direct", up.url, None),
            stack.enter_context(targets.passthrough(tmp, base)),
            stack.enter_context(targets.ctxproxy(tmp, base)),
        ]
        gen = LoadGen()
        try:
            warm_up(gen, found, sizes)
            rows = run_cells(gen, up, found, cells, rounds=args.rounds, duration=args.duration)
        finally:
            gen.close()
    for size in sizes:
        cpu = ratios(rows, "cpu_us", "ctxproxy", "aiohttp pass-through", size=size)
        print(
            f"{size}: CPU ratio median {statistics.median(cpu):.2f}x "
            f"cells {', '.join(f'{r:.2f}' for r in cpu)}"
        )
    for row in rows:
        if row["target"] != "direct" and row["stream"] and row["concurrency"] == 1:
            direct = next(
                r
                for r in rows
                if r["target"] == "direct"
                and r["stream"]
                and r["concurrency"] == 1
                and r["size"] == row["size"]
            )
            print(
                f"{row['size']} {row['target']}: added TTFB p50 at c=1 "
                f"{row['ttfb_p50_ms'] - direct['ttfb_p50_ms']:.2f} ms"
            )


if __name__ == "__main__":
    main()
