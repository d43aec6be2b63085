"""Redis round trips per request on a Redis Cluster against one server, counted three ways.

`python -m benchmarks.cluster_trips [--requests 200] [--delay-ms 20]` runs the store's part of a
chat request (`benchmarks.redis_trips.one_request`: load, prepare, persist outputs, record with
the request's events) on one redis-server, a Sentinel set and a Redis Cluster (three primaries,
three replicas), with the tenant's memory on (the default: a load also reads the facts' version)
and off, and counts:

- sends: writes of a command or a pipeline by the client (`send_packed_command`), per phase;
- in a row: how many of them the request waits for one after the other. Every send is delayed
  by `--delay-ms` (as a network would), and (wall time with the delay - without) / delay is the
  number of waits: sends made at once (a cluster's batches of one call) count once;
- server reads: `total_reads_processed` summed over the primaries (`INFO stats`; a pipeline
  read in one read counts once), the replicas' acknowledgements while idle taken off, and the
  commands the primaries ran (`INFO commandstats`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
import redis.asyncio.connection as aconnection

from benchmarks import targets
from benchmarks.engine_rig import body_of, cycled_messages
from benchmarks.redis_trips import one_request, redis_server
from proxy.adapters.redis.store import RedisStore
from proxy.compaction.compactor import Compactor
from proxy.config import load_settings
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import build_stack
from proxy.server.factories import make_workspace
from proxy.server.observe.events import EventEmitter
from tests.redis_cluster import RedisCluster, SentinelSet

MEMORY_OFF = "\n[tenants.default.memory]\nenabled = false\n"


class Sends:
    """Counts the client's sends (by phase), delaying each by `delay_s`."""

    def __init__(self) -> None:
        self.delay_s = 0.0
        self.phase = "load"
        self.counts: dict[str, int] = {}

    @contextlib.contextmanager
    def watching(self) -> Iterator[Sends]:
        original = aconnection.AbstractConnection.send_packed_command
        sends = self

        async def counted(self, command, check_health=True):  # type: ignore[no-untyped-def]
            sends.counts[sends.phase] = sends.counts.get(sends.phase, 0) + 1
            if sends.delay_s:
                await asyncio.sleep(sends.delay_s)
            return await original(self, command, check_health)

        aconnection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
        try:
            yield self
        finally:
            aconnection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def make_engine(tmp: Path, store: RedisStore, *, memory: bool) -> ContextEngine:
    """`benchmarks.engine_rig.make_engine` on `store`, the tenant's memory on or off."""
    config = targets.ctxproxy_config(tmp, "http://127.0.0.1:9/v1", 9)
    if not memory:
        config.write_text(config.read_text() + MEMORY_OFF)
    settings = load_settings(config, environ={"BENCH_UPSTREAM_KEY": "sk-fake"})
    tenant = settings.tenants["default"]
    assert tenant.memory.enabled is memory
    return ContextEngine(
        sessions=store,
        outputs=store,
        workspace=make_workspace(settings),
        compactor=Compactor(store=store, summarizers={}),
        stacks={"default": build_stack(tenant, settings.upstreams[tenant.upstream])},
        upstreams=settings.upstreams,
    )


