"""`ctxproxy serve --workers 2` as a user runs it: one port, two processes on the suite's Redis;
`/metrics` for both, a killed worker restarted, SIGTERM draining both, the embedded store refused.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cli.test_main import ROOT, assert_one_line_exit_2, run_cli
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.redis_server import RedisServer, free_port
from tests.reliability.support import UPSTREAM_KEY, auth, chat, wait_until
from tests.server.harness import write_config


@dataclass
class Workers:
    proc: subprocess.Popen[str]
    url: str
    fake: FakeOpenAI

    def children(self) -> set[int]:
        """Process ids of the workers (the parent's children)."""
        found = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                    found.add(int(entry))
        return found


@pytest.fixture
async def workers(
    aiohttp_server: Any, tmp_path: Path, redis_server: RedisServer, key_prefix: str
) -> AsyncIterator[Workers]:
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    config = write_config(
        tmp_path,
        upstream=str(upstream.make_url("")).rstrip("/"),
        store_url=redis_server.url,
        key_prefix=key_prefix,
    )
    config.write_text(config.read_text().replace("[server]", "[server]\ndrain_timeout_s = 5"))
    port = free_port()
    proc = start_workers(config, port, count=2)
    running = Workers(proc, f"http://127.0.0.1:{port}", fake)
    try:
        await wait_until(lambda: len(running.children()) == 2, within=20)
        await _ready(running.url)
        yield running
    finally:
        if proc.poll() is None:
            proc.kill()
            for child in running.children():
                os.kill(child, signal.SIGKILL)
        proc.communicate(timeout=10)


def start_workers(config: Path, port: int, *, count: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXPROXY_", "OPENAI_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--port", str(port),
         "--workers", str(count)],
        cwd=ROOT, env={**env, "FAKE_UPSTREAM_KEY": UPSTREAM_KEY},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def _ready(url: str) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(200):
            try:
                async with http.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the workers never became ready")


async def _chat(url: str, session: str, **extra: Any) -> int:
    """One request on a connection of its own (so the kernel may give it to either worker)."""
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http,
        http.post(
            f"{url}/v1/chat/completions",
            json=chat(**extra),
            headers={**auth(), "X-Ctx-Session": session},
        ) as response,
    ):
        await response.read()
        return response.status


async def _metrics(url: str) -> dict[str, list[Any]]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as response:
        text = await response.text()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


async def test_two_workers_serve_one_port_and_metrics_count_for_both(workers: Workers) -> None:
    statuses = await asyncio.gather(*(_chat(workers.url, f"s{i % 4}") for i in range(40)))
    assert statuses == [200] * 40
    await asyncio.sleep(0.3)  # the after-work of the last requests
    for _ in range(3):  # whichever worker the scrape reaches answers for both
        families = await _metrics(workers.url)
        degraded = families["ctxproxy_store_degraded"]
        assert sorted(s.labels["worker"] for s in degraded) == ["0", "1"]
        chats = [
            s
            for s in families["ctxproxy_http_requests"]
            if s.name.endswith("_total") and s.labels["route"] == "/v1/chat/completions"
        ]
        assert sum(s.value for s in chats) == 40
    assert len(workers.children()) == 2


async def test_a_killed_worker_is_restarted_and_requests_keep_being_answered(
    workers: Workers,
) -> None:
    first = workers.children()
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    statuses = [await _chat(workers.url, "after-kill") for _ in range(10)]
    assert statuses == [200] * 10
    await wait_until(lambda: len(workers.children() - {victim}) == 2, within=10)
    assert victim not in workers.children() and len(workers.children() & first) == 1
    for _ in range(100):  # the new worker answers once its app has started
        families = await _metrics(workers.url)
        if len(families["ctxproxy_store_degraded"]) == 2:
            break
        await asyncio.sleep(0.1)
    assert sorted(s.labels["worker"] for s in families["ctxproxy_store_degraded"]) == ["0", "1"]


async def test_sigterm_drains_both_workers_then_the_parent_exits(workers: Workers) -> None:
    workers.fake.default = Reply(first_byte_delay_s=1.0)
    slow = [asyncio.create_task(_chat(workers.url, f"slow{i}")) for i in range(6)]
    await wait_until(lambda: len(workers.fake.chat) >= 6, within=10)
    children = workers.children()
    workers.proc.send_signal(signal.SIGTERM)
    assert await asyncio.gather(*slow) == [200] * 6  # in flight on either worker: finished
    assert await asyncio.to_thread(workers.proc.wait, 15) == 0
    assert not any(alive(pid) for pid in children)
    _, err = workers.proc.communicate(timeout=5)
    assert "ctxproxy serving on" in err and ", 2 workers)" in err
    assert err.count('"stopped"') == 2 and "all workers stopped" in err
    with pytest.raises(aiohttp.ClientConnectionError):
        await _chat(workers.url, "late")


def test_workers_with_the_embedded_store_are_one_line_and_exit_2() -> None:
    done = run_cli("serve", "--port", str(free_port()), "--workers", "2")
    assert_one_line_exit_2(done, "--workers: 2 workers need a shared store", "the embedded store")


async def test_workers_stop_by_themselves_when_the_parent_is_killed(workers: Workers) -> None:
    children = workers.children()
    workers.proc.kill()
    await asyncio.to_thread(workers.proc.wait, 5)
    await wait_until(lambda: not any(alive(pid) for pid in children), within=15)
