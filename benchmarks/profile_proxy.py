"""Where a proxy spends its CPU: py-spy samples the real subprocess under load.

`python -m benchmarks.profile_proxy [--target ctxproxy|passthrough] [--size small] [--stream]
[--seconds 15] [--syscalls]` prints the top functions by own time and by inclusive time (py-spy
"raw" collapsed stacks, aggregated here), or with `--syscalls` the system calls per request
(`strace -c`), so that ctxproxy can be read side by side with the bare pass-through.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from benchmarks import targets
from benchmarks.overhead import Cell, LoadGen
from benchmarks.targets import Target


def aggregate(raw: Path, top: int) -> str:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1]
            for f in stack.split(";")
            if f
        ]
        samples = int(count)
        total += samples
        if frames:
            own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    lines = [f"{total} samples", "-- own time --"]
    lines += [f"{n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    lines += ["-- inclusive --"]
    lines += [f"{n / total:6.1%}  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def per_request(summary: str, requests: int) -> str:
    """`strace -c` rows as calls per request."""
    rows = []
    for line in summary.splitlines():
        parts = line.split()
        if len(parts) >= 5 and re.fullmatch(r"[\d.]+", parts[0]) and parts[-1] != "total":
            rows.append((int(parts[3]) / max(requests, 1), parts[-1]))
    rows.sort(reverse=True)
    return "\n".join(f"{calls:8.2f}  {name}" for calls, name in rows)


@contextlib.contextmanager
def proxy_target(name: str, tmp: Path, base: str) -> Iterator[Target]:
    start = targets.ctxproxy if name == "ctxproxy" else targets.passthrough
    with start(tmp, base) as found:
        yield found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", choices=("ctxproxy", "passthrough"), default="ctxproxy")
    parser.add_argument("--size", default="agentic")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--syscalls", action="store_true", help="strace -c instead of py-spy")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    cell = Cell(args.size, args.stream, args.concurrency)
    with (
        targets.upstream(tmp) as up,
        proxy_target(args.target, tmp, up.url.removesuffix("/chat/completions")) as proxy,
    ):
        assert proxy.pid is not None
        gen = LoadGen()
        result: dict[str, object] = {}
        load = threading.Thread(
            target=lambda: result.update(gen.run(proxy.url, cell, args.seconds + 2))
        )
        load.start()
        raw = tmp / "profile.txt"
        if args.syscalls:
            argv = ["strace", "-c", "-f", "-o", str(raw), "-p", str(proxy.pid)]
        else:
            spy = shutil.which("py-spy") or str(Path(__file__).parents[1] / ".venv/bin/py-spy")
            argv = [
                spy,
                "record",
                "--pid",
                str(proxy.pid),
                "--format",
                "raw",
                "--rate",
                "1000",
                "--output",
                str(raw),
                "--nonblocking",
                "--duration",
                str(int(args.seconds)),
            ]
        tracer = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        load.join()
        if args.syscalls:
            tracer.terminate()
        _, err = tracer.communicate(timeout=60)
        gen.close()
        if not raw.exists():
            raise SystemExit(f"{argv[0]} failed: {err[-800:]}")
    if args.syscalls:
        requests = int(str(result.get("requests", 0)))
        print(f"{requests} requests; system calls per request:")
        print(per_request(raw.read_text(), requests))
    else:
        print(f"{result.get('requests', 0)} requests in {args.seconds + 2:.0f} s of load")
        print(aggregate(raw, args.top))


if __name__ == "__main__":
    main()
