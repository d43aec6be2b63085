"""Section 2c: requests per second with 1 and 2 workers (`ctxproxy serve --workers N`) on the
same Redis. `python -m benchmarks.workers [--duration S] [--rounds N] [--concurrency C]`.

One redis-server and the fast fake upstream are started once; ctxproxy is started with 1, then
2 workers, the two taking turns for `rounds` rounds, each loaded with small non-streamed
requests on `concurrency` keep-alive connections for `duration` seconds. The load generator is
`wrk` (C, one thread) when installed, else `benchmarks.loadgen` (Python: on 2 cores it cannot
load two workers); it runs pinned to the last core with `taskset`, as do the upstream and Redis,
and ctxproxy's processes are pinned to the other cores... unless there are only 2: then ctxproxy
may use both. Figures: requests/s, the proxy's CPU per request (all its processes), the ratio,
and the machine's load average (other work on a shared machine takes cores too).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import targets
from benchmarks.common import PYTHON, cpu_seconds, free_port, machine, running
from benchmarks.overhead import Cell, LoadGen, Sample
from benchmarks.payloads import encoded_bodies
from benchmarks.redis_trips import redis_server
from benchmarks.targets import CHAT, Target


@contextlib.contextmanager
def ctxproxy_workers(tmp: Path, base: str, url: str, workers: int) -> Iterator[Target]:
    port = free_port()
    config = targets.ctxproxy_config(tmp, base, port)
    argv = [
        PYTHON,
        "-m",
        "proxy",
        "serve",
        "--config",
        str(config),
        "--log-level",
        "WARNING",
        "--workers",
        str(workers),
    ]
    env = {"BENCH_UPSTREAM_KEY": "sk-fake", "CTXPROXY_STORE_URL": url}
    with running(argv, port=port, log=tmp / f"ctxproxy-{workers}.log", env=env) as proc:
        yield Target(f"{workers} worker(s)", f"http://127.0.0.1:{port}{CHAT}", proc.pid)


def pin(pid: int, cores: str) -> None:
    """Pin a process (and its threads) to `cores` with taskset, when there is one."""
    binary = shutil.which("taskset")
    if binary:
        os.system(f"{binary} -a -p -c {cores} {pid} >/dev/null 2>&1")


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
local file = io.open("{body}", "rb")
wrk.body = file:read("*a")
file:close()
"""


class Wrk:
    """`wrk` as the load generator: one thread, pinned to `core`."""

    def __init__(self, tmp: Path, core: str) -> None:
        body = tmp / "body.json"
        body.write_bytes(encoded_bodies()[("small", False)])
        self.script = tmp / "post.lua"
        self.script.write_text(WRK_SCRIPT.format(body=body))
        self.core = core

    def run(self, url: str, concurrency: int, duration: float) -> dict[str, Any]:
        argv = [
            "taskset",
            "-c",
            self.core,
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{max(1, round(duration))}s",
            "-s",
            str(self.script),
            url,
        ]
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        requests = int(re.search(r"(\d+) requests in", out)[1])  # type: ignore[index]
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        return {
            "requests": requests,
            "errors": int(errors[1]) if errors else 0,
            "elapsed": max(1, round(duration)),
            "latencies": [],
            "ttfbs": [],
        }


def run(tmp: Path, *, duration: float, rounds: int, concurrency: int) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    last = str(cores - 1)
    proxy_cores = f"0-{cores - 2}" if cores > 2 else f"0-{cores - 1}"
    cell = Cell("small", False, concurrency)
    use_wrk = bool(shutil.which("wrk") and shutil.which("taskset"))
    with redis_server() as url, targets.upstream(tmp) as up:
        if url is None:
            return {"skipped": "redis-server not found"}
        gen = None if use_wrk else LoadGen()
        wrk = Wrk(tmp, last) if use_wrk else None
        if gen is not None:
            pin(gen.proc.pid, last)
        assert up.pid is not None
        pin(up.pid, last)
        base = up.url.removesuffix("/chat/completions")
        samples = {1: Sample(), 2: Sample()}

        def load(target_url: str, seconds: float) -> dict[str, Any]:
            if wrk is not None:
                return wrk.run(target_url, concurrency, seconds)
            assert gen is not None
            return gen.run(target_url, cell, seconds)

        try:
            for _ in range(rounds):
                for workers in (1, 2):
                    with ctxproxy_workers(tmp, base, url, workers) as target:
                        load(target.url, 1.0)  # warm-up: connections, memos
                        pids = target.pids()
                        for pid in pids:
                            pin(pid, proxy_cores)
                        before = cpu_seconds(pids)
                        result = load(target.url, duration)
                        samples[workers].add(result, cpu_seconds(pids) - before, 0.0)
        finally:
            if gen is not None:
                gen.close()
    one, two = samples[1].summary(), samples[2].summary()
    return {
        "machine": machine(),
        "cell": f"small, not streamed, c={concurrency}",
        "load_generator": "wrk" if use_wrk else "benchmarks.loadgen",
        "duration_s": duration,
        "rounds": rounds,
        "load_average": os.getloadavg(),
        "one_worker": {k: one[k] for k in ("requests", "errors", "rps", "cpu_us")},
        "two_workers": {k: two[k] for k in ("requests", "errors", "rps", "cpu_us")},
        "ratio": two["rps"] / one["rps"] if one["rps"] else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workers")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        result = run(
            Path(tmp), duration=args.duration, rounds=args.rounds, concurrency=args.concurrency
        )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
