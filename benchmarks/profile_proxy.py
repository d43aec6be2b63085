"""Where ctxproxy spends its CPU: py-spy samples the real subprocess under load.

`python -m benchmarks.profile_proxy [--size agentic] [--seconds 15]` prints the top functions by
own time and by inclusive time (py-spy "raw" collapsed stacks, aggregated here).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from benchmarks import targets
from benchmarks.overhead import Cell, LoadGen


def aggregate(raw: Path, top: int) -> str:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1]
                  for f in stack.split(";") if f]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="agentic")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(__file__).parents[1] / ".venv" / "bin" / "py-spy")
    tmp = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    with targets.upstream(tmp) as up, targets.ctxproxy(
            tmp, up.url.removesuffix("/chat/completions")) as proxy:
        gen = LoadGen()
        load = threading.Thread(
            target=gen.run, args=(proxy.url, Cell(args.size, False, 4), args.seconds + 2))
        load.start()
        raw = tmp / "profile.txt"
        done = subprocess.run([spy, "record", "--pid", str(proxy.pid),
                               "--duration", str(int(args.seconds)), "--format", "raw",
                               "--output", str(raw), "--nonblocking"],
                       check=False, capture_output=True, text=True)
        if not raw.exists():
            raise SystemExit(f"py-spy failed: {done.stderr[-800:]}")
        load.join()
        gen.close()
    print(aggregate(raw, args.top))


if __name__ == "__main__":
    main()
