"""Section 2b: Redis round trips and commands per request, against a real redis-server.

A request is what the proxy asks of the store for one chat request: load the state, prepare,
persist outputs, and record the outcome with the request's events (`EventEmitter.entries`), as
the after-work does. Round trips are counted at the client (each `send_packed_command` is one write
of a command or of a whole pipeline); commands at the server (`INFO commandstats` delta).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
import redis.asyncio.connection as aconnection

from benchmarks.common import free_port, stop, wait_port
from benchmarks.engine_rig import body_of, cycled_messages, make_engine
from benchmarks.payloads import MODEL
from proxy.adapters.redis.store import RedisStore
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import draft_from_body
from proxy.server.observe.events import EventEmitter
from proxy.server.observe.trace import Trace
from proxy.server.relay import Relayed
from proxy.usage import Usage


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port, workdir = free_port(), tempfile.mkdtemp(prefix="bench-redis-")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", workdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    prepared = await engine.prepare(body, turn=turn, api_key=None)
    await engine.persist_outputs(prepared)
    usage = Usage(prompt_tokens=100)
    trace = Trace(
        tenant="default", session=session, model=MODEL, stream=False, status=200,
        prepared=prepared, relayed=Relayed(usage=usage, completed=True),
        messages_in=len(body["messages"]), prepare_s=0.001, upstream_s=0.01,
        store_degraded=False,
    )
    await engine.record(prepared, usage=usage, completed=True, messages_in=trace.messages_in,
                        events=events.entries(trace))


async def run(tmp: Path, *, requests: int = 50) -> dict[str, Any]:
    with redis_server() as url:
        if url is None:
            return {"skipped": "redis-server not found"}
        store = RedisStore(url, key_prefix="bench:", session_ttl_s=3600, op_timeout_s=2.0)
        engine = make_engine(tmp, store)
        events = EventEmitter(lambda: store)
        body = body_of(cycled_messages(100))
        await one_request(engine, events, body, "warm")
        before = server_commands(url)
        with counted_round_trips() as trips:
            for index in range(requests):
                await one_request(engine, events, body, f"r{index % 5}")
        after = server_commands(url)
        await store.close()
    commands = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    commands["info"] = commands.get("info", 0) - 1
    commands = {k: v for k, v in commands.items() if v > 0}
    return {"requests": requests, "round_trips_per_request": trips[0] / requests,
            "commands_per_request": sum(commands.values()) / requests,
            "commands": {k: round(v / requests, 2) for k, v in sorted(commands.items())}}
