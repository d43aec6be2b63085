"""`ctxproxy sessions list | show | watch` against a real Redis with known state, and a proxy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from rich.console import Console

from proxy.adapters.redis.store import RedisStore
from proxy.cli.main import build_parser, main
from proxy.cli.sessions import open_source, run_list, run_show, watch_frames
from proxy.cli.source import RedisSource
from proxy.cli.view import (
    choose_columns,
    context_bar,
    describe_event,
    session_detail_view,
    sessions_table,
    short_count,
)
from proxy.types import StoredCompaction
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer, free_port

NOW = 1_800_000_000.0


@pytest.fixture(params=["redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The suite's Redis server, or its Redis Cluster: the CLI reads either by URL."""
    server: RedisServer | RedisCluster = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "redis_cluster"
    )
    return server.url


@pytest.fixture
async def store(store_url: str, key_prefix: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(store_url, key_prefix=key_prefix, op_timeout_s=2.0)
    await store.record_turn("default", "agent-1", fields={
        "model": "gpt-4o", "last_prompt_tokens": 4800, "last_cached_tokens": 1200,
        "threshold_tokens": 6000, "updated_at": NOW - 30}, counters={"requests": 7,
        "compactions": 1}, decisions={})  # fmt: skip
    await store.record_turn("team", "agent-2", fields={
        "model": "claude-x", "last_prompt_tokens": 900, "last_cached_tokens": 0,
        "threshold_tokens": 6000, "updated_at": NOW - 10}, counters={"requests": 2},
        decisions={})  # fmt: skip
    archive_id = await store.archive("default", "agent-1", b'[{"role":"user","content":"x"}]')
    token = await store.acquire_lock("default", "agent-1", ttl_ms=5000)
    assert token is not None
    summary = {"role": "user", "content": "[Conversation summary]\nMaya read two files."}
    compaction = StoredCompaction("abc", 9, (summary,), created_at=NOW - 60, archive_id=archive_id)
    await store.save_compaction("default", "agent-1", compaction, snapshot_json=b"[1,2,3]",
                                lock_token=token)  # fmt: skip
    await store.emit_event(
        {
            "kind": "request",
            "tenant": "default",
            "session": "agent-1",
            "status": "200",
            "outcome": "ok",
            "latency_ms": "41.5",
            "stages": orjson.dumps({"prune": {"chars_pruned": 519}}).decode(),
        }
    )
    yield store
    await store.close()


def recording() -> Console:
    return Console(record=True, width=200, force_terminal=False, color_system=None)


async def test_list_shows_each_session_with_its_bar_cached_share_and_last_event(
    store: RedisStore, store_url: str, key_prefix: str
) -> None:
    source = RedisSource(store_url, prefix=key_prefix)
    console = recording()
    await run_list(source, console, limit=10)
    await source.close()
    text = console.export_text()
    first, second = (line for line in text.splitlines() if "agent-" in line)
    assert "agent-2" in first and "team" in first and "claude-x" in first  # newest first
    assert "900 / 6000" in first and "0%" in first
    assert "default" in second and "4800 / 6000" in second and "25%" in second
    assert "█████████░░░" in second  # 4800/6000 of 12 cells, rounded down
    assert "pruned 519 chars" in second and "200 ok" in second


def test_list_through_the_command_line(
    store: RedisStore,
    store_url: str,
    key_prefix: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["sessions", "list", "--redis", store_url, "--prefix", key_prefix]) == 0
    out = capsys.readouterr().out
    assert "agent-1" in out and "agent-2" in out and "4800 / 6000" in out


@pytest.mark.parametrize("where", ["--redis", "--url"])
def test_an_unreachable_source_is_named_by_its_address_without_a_password(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    url = (
        f"redis://:s3cret@127.0.0.1:{port}/0" if where == "--redis" else f"http://127.0.0.1:{port}"
    )
    assert main(["sessions", "list", where, url]) == 1
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "s3cret" not in err and "ssl:default" not in err
    if where == "--redis":
        assert f"redis://:***@127.0.0.1:{port}/0" in err
    else:
        assert f"proxy 127.0.0.1:{port} unreachable: Connection refused" in err


async def test_show_prints_state_summaries_and_archive_size(
    store: RedisStore, store_url: str, key_prefix: str
) -> None:
    source = RedisSource(store_url, prefix=key_prefix)
    console = recording()
    assert await run_show(source, console, session="agent-1", tenant=None) == 0
    assert await run_show(source, console, session="nope", tenant=None) == 1
    await source.close()
    text = console.export_text()
    assert "session agent-1" in text and "4800 / 6000" in text
    assert "requests" in text and "7" in text
    assert "Stored summaries: 1" in text and "covers 9 messages" in text
    assert "Maya read two files." in text
    assert "Archive: 1 histories archived; snapshot 7 bytes" in text
    assert "No session 'nope'." in text


async def test_watch_renders_a_frame_per_batch_of_new_events(
    store: RedisStore, store_url: str, key_prefix: str
) -> None:
    source = RedisSource(store_url, prefix=key_prefix)
    frames = watch_frames(source, limit=10, interval_s=2.0, clock=lambda: NOW)
    console = recording()
    console.print(await anext(frames))
    first = console.export_text()
    waiting = asyncio.ensure_future(anext(frames))
    await asyncio.sleep(0.2)
    await store.record_turn(
        "team",
        "agent-2",
        fields={"last_prompt_tokens": 6500, "updated_at": NOW},
        counters={"requests": 1},
        decisions={},
    )
    await store.emit_event(
        {
            "kind": "compaction",
            "tenant": "team",
            "session": "agent-2",
            "outcome": "done",
            "reason": "compacted",
        }
    )
    console.print(await asyncio.wait_for(waiting, 5))
    second = console.export_text()
    await frames.aclose()
    await source.close()
    assert "900 / 6000" in first and "compaction done" not in first
    line = next(x for x in second.splitlines() if "agent-2" in x)
    assert "6500 / 6000" in line and "compaction done (compacted)" in line


def test_pure_helpers() -> None:
    assert context_bar(6000, 6000, width=4).plain == "████ 6000 / 6000"
    assert context_bar(0, 0, width=2).plain == "░░ 0 / ?"
    assert describe_event({"kind": "request", "status": "502", "outcome": "upstream_error"}) == (
        "502 upstream_error"
    )


ROW = {"tenant": "default", "session": "d-3f9a2c81b7e4d0a1", "model": "gpt-4o-mini-2024-07-18",
       "last_prompt_tokens": "48000", "last_cached_tokens": "12000", "threshold_tokens": "95000",
       "compactions": "3", "requests": "127", "updated_at": str(NOW - 9)}  # fmt: skip
EVENT = {"kind": "request", "status": "200", "outcome": "ok", "latency_ms": "812.3",
         "compaction": "done", "stages": '{"prune": {"chars_pruned": 519}}'}  # fmt: skip


def render(rows: list[dict[str, str]], width: int) -> list[str]:
    events = {("default", ROW["session"]): EVENT}
    console = Console(record=True, width=width, force_terminal=False, color_system=None)
    console.print(sessions_table(rows, last_events=events, now=NOW, width=width))
    return console.export_text().splitlines()


@pytest.mark.parametrize("tenants", [1, 2])
def test_the_table_is_readable_at_80_columns(tenants: int) -> None:
    other = {**ROW, "tenant": "team", "session": "agent-2", "updated_at": str(NOW - 300)}
    lines = render([ROW, other][:tenants], 80)
    text = "\n".join(lines)
    assert all(len(line.rstrip()) <= 80 for line in lines), text
    assert "…" not in text  # nothing cut: no header, no id, no number
    assert ROW["session"] in text and "███░░░ 48k/95k" in text
    events = " ".join(line.split("│")[-2].strip() for line in lines if line.count("│") > 2)
    assert "200 ok · pruned 519 chars · compaction done · 812 ms · 9s ago" in events
    if tenants == 1:
        assert "ctxproxy sessions · tenant default" in lines[0] and "comp." in text
    else:
        assert "team/agent-2" in text and "default/d-3f9a2c81b7e4d0a1" in text


def test_columns_go_least_needed_first_as_the_terminal_narrows() -> None:
    def shown(width: int | None) -> tuple[str, ...]:
        events = {("default", ROW["session"]): EVENT}
        return choose_columns([ROW], last_events=events, now=NOW, width=width)[0]

    assert shown(None) == shown(200) == (
        "tenant", "session", "model", "context", "cached", "miss", "compactions", "requests",
        "event",
    )  # fmt: skip
    assert "miss" not in shown(120) and "cached" in shown(120)
    assert shown(80) == ("session", "context", "compactions", "event")
    assert shown(40) == ("session", "context", "event")


def test_the_last_miss_and_its_cause_show_in_the_table_and_the_detail() -> None:
    row = {**ROW, "last_miss_cause": "prune", "last_miss_at": str(NOW - 180),
           "last_miss_read": "1024", "last_miss_expected": "30000"}  # fmt: skip
    events = {("default", ROW["session"]): {**EVENT, "cache_miss": "prune"}}
    console = Console(record=True, width=300, force_terminal=False, color_system=None)
    console.print(sessions_table([row], last_events=events, now=NOW, width=300))
    text = console.export_text()
    assert "last miss" in text and "prune 3m ago" in text and "cache miss: prune" in text
    console = Console(record=True, width=120, force_terminal=False, color_system=None)
    console.print(session_detail_view({"state": row}, now=NOW))
    assert "prune 3m ago: read 1024 of 30000 cached tokens" in console.export_text()


def test_short_counts() -> None:
    assert [short_count(n) for n in (881, 5898, 6000, 48000, 128_500)] == [
        "881", "5.9k", "6k", "48k", "128k"
    ]  # fmt: skip


async def test_url_source_sends_the_key_from_the_environ_passed_and_key_flag_wins(
    aiohttp_server: Any,
) -> None:
    seen: list[str | None] = []

    async def sessions(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({"sessions": []})

    app = web.Application()
    app.router.add_get("/v1/ctx/sessions", sessions)
    url = str((await aiohttp_server(app)).make_url(""))
    environ = {"CTXPROXY_KEY": "env-token"}
    for flags in ([], ["--key", "flag-token"]):
        args = build_parser().parse_args(["sessions", "list", "--url", url, *flags])
        source = open_source(args, environ=environ)
        assert await source.sessions(5) == []
        await source.close()
    assert seen == ["Bearer env-token", "Bearer flag-token"]
