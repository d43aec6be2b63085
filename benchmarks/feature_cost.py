"""Where ctxproxy's extra instructions go: ctxproxy with one feature switched off at a time.

`python -m benchmarks.feature_cost [--quick] [--size small|agentic|coding]` measures, under
callgrind (`benchmarks/instructions.py`), the aiohttp pass-through, ctxproxy as it is, ctxproxy
with each ablation of `benchmarks/ablations.py` applied alone, and with all of them at once, then
prints what each feature costs: instructions per request with it on minus with it off, and that
cost's share of ctxproxy's extra over the pass-through. ctxproxy as it is runs first and last: how
far apart the two are is the noise (a few k at 100 requests, about 1 k at 300), or a sign that
proxy/ changed during the run: it measures the working tree, so when others are editing it, run
it in a clone (`git clone --shared`). ~10 s per measurement.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import instructions
from benchmarks.ablations import ABLATIONS, describe
from benchmarks.common import ROOT
from benchmarks.report_tables import features_table

ALL = "all of the above"


def run(tmp: Path, *, quick: bool, size: str = "small") -> dict[str, Any]:
    """The benchmark section: JSON requests of `size`, one at a time (fewer when `quick`)."""
    if shutil.which("valgrind") is None:
        return {"skipped": "valgrind is not installed"}
    requests = 100 if quick else 300
    measured_revision = revision()

    def measured(label: str, target: str, off: Sequence[str] = ()) -> float:
        where = tmp / label.replace(" ", "-")
        where.mkdir(parents=True, exist_ok=True)
        count = instructions.measure(target, size, False, requests, off=off, tmp=where)
        print(f"  {label}: {count / 1e3:,.0f} k instructions/request", flush=True)
        return count

    floor = measured("passthrough", "passthrough")
    first = measured("ctxproxy", "ctxproxy")
    offs = {name: measured(f"off {name}", "ctxproxy", (name,)) for name in ABLATIONS}
    offs[ALL] = measured(f"off {ALL}", "ctxproxy", tuple(ABLATIONS))
    last = measured("ctxproxy again", "ctxproxy")
    base = (first + last) / 2
    extra = base - floor
    rows = []
    for name, without in offs.items():
        rows.append({
            "feature": name,
            "removes": describe(name) if name in ABLATIONS else "every ablation at once",
            "instructions_off": without,
            "cost": base - without,
            "share": (base - without) / extra if extra else float("nan"),
        })  # fmt: skip
    return {"size": size, "requests": requests, "revision": measured_revision,
            "passthrough": floor, "ctxproxy": base, "noise": abs(first - last),
            "rows": rows}  # fmt: skip


def revision() -> str:
    """The commit measured, and whether proxy/ had uncommitted changes; "unknown" without git."""
    try:
        head, dirty = (
            subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True).stdout
            for argv in (["git", "rev-parse", "--short", "HEAD"],
                         ["git", "status", "--porcelain", "--", "proxy"])
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.strip() + (" with uncommitted changes in proxy/" if dirty.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.feature_cost")
    parser.add_argument("--quick", action="store_true", help="100 requests per measurement")
    parser.add_argument("--size", choices=("small", "agentic", "coding"), default="small")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-features-") as tmp:
        result = run(Path(tmp), quick=args.quick, size=args.size)
    print(features_table({"features": result}))


if __name__ == "__main__":
    main()
