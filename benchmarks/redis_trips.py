"""Section 2b: Redis round trips, commands and CPU per request, on each kind of store.

A request is what the proxy asks of the store for one chat request: load the state, prepare,
persist outputs, and record the outcome with the request's events (`EventEmitter.entries`), as
the after-work does. Round trips are counted at the client (each `send_packed_command` is one write
of a command or of a whole pipeline); commands at the server (`INFO commandstats` delta, summed
over a cluster's nodes); CPU is this process's (the engine and the store's client), per request.
Stores: the embedded one, one redis-server, a Sentinel set (primary, replica, three sentinels)
and a Redis Cluster (three primaries, three replicas), all on loopback.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
import redis.asyncio.connection as aconnection

from benchmarks.common import free_port, stop, wait_port
from benchmarks.engine_rig import body_of, cycled_messages, make_engine
from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.redis.store import RedisStore
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import draft_from_body
from proxy.server.observe.events import EventEmitter
from proxy.server.observe.trace import Trace
from proxy.server.relay import Relayed
from proxy.usage import Usage
from tests.redis_cluster import RedisCluster, SentinelSet


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port, workdir = free_port(), tempfile.mkdtemp(prefix="bench-redis-")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, 10, proc)  # type: ignore[arg-type]
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)  # type: ignore[arg-type]


@contextlib.contextmanager
def counted_round_trips() -> Iterator[list[int]]:
    counter = [0]
    original = aconnection.AbstractConnection.send_packed_command

    async def counting(self, command, check_health=True):  # type: ignore[no-untyped-def]
        counter[0] += 1
        return await original(self, command, check_health)

    aconnection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        aconnection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def server_commands(url: str) -> dict[str, int]:
    stats = redis.Redis.from_url(url).info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def one_request(
    engine: ContextEngine, events: EventEmitter, body: dict[str, Any], session: str
) -> None:
    """The store's part of one request: load → prepare → persist → record with the request's
    events (as `proxy.server.chat` does after the answer)."""
    turn = await engine.load_turn("default", session, draft_from_body(body))
    prepared = await engine.prepare(body, turn=turn, api_key=None, recall=True)
    await engine.persist_outputs(prepared)
    usage = Usage(prompt_tokens=100)
    trace = Trace(
        stream=False,
        status=200,
        prepared=prepared,
        relayed=Relayed(usage=usage, completed=True),
        messages_in=len(body["messages"]),
        prepare_s=0.001,
        upstream_s=0.01,
    )
    await engine.record(
        prepared,
        usage=usage,
        completed=True,
        messages_in=trace.messages_in,
        events=events.entries(trace),
    )


async def run(tmp: Path, *, requests: int = 200) -> dict[str, Any]:
    """The single server's figures at the top level (as before), every store's in `stores`."""
    with redis_server() as url:
        if url is None:
            return {"skipped": "redis-server not found"}
        cluster, sentinels = RedisCluster(), SentinelSet()
        try:
            cluster.start()
            sentinels.start()
            stores = {
                "embedded": await measure(tmp, None, [], requests=requests),
                "redis": await measure(tmp, url, [_port(url)], requests=requests),
                "sentinel": await measure(
                    tmp, sentinels.url, [sentinels.primary.port], requests=requests
                ),
                "cluster": await measure(
                    tmp, cluster.url, [n.port for n in cluster.primaries()], requests=requests
                ),
            }
        finally:
            cluster.stop()
            sentinels.stop()
    return {**stores["redis"], "stores": stores}


async def measure(tmp: Path, url: str | None, ports: list[int], *, requests: int) -> dict[str, Any]:
    """Round trips, server commands and client CPU per request on the store at `url` (the
    embedded store without one); `ports`: the servers whose commands count."""
    store: Any = (
        RedisStore(url, key_prefix="bench:", session_ttl_s=3600, op_timeout_s=2.0)
        if url
        else MemoryStore()
    )
    engine = make_engine(tmp, store)
    events = EventEmitter(lambda: store)
    body = body_of(cycled_messages(100))
    for index in range(10):  # connections to every node, scripts, memos
        await one_request(engine, events, body, f"r{index}")
    before = [server_commands(f"redis://127.0.0.1:{port}") for port in ports]
    with counted_round_trips() as trips:
        started = time.process_time()
        for index in range(requests):
            await one_request(engine, events, body, f"r{index % 10}")
        cpu = time.process_time() - started
    after = [server_commands(f"redis://127.0.0.1:{port}") for port in ports]
    await store.close()
    commands: dict[str, int] = {}
    for was, now in zip(before, after, strict=True):
        for name, calls in now.items():
            commands[name] = commands.get(name, 0) + calls - was.get(name, 0)
    commands["info"] = commands.get("info", 0) - len(ports)
    commands = {k: v for k, v in commands.items() if v > 0 and not k.startswith("cluster")}
    return {
        "requests": requests,
        "round_trips_per_request": trips[0] / requests,
        "commands_per_request": sum(commands.values()) / requests,
        "commands": {k: round(v / requests, 2) for k, v in sorted(commands.items())},
        "cpu_us_per_request": round(cpu / requests * 1e6),
    }


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])
