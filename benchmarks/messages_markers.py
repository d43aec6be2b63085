"""Claude Code's cache markers and pruning on `/v1/messages`, against a simulated Anthropic cache:
`python -m benchmarks.messages_markers [--quick]`.

Claude Code marks its system prompt and the newest user turns for caching on every request. The
proxy's rule for a chat client's markers, "nothing before the client's last marker is pruned",
would then leave nothing to prune; `messages_markers_stop_pruning = false` (the default) keeps
those markers where the client put them and lets pruning go on. Which costs less?

Each trace of ../shared/traces is replayed as Claude Code would send it: one Messages request per
assistant turn (converted by `proxy.translate.anthropic_request`), its system as a block with a
marker, and a marker on the last block of each of its last two user turns. Through ctxproxy
(in process, an Anthropic upstream, the example workspace, its defaults but for the setting
compared) and directly, against the fake upstream of `benchmarks.fake_llm` with the Anthropic
cache model of `proxy.cost.cachesim`, on the simulated clock of `benchmarks.cache_share` (20 s a
turn, a 6-minute pause every 25 turns).
Relative cost: uncached input 1, cache writes 1.25, cache reads 0.1, against the direct replay's
prompt tokens without a cache.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.cache_share import SimClock
from benchmarks.fake_llm import FakeLLM
from benchmarks.payloads import load_trace
from benchmarks.replay import requests_of, serving, trace_names
from benchmarks.targets import WORKSPACE
from proxy.config import load_settings
from proxy.cost.cachesim import AnthropicCache
from proxy.server.app import Ports, create_app
from proxy.server.appkeys import LIFECYCLE
from proxy.translate.anthropic_request import to_messages_request

MODEL = "claude-sonnet-4-5"
EPHEMERAL = {"type": "ephemeral"}
SETUPS = {
    "markers stop pruning": "messages_markers_stop_pruning = true\n",
    "pruning behind the markers, when the cache is cold (the defaults)": "",
    "pruning behind the markers, every turn": "[tenants.default.prune]\nwhen_cache_cold_s = 0\n",
}
TOML = """
[store]
url = "memory://"
[upstreams.claude]
kind = "anthropic"
base_url = "{base}"
api_key_env = "BENCH_UPSTREAM_KEY"
[tenants.default]
workspace = "{workspace}"
upstream = "claude"
forward_client_key = false
{extra}
"""


def claude_code_requests(name: str) -> Iterator[dict[str, Any]]:
    """The trace's requests as Claude Code would send them (see the module docstring)."""
    for chat in requests_of(load_trace(name), MODEL):
        body = to_messages_request(chat)
        system = body.get("system") or "You are a coding agent."
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        body["system"] = [*blocks[:-1], {**blocks[-1], "cache_control": EPHEMERAL}]
        users = [m for m in body["messages"] if m["role"] == "user"][-2:]
        for message in users:
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            message["content"] = [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]
        yield body


@contextlib.asynccontextmanager
async def proxied(
    tmp: Path, fake: FakeLLM, clock: SimClock, extra: str | None
) -> AsyncIterator[tuple[str, Any]]:
    """(the URL to send to, the proxy app or None) for ctxproxy with `extra`, or direct."""
    async with serving(fake.app()) as upstream:
        base = str(upstream.make_url("")).rstrip("/")
        if extra is None:
            yield f"{base}/v1/messages", None
            return
        config = tmp / "ctxproxy.toml"
        workspace = tmp / "ws"  # a copy: the embedded store archives into sessions/
        if not workspace.exists():
            shutil.copytree(WORKSPACE, workspace)
        config.write_text(TOML.format(base=base, workspace=workspace, extra=extra))
        settings = load_settings(config, environ={"BENCH_UPSTREAM_KEY": "sk-fake"})
        app = create_app(settings, Ports(clock=clock))
        async with serving(app) as proxy:
            yield str(proxy.make_url("/v1/messages")), app


async def replay_setup(tmp: Path, names: list[str], extra: str | None) -> dict[str, float]:
    total = cached = written = 0
    for name in names:
        clock = SimClock()
        fake = FakeLLM(clock=clock)
        fake.cache = AnthropicCache()
        headers = {"x-api-key": "sk-replay", "X-Claude-Code-Session-Id": name[:-5]}
        async with proxied(tmp, fake, clock, extra) as (url, app), aiohttp.ClientSession() as http:
            for body in claude_code_requests(name):
                clock.advance()
                async with http.post(url, json=body, headers=headers) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{name}: status {response.status}")
                if app is not None:
                    await asyncio.gather(*list(app[LIFECYCLE].tasks))
        total += sum(s.prompt_tokens for s in fake.seen)
        cached += sum(s.cached_tokens for s in fake.seen)
        written += sum(s.written for s in fake.seen)
    cost = (total - cached - written) + 1.25 * written + 0.1 * cached
    return {"prompt_tokens": total, "cached": cached, "written": written, "cost": cost}


async def run(tmp: Path, *, quick: bool) -> list[dict[str, Any]]:
    names = trace_names()[::3] if quick else trace_names()
    direct = await replay_setup(tmp, names, None)
    rows = [{"setup": "direct (no proxy)", **direct}]
    for label, extra in SETUPS.items():
        rows.append({"setup": f"ctxproxy, {label}", **await replay_setup(tmp, names, extra)})
    for row in rows:
        row["relative_cost"] = row["cost"] / direct["prompt_tokens"]
        row["cached_share"] = row["cached"] / row["prompt_tokens"]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| setup | prompt tokens | cached share | cache writes | relative cost |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['setup']} | {r['prompt_tokens']:,} | {r['cached_share']:.1%} | "
        f"{r['written']:,} | {r['relative_cost']:.3f} |"
        for r in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.messages_markers")
    parser.add_argument("--quick", action="store_true", help="a third of the traces")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-markers-") as tmp:
        rows = asyncio.run(run(Path(tmp), quick=args.quick))
    print(table(rows))


if __name__ == "__main__":
    main()
