"""Instructions per request under callgrind: a deterministic A/B for performance work.

`python -m benchmarks.instructions [--target ctxproxy|passthrough] [--size small] [--stream]
[--requests 200] [--off NAME[,NAME]]` runs the target under `valgrind --tool=callgrind`
(instrumentation off during start-up and warm-up), sends requests one at a time and prints the
user-space instructions the target executed per request. `--off` runs ctxproxy with features
switched off (`benchmarks/ablations.py`). The count does not depend on what else the machine is
doing, so two revisions can be compared on a shared machine where CPU-time figures move by ±20%.

Caveats: kernel work (system calls, loopback delivery) is not counted, so the ratio between two
targets overstates their CPU-time ratio; OpenSSL's hashing runs a generic code path under
valgrind and counts several times its native cost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import ablations, targets
from benchmarks.common import PYTHON, ROOT, free_port, stop, wait_port
from benchmarks.payloads import SIZES, encoded_bodies

WARM_UP = 50


async def send(url: str, body: bytes, count: int) -> None:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
    async with aiohttp.ClientSession() as http:
        for _ in range(count):
            async with http.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"the target answered {response.status}")


def target_argv(
    name: str, tmp: Path, base: str, port: int, *, off: Sequence[str] = ()
) -> list[str]:
    """The target's command line; `off` (ctxproxy only) names ablations to apply."""
    if name == "ctxproxy":
        config = targets.ctxproxy_config(tmp, base, port)
        serve = ["serve", "--config", str(config), "--log-level", "WARNING"]
        if off:
            return [PYTHON, "-m", "benchmarks.ablations", "--off", ",".join(off), "--", *serve]
        return [PYTHON, "-m", "proxy", *serve]
    if off:
        raise ValueError("ablations apply to ctxproxy only")
    return [PYTHON, "-m", "benchmarks.passthrough", "--port", str(port), "--upstream", base]


def counted(out: Path) -> int:
    """Instructions in the dumps taken on request (not the one written at exit)."""
    total = 0
    for dump in out.parent.glob(out.name + "*"):
        text = dump.read_text(errors="replace")
        if "Program termination" in text[:2000]:
            continue
        for line in text.splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total


def measure(
    name: str,
    size: str,
    stream: bool,
    requests: int,
    *,
    off: Sequence[str] = (),
    tmp: Path | None = None,
) -> float:
    """Instructions per request; `tmp` holds the config and dumps (if None, a fresh directory,
    removed afterwards)."""
    if tmp is None:
        with tempfile.TemporaryDirectory(prefix="bench-instructions-") as fresh:
            return measure(name, size, stream, requests, off=off, tmp=Path(fresh))
    body = encoded_bodies()[(size, stream)]
    with targets.upstream(tmp) as up:
        port = free_port()
        out = tmp / "callgrind.out"
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            *target_argv(name, tmp, up.url.removesuffix("/chat/completions"), port, off=off),
        ]
        env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-fake", "PYTHONHASHSEED": "0"}
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_port(port, 300, proc)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            asyncio.run(send(url, body, WARM_UP))
            pid = str(proc.pid)
            subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
            asyncio.run(send(url, body, requests))
            subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        finally:
            stop(proc)
    return counted(out) / requests


def run(tmp: Path, *, quick: bool) -> dict[str, Any]:
    """The benchmark section: ctxproxy and the pass-through, small, agentic and (unless `quick`)
    coding bodies."""
    if shutil.which("valgrind") is None:
        return {"skipped": "valgrind is not installed"}
    requests = 40 if quick else 100
    rows = []
    for size in ("small", "agentic") if quick else ("small", "agentic", "coding"):
        base = measure("passthrough", size, False, requests)
        mine = measure("ctxproxy", size, False, requests)
        rows += [
            {"size": size, "target": "aiohttp pass-through", "instructions": base},
            {"size": size, "target": "ctxproxy", "instructions": mine, "ratio": mine / base},
        ]
    return {"requests": requests, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--target", choices=("ctxproxy", "passthrough"), default="ctxproxy")
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--off", default="", help="ctxproxy ablations, e.g. pipeline,task")
    args = parser.parse_args()
    try:
        off = ablations.parse_names(args.off)
    except ValueError as exc:
        parser.error(str(exc))
    if off and args.target != "ctxproxy":
        parser.error("--off applies to --target ctxproxy only")
    per_request = measure(args.target, args.size, args.stream, args.requests, off=off)
    mode = "stream" if args.stream else "json"
    without = f" (off: {', '.join(off)})" if off else ""
    print(
        f"{args.target}{without} {args.size} {mode}: "
        f"{per_request / 1e3:,.0f} k instructions/request"
    )


if __name__ == "__main__":
    main()
