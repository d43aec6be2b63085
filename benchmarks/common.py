"""Process, port and /proc helpers shared by the benchmark sections."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The recorded sessions: `$CTXPROXY_TRACES` (as for the tests), else ../shared/traces.
TRACES = Path(os.environ.get("CTXPROXY_TRACES") or ROOT.parent / "shared" / "traces")
PYTHON = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(
    port: int, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:4]} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {timeout}s")


@contextlib.contextmanager
def running(
    argv: Sequence[str],
    *,
    port: int,
    log: Path,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """A server subprocess (stdout+stderr to `log`), ready when `port` accepts connections."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        try:
            wait_port(port, timeout, proc)
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (nginx workers, uvicorn workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of `pids` from /proc/<pid>/stat, in seconds."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


def rss_mib(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = Path("/proc/meminfo").read_text().split()[1]
    return (
        f"{cpu}, {os.cpu_count()} cores, {int(mem) // 1024 // 1024} GiB RAM, "
        f"Linux {os.uname().release}, Python {sys.version.split()[0]}"
    )
