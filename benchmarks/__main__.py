"""`python -m benchmarks [--quick] [--only overhead,scaling,...] [--no-litellm] [--keep]`.

Runs the sections in order, writes benchmarks/results/latest.{md,json,png}. With `--keep`, the
sections not run are carried over from the existing latest.json (and marked so in the report).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import (
    cache_share,
    cost,
    feature_cost,
    instructions,
    memory,
    overhead,
    recall,
    redis_trips,
    report,
    savings,
    scaling,
)
from benchmarks.common import machine

RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = (
    "overhead",
    "scaling",
    "redis",
    "savings",
    "cache",
    "memory",
    "instructions",
    "features",
    "cost",
    "recall",
)


def run_section(name: str, tmp: Path, args: argparse.Namespace) -> Any:
    quick = args.quick
    if name == "overhead":
        return overhead.run(tmp, quick=quick, with_litellm=not args.no_litellm)
    if name == "scaling":
        return asyncio.run(scaling.run(tmp, quick=quick))
    if name == "redis":
        return asyncio.run(redis_trips.run(tmp))
    if name == "savings":
        return asyncio.run(savings.run(tmp, quick=quick))
    if name == "cache":
        return asyncio.run(cache_share.run(tmp, quick=quick))
    if name == "instructions":
        return instructions.run(tmp, quick=quick)
    if name == "features":
        return feature_cost.run(tmp, quick=quick)
    if name == "cost":
        return cost.run(tmp, quick=quick)
    if name == "recall":
        return recall.run(tmp, quick=quick)
    return memory.run(tmp, quick=quick, minutes=args.memory_minutes)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="a smaller run (~2 minutes)")
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument(
        "--memory-minutes",
        type=float,
        default=None,
        help="mixed load per target in the memory section (default 1)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "latest")
    parser.add_argument(
        "--keep", action="store_true", help="keep the sections not run from the existing <out>.json"
    )
    args = parser.parse_args()
    started = time.monotonic()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    results: dict[str, Any] = {
        "machine": machine(),
        "mode": "quick" if args.quick else "full",
        "started": now,
    }
    previous = args.out.with_suffix(".json")
    if args.keep and previous.exists():
        kept = json.loads(previous.read_text())
        when = {**{name: kept.get("started", "?") for name in SECTIONS}, **kept.get("kept", {})}
        results["kept"] = {
            name: when[name]
            for name in SECTIONS
            if name in kept and name not in args.only.split(",")
        }
        results.update({name: kept[name] for name in results["kept"]})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.only.split(","):
        print(f"== {name}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
            results[name] = run_section(name, Path(tmp), args)
        # After each section: a run that fails later keeps what it measured (`--keep`).
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str))
    results["seconds"] = time.monotonic() - started
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str))
    args.out.with_suffix(".md").write_text(report.markdown(results))
    plotted = report.plot(results, args.out.with_suffix(".png"))
    print(
        f"wrote {args.out}.md"
        + (" and .png" if plotted else " (no plot: pip install -e '.[bench]')")
    )


if __name__ == "__main__":
    main()
