"""One contract, four stores: the embedded one, and Redis on a real server, on a real Redis
Cluster (six nodes) and on a real Sentinel set (primary, replica, three sentinels)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.redis.events import parse_id
from proxy.adapters.redis.keys import shard_of
from proxy.adapters.redis.store import MAX_CONNECTIONS, RedisStore
from proxy.errors import StoreUnavailable
from proxy.ports import StateStore
from proxy.types import StoredCompaction
from tests.redis_cluster import RedisCluster, SentinelSet
from tests.redis_server import RedisServer


@pytest.fixture(params=["memory", "redis", "cluster", "sentinel"])
async def store(request: pytest.FixtureRequest, key_prefix: str) -> AsyncIterator[StateStore]:
    made: StateStore
    if request.param == "memory":
        made = MemoryStore()
    else:
        # A cluster store's first operation reads the slot map and redis-py's command table, a
        # Sentinel one asks a sentinel: on a loaded machine that can outlast 0.5 s
        timeout = 0.5 if request.param == "redis" else 2.0
        made = RedisStore(
            redis_url(request, request.param), key_prefix=key_prefix, op_timeout_s=timeout
        )
    yield made
    await made.close()


def redis_url(request: pytest.FixtureRequest, kind: str) -> str:
    """The URL of the shared server, cluster or Sentinel set (started on first use)."""
    fixture = {"redis": "redis_server", "cluster": "redis_cluster", "sentinel": "sentinel_set"}
    server: RedisServer | RedisCluster | SentinelSet = request.getfixturevalue(fixture[kind])
    return server.url


def compaction(prefix_hash: str = "abc", covers: int = 3) -> StoredCompaction:
    summary = {"role": "user", "content": "[Conversation summary]\nfacts"}
    return StoredCompaction(prefix_hash=prefix_hash, covers=covers, replacement=(summary,))


async def test_new_session_loads_empty(store: StateStore) -> None:
    state = await store.load("t1", "nobody")
    assert dict(state.fields) == {} and dict(state.decisions) == {} and state.compactions == ()


async def test_record_turn_sets_fields_adds_counters_and_decisions(store: StateStore) -> None:
    for _ in range(2):
        await store.record_turn(
            "t1",
            "s1",
            fields={"model": "gpt-4o", "last_prompt_tokens": 900, "updated_at": 5.0},
            counters={"requests": 1, "chars_pruned": 10},
            decisions={"call_1": "cut"},
        )
    state = await store.load("t1", "s1")
    assert state.fields["model"] == "gpt-4o"
    assert state.int_field("last_prompt_tokens") == 900
    assert state.int_field("requests") == 2 and state.int_field("chars_pruned") == 20
    assert state.fields["tenant"] == "t1" and state.fields["session"] == "s1"
    assert dict(state.decisions) == {"call_1": "cut"}


async def test_views_show_every_field_as_text_like_redis(store: StateStore) -> None:
    await store.record_turn(
        "t1", "s1", fields={"last_prompt_tokens": 900, "updated_at": 5.5},
        counters={"requests": 1}, decisions={},
    )  # fmt: skip
    [row] = await store.list_sessions("t1", limit=10)
    detail = await store.session_detail("t1", "s1")
    assert detail is not None
    for state in (row, detail["state"]):
        assert state["last_prompt_tokens"] == "900" and state["requests"] == "1"
        assert float(state["updated_at"]) == 5.5


async def test_sessions_are_scoped_by_tenant(store: StateStore) -> None:
    await store.record_turn("t1", "same", fields={"model": "a"}, counters={}, decisions={})
    await store.record_turn("t2", "same", fields={"model": "b"}, counters={}, decisions={})
    assert (await store.load("t1", "same")).fields["model"] == "a"
    assert (await store.load("t2", "same")).fields["model"] == "b"
    listed = await store.list_sessions("t1", limit=10)
    assert [row["tenant"] for row in listed] == ["t1"]
    assert {row["tenant"] for row in await store.list_sessions(None, limit=10)} == {"t1", "t2"}


async def test_lock_has_one_owner_and_fences_a_stale_writer(store: StateStore) -> None:
    token = await store.acquire_lock("t1", "s1", ttl_ms=5_000)
    assert token is not None
    assert await store.acquire_lock("t1", "s1", ttl_ms=5_000) is None
    assert (
        await store.save_compaction(
            "t1", "s1", compaction(), snapshot_json=b"[]", lock_token="not-the-owner"
        )
        is False
    )
    assert (await store.load("t1", "s1")).compactions == ()
    assert (
        await store.save_compaction("t1", "s1", compaction(), snapshot_json=b"[]", lock_token=token)
        is True
    )
    await store.release_lock("t1", "s1", "not-the-owner")
    assert await store.acquire_lock("t1", "s1", ttl_ms=5_000) is None
    await store.release_lock("t1", "s1", token)
    assert await store.acquire_lock("t1", "s1", ttl_ms=5_000) is not None


async def test_expired_lock_cannot_save(store: StateStore) -> None:
    token = await store.acquire_lock("t1", "s1", ttl_ms=50)
    assert token is not None
    await asyncio.sleep(0.15)
    assert (
        await store.save_compaction("t1", "s1", compaction(), snapshot_json=b"[]", lock_token=token)
        is False
    )


async def test_saved_compaction_round_trips(store: StateStore) -> None:
    token = await store.acquire_lock("t1", "s1", ttl_ms=5_000)
    assert token
    await store.archive("t1", "s1", orjson.dumps([{"role": "user", "content": "hi"}]))
    assert await store.save_compaction(
        "t1", "s1", compaction("h1", 7), snapshot_json=b"[1]", lock_token=token
    )
    (loaded,) = (await store.load("t1", "s1")).compactions
    assert loaded == compaction("h1", 7)
    await store.record_turn("t1", "s1", fields={"updated_at": 1.0}, counters={}, decisions={})
    detail = await store.session_detail("t1", "s1")
    assert detail is not None
    assert detail["archive_entries"] == 1 and detail["snapshot_bytes"] == 3
    assert detail["compactions"][0]["covers"] == 7


async def test_outputs_are_per_tenant(store: StateStore) -> None:
    await store.put_output("t1", "out1", "big text")
    assert await store.get_output("t1", "out1") == "big text"
    assert await store.get_output("t2", "out1") is None


async def test_events_are_read_in_order_after_an_id(store: StateStore) -> None:
    await store.emit_event({"kind": "request", "n": "1"})
    first = await store.read_events("0-0", block_ms=0, count=10)
    assert [e["n"] for _, e in first] == ["1"]
    waiter = asyncio.ensure_future(store.read_events(first[-1][0], block_ms=2_000, count=10))
    await asyncio.sleep(0.05)
    await store.emit_event({"kind": "request", "n": "2"})
    assert [e["n"] for _, e in await waiter] == ["2"]


async def test_events_written_with_the_record_follow_in_order_and_wake_a_reader(
    store: StateStore,
) -> None:
    await store.emit_event({"kind": "request", "n": "0"})
    [(last, _)] = await store.read_events("0-0", block_ms=0, count=10)
    waiter = asyncio.ensure_future(store.read_events(last, block_ms=2_000, count=10))
    await asyncio.sleep(0.05)
    await store.record_turn(
        "t1", "s1", fields={"model": "m"}, counters={"requests": 1}, decisions={},
        events=[{"kind": "compaction", "n": "1"}, {"kind": "request", "n": "2"}],
    )  # fmt: skip
    woken = await waiter  # Redis may wake the reader at the first of the two
    assert woken and woken[0][1]["n"] == "1"
    after = await store.read_events(last, block_ms=0, count=10)
    assert [(e["kind"], e["n"]) for _, e in after] == [("compaction", "1"), ("request", "2")]
    assert (await store.load("t1", "s1")).int_field("requests") == 1


async def test_memory_store_archives_to_the_workspace(tmp_path: Path) -> None:
    store = MemoryStore(archive_dir_for=lambda tenant: tmp_path / tenant / "sessions")
    await store.archive("t1", "s1", b'[{"role":"user","content":"hi"}]')
    line = (tmp_path / "t1" / "sessions" / "raw.jsonl").read_bytes()
    assert orjson.loads(line)["messages"] == [{"role": "user", "content": "hi"}]
    token = await store.acquire_lock("t1", "s1", ttl_ms=1_000)
    assert token
    await store.save_compaction("t1", "s1", compaction(), snapshot_json=b"[]", lock_token=token)
    assert (tmp_path / "t1" / "sessions" / "ctx-s1.json").read_bytes() == b"[]"


async def test_redis_keys_follow_the_documented_layout_with_ttls(
    redis_server: RedisServer, key_prefix: str
) -> None:
    store = RedisStore(redis_server.url, key_prefix=key_prefix, session_ttl_s=1000)
    await store.record_turn(
        "t1", "s1", fields={"model": "m"}, counters={"requests": 1}, decisions={"c": "x"},
        events=[{"kind": "request", "tenant": "t1", "session": "s1"}],
    )  # fmt: skip
    await store.archive("t1", "s1", b"[]")
    await store.put_output("t1", "o1", "text")
    raw = aioredis.Redis.from_url(redis_server.url)
    keys = sorted(k.decode() for k in await raw.keys(f"{key_prefix}*"))
    shard = shard_of("t1", "s1")
    assert keys == sorted(
        [
            f"{key_prefix}{{t1:s1}}:state",
            f"{key_prefix}{{t1:s1}}:decisions",
            f"{key_prefix}{{t1:s1}}:raw",
            f"{key_prefix}{{t1:o1}}:output",
            f"{key_prefix}{{shard:{shard}}}:sessions:t1",
            f"{key_prefix}{{shard:{shard}}}:tenants",
            f"{key_prefix}{{shard:{shard}}}:events",
        ]
    )
    for key in keys:
        assert 0 < await raw.ttl(key) <= 1000, key
    assert (await raw.hgetall(f"{key_prefix}{{t1:s1}}:state"))[b"requests"] == b"1"
    await raw.aclose()
    await store.close()


async def test_every_batch_the_store_sends_stays_in_one_cluster_slot(
    redis_server: RedisServer, key_prefix: str
) -> None:
    """On a cluster a batch goes to the node owning its slot: two slots in one batch would be
    CROSSSLOT for a transaction or script, and a pipeline split over nodes for the rest."""
    store = RedisStore(redis_server.url, key_prefix=key_prefix)
    slots: list[set[int]] = []
    wire = store._wire  # the store's own wire, watched (both ways of sending batches)
    sent, sent_each = wire.run, wire.run_each

    def watch(batches: Any) -> None:
        slots.extend(
            {key_slot(k.encode()) for command in b for k in _keys_of(command)} for b in batches
        )

    async def watched(batches: Any) -> list[list[Any]]:
        watch(batches)
        return await sent(batches)

    async def watched_each(batches: Any) -> list[list[Any] | Exception]:
        watch(batches)
        return await sent_each(batches)

    wire.run = watched  # type: ignore[method-assign]
    wire.run_each = watched_each  # type: ignore[method-assign]
    try:
        await store.load("t1", "s1")
        await store.add_facts("t1", None, ["- 2026-01-01: a tenant fact"], max_lines=10)
        await store.add_facts("t1", "s1", ["- 2026-01-01: a session fact"], max_lines=10)
        assert (await store.load("t1", "s1", memory="tenant")).memory
        assert (await store.load("t1", "s1", memory="session")).memory
        await store.read_facts("t1", None)
        assert await store.forget_facts("t1", None, "tenant fact") == 1
        await store.put_record("t1", "response", "r1", b"{}")
        assert await store.get_record("t1", "response", "r1") == b"{}"
        await store.put_record("t1", "summary", "m1", b"{}")
        await store.handle_secret(b"x" * 32)
        await store.record_turn(
            "t1", "s1", fields={"model": "m"}, counters={"requests": 1}, decisions={"c": "x"},
            events=[{"kind": "compaction"}, {"kind": "request"}],
        )  # fmt: skip
        await store.emit_event({"kind": "compaction", "tenant": "t1", "session": "s2"})
        await store.put_output("t1", "o1", "text")
        await store.get_output("t1", "o1")
        await store.read_events("0-0", block_ms=0, count=10)
        await store.list_sessions(None, limit=10)
        await store.session_detail("t1", "s1")
        token = await store.acquire_lock("t1", "s1", ttl_ms=5_000)
        assert token is not None
        await store.archive("t1", "s1", b"[]")
        await store.save_compaction("t1", "s1", compaction(), snapshot_json=b"[]", lock_token=token)
        await store.release_lock("t1", "s1", token)
    finally:
        await store.close()
    assert len(slots) > 30
    assert [s for s in slots if len(s) != 1] == []


def _keys_of(command: tuple[Any, ...]) -> list[str]:
    """The keys of one of the store's commands: the first argument, or `EVAL`'s keys."""
    if command[0] == "EVAL":
        return [str(key) for key in command[3 : 3 + int(command[2])]]
    return [str(command[1])]


async def test_a_store_of_the_previous_layout_keeps_its_sessions_and_outputs(
    redis_server: RedisServer, key_prefix: str
) -> None:
    """Session keys are where they were; an output stored at `P{t}:output:ID` is still found."""
    raw = aioredis.Redis.from_url(redis_server.url)
    await raw.hset(f"{key_prefix}{{t1:old}}:state", mapping={"model": "m", "requests": 4})
    await raw.set(f"{key_prefix}{{t1}}:output:o1", "kept text", ex=100)
    store = RedisStore(redis_server.url, key_prefix=key_prefix)
    try:
        assert (await store.load("t1", "old")).int_field("requests") == 4
        assert await store.get_output("t1", "o1") == "kept text"
        assert await store.get_output("t2", "o1") is None
    finally:
        await store.close()
        await raw.aclose()


async def test_redis_on_a_database_other_than_0(redis_server: RedisServer, key_prefix: str) -> None:
    url = redis_server.url.removesuffix("/0") + "/3"
    store = RedisStore(url, key_prefix=key_prefix)
    raw = aioredis.Redis.from_url(url)
    try:
        await store.record_turn("t1", "s1", fields={"model": "m"}, counters={}, decisions={})
        assert await raw.exists(f"{key_prefix}{{t1:s1}}:state") == 1
    finally:
        await store.close()
        await raw.aclose()


async def test_redis_down_raises_store_unavailable_fast_then_recovers() -> None:
    server = RedisServer()
    store = RedisStore(server.url, breaker_s=0.2)
    with pytest.raises(StoreUnavailable):
        await store.load("t1", "s1")
    assert store.degraded
    server.start()
    try:
        await asyncio.sleep(0.25)
        assert await store.ping()
        assert (await store.load("t1", "s1")).fields == {}
    finally:
        await store.close()
        server.stop()


async def test_a_reply_cut_by_the_timeout_is_never_read_as_the_next_ones() -> None:
    """The breaker's timeout bounds each operation (the client has no socket timeout): a read it
    cuts must drop its connection, or the late reply would answer the next command."""
    server = RedisServer()
    server.start()
    store = RedisStore(server.url, op_timeout_s=0.2, breaker_s=0.0)
    admin = aioredis.Redis.from_url(server.url)
    try:
        await store.put_output("t1", "out-1", "the full text")
        await store.record_turn("t1", "s1", fields={"model": "m"}, counters={}, decisions={})
        await admin.execute_command("CLIENT", "PAUSE", 500, "ALL")
        with pytest.raises(StoreUnavailable):
            await store.get_output("t1", "out-1")  # its reply arrives after the pause
        await asyncio.sleep(0.6)
        state = await store.load("t1", "s1")
        assert state.fields["model"] == "m" and state.int_field("requests") == 0
        assert await store.get_output("t1", "out-1") == "the full text"
    finally:
        await admin.aclose()
        await store.close()
        server.stop()


async def test_more_operations_at_once_than_connections_queue_instead_of_failing(
    redis_server: RedisServer, key_prefix: str
) -> None:
    """A burst wider than the pool (MAX_CONNECTIONS) waits for connections: before the bound,
    the 65th operation failed with MaxConnectionsError and opened the breaker for the rest. The
    per-operation bound is generous so that a loaded machine's slowness is not read as a failure;
    without the bound the 65th fails at once whatever the timeout."""
    store = RedisStore(redis_server.url, key_prefix=key_prefix, op_timeout_s=5.0)
    try:
        states = await asyncio.gather(
            *(store.load("t1", f"s{index}") for index in range(3 * MAX_CONNECTIONS))
        )
        assert [state.fields for state in states] == [{}] * (3 * MAX_CONNECTIONS)
        assert not store.degraded
    finally:
        await store.close()


async def test_the_embedded_store_sweeps_sessions_nobody_touches_again() -> None:
    now = [0.0]
    store = MemoryStore(session_ttl_s=100, clock=lambda: now[0])
    for index in range(50):
        await store.record_turn(
            "t1", f"s{index}", fields={}, counters={"requests": 1}, decisions={}
        )
    assert store.sessions_held == 50
    now[0] = 30.0
    await store.record_turn("t1", "late", fields={}, counters={"requests": 1}, decisions={})
    now[0] = 120.0  # the first fifty expired at 100; a sweep runs at most once a minute
    await store.record_turn("t1", "new", fields={}, counters={"requests": 1}, decisions={})
    assert store.sessions_held == 2
    assert sorted(row["session"] for row in await store.list_sessions("t1", limit=10)) == [
        "late",
        "new",
    ]


async def test_the_embedded_store_holds_outputs_within_its_budget() -> None:
    store = MemoryStore(max_output_chars=1_000)
    for index in range(10):
        await store.put_output("t1", f"o{index}", str(index) * 300)
    assert store.output_chars_held <= 1_000
    assert await store.get_output("t1", "o0") is None
    assert await store.get_output("t1", "o9") == "9" * 300


async def test_events_of_many_sessions_are_read_once_each_in_id_order(store: StateStore) -> None:
    """Sessions' events go to different shards on Redis; pages of 7 still read each event once,
    in id order (the order of time, to the millisecond)."""
    for index in range(40):
        await store.record_turn(
            "t1", f"s{index}", fields={}, counters={}, decisions={},
            events=[{"kind": "request", "tenant": "t1", "session": f"s{index}", "n": str(index)}],
        )  # fmt: skip
        if index % 10 == 0:
            await asyncio.sleep(0.002)  # some in other milliseconds than the rest
    seen: list[str] = []
    order: list[tuple[int, int]] = []
    last = "0-0"
    for _ in range(40):
        page = await store.read_events(last, block_ms=0, count=7)
        if not page:
            break
        seen += [event["n"] for _, event in page]
        order += [parse_id(entry_id) for entry_id, _ in page]
        last = page[-1][0]
    assert sorted(seen, key=int) == [str(n) for n in range(40)]
    assert order == sorted(order)