class Primaries:
    """`INFO stats` and `INFO commandstats` of the primaries, each on one connection of its own
    (so each reading adds one read and one `info` there)."""

    def __init__(self, ports: list[int]) -> None:
        self._clients = [redis.Redis(port=port) for port in ports]

    def reads(self) -> int:
        return sum(int(c.info("stats")["total_reads_processed"]) for c in self._clients)

    def commands(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for client in self._clients:
            for name, stats in client.info("commandstats").items():
                key = name.removeprefix("cmdstat_")
                total[key] = total.get(key, 0) + int(stats["calls"])
        return total

    def idle_reads_per_s(self) -> float:
        """Reads the primaries serve with no request running (replicas' acknowledgements), by
        the second; this class's own reading taken off."""
        before, started = self.reads(), time.monotonic()
        time.sleep(2.0)
        return (self.reads() - before - len(self._clients)) / (time.monotonic() - started)

    def close(self) -> None:
        for client in self._clients:
            client.close()


async def run_requests(
    engine: ContextEngine, events: EventEmitter, sends: Sends, *, requests: int
) -> float:
    """Wall seconds a request, `requests` of them in turn on 10 sessions."""
    body = body_of(cycled_messages(100))
    started = time.perf_counter()
    for index in range(requests):
        await timed_request(engine, events, sends, body, f"r{index % 10}")
    return (time.perf_counter() - started) / requests


async def timed_request(
    engine: ContextEngine, events: EventEmitter, sends: Sends, body: dict[str, Any], session: str
) -> None:
    """`one_request`, its sends counted by phase: the load, then the rest (persist, record)."""
    sends.phase = "load"
    original = engine.prepare

    async def prepare(*args: Any, **kwargs: Any) -> Any:
        sends.phase = "record"
        return await original(*args, **kwargs)

    engine.prepare = prepare  # type: ignore[method-assign]
    try:
        await one_request(engine, events, body, session)
    finally:
        del engine.prepare


async def measure(
    tmp: Path, url: str, ports: list[int], *, memory: bool, requests: int, delay_s: float
) -> dict[str, Any]:
    store = RedisStore(url, key_prefix="trips:", session_ttl_s=3600, op_timeout_s=2.0)
    engine = make_engine(tmp, store, memory=memory)
    events = EventEmitter(lambda: store)
    sends, primaries = Sends(), Primaries(ports)
    with sends.watching():
        await run_requests(engine, events, sends, requests=10)  # connections, scripts, slot map
        idle = primaries.idle_reads_per_s()
        sends.counts.clear()
        reads, commands, started = primaries.reads(), primaries.commands(), time.monotonic()
        wall = await run_requests(engine, events, sends, requests=requests)
        elapsed = time.monotonic() - started
        reads = primaries.reads() - reads - 2 * len(ports) - round(idle * elapsed)
        ran = primaries.commands()
        counts = dict(sends.counts)
        sends.delay_s = delay_s
        delayed = await run_requests(engine, events, sends, requests=max(20, requests // 10))
    await store.close()
    primaries.close()
    ran = {k: v - commands.get(k, 0) for k, v in ran.items() if not k.startswith("info")}
    return {
        "sends": {phase: n / requests for phase, n in counts.items()},
        "in_a_row": (delayed - wall) / delay_s,
        "server_reads": reads / requests,
        "commands": sum(ran.values()) / requests,
    }


async def run(tmp: Path, *, requests: int, delay_s: float) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    with redis_server() as url:
        if url is None:
            raise SystemExit("redis-server not found")
        cluster, sentinels = RedisCluster(), SentinelSet()
        try:
            cluster.start()
            sentinels.start()
            stores = {
                "one Redis": (url, [int(url.rsplit(":", 1)[1].split("/")[0])]),
                "Sentinel": (sentinels.url, [sentinels.primary.port]),
                "Cluster": (cluster.url, [n.port for n in cluster.primaries()]),
            }
            for memory in (True, False):
                for name, (where, ports) in stores.items():
                    found[f"{name}, memory {'on' if memory else 'off'}"] = await measure(
                        tmp, where, ports, memory=memory, requests=requests, delay_s=delay_s
                    )
        finally:
            cluster.stop()
            sentinels.stop()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-trips-") as tmp:
        found = asyncio.run(run(Path(tmp), requests=args.requests, delay_s=args.delay_ms / 1e3))
    print("| store | sends (load + record) | in a row | server reads | commands |")
    print("|---|---|---|---|---|")
    for name, row in found.items():
        load, record = row["sends"].get("load", 0.0), row["sends"].get("record", 0.0)
        print(
            f"| {name} | {load + record:.2f} ({load:.2f} + {record:.2f}) | "
            f"{row['in_a_row']:.2f} | {row['server_reads']:.2f} | {row['commands']:.2f} |"
        )


if __name__ == "__main__":
    main()
