"""The Messages route next to the chat-completions route, in the same run:
`python -m benchmarks.messages_route [--seconds S] [--rounds N] [--sizes small,agentic,coding]`
(about 2 minutes with the defaults).

One ctxproxy process (`python -m proxy serve`, memory store, the example workspace, compaction
never triggering) in front of the fast fake upstream (`benchmarks.upstream`, which answers both
`/v1/chat/completions` and `/v1/messages` with pre-encoded bytes), with two tenants told apart by
their key: one on an OpenAI-compatible upstream, one on an Anthropic upstream. Routes:

    chat                   POST /v1/chat/completions → OpenAI upstream (the reference)
    messages → openai      POST /v1/messages → OpenAI upstream (request and answer translated)
    chat → anthropic       POST /v1/chat/completions → Anthropic upstream (translated both ways,
                           `cache_style = "anthropic"`: breakpoints placed)
    messages → anthropic   POST /v1/messages → Anthropic upstream (rendered around the client's
                           body, breakpoints placed, the answer relayed untouched)

The bodies are the overhead benchmark's (`benchmarks.payloads`), the Messages ones converted from
them as an Anthropic client would send them (`proxy.translate.anthropic_request`). Requests go
one at a time; each route gets `--seconds` per cell per round, the routes taking turns (A B C D
A B C D), and **proxy CPU µs per request** is the proxy process's utime + stime over the requests it
answered (`/proc/<pid>/stat`), the median of the rounds (a shared machine's bursts of other load
land in one round, not in all).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchmarks.common import PYTHON, cpu_seconds, descendants, free_port, running
from benchmarks.payloads import body_for
from benchmarks.targets import WORKSPACE
from proxy.server.keys import digest
from proxy.translate.anthropic_request import to_messages_request

KEYS = {"openai": "sk-bench-openai", "anthropic": "sk-bench-anthropic"}
ROUTES = {  # name: (path, tenant, body format)
    "chat": ("/v1/chat/completions", "openai", "chat"),
    "messages → openai": ("/v1/messages", "openai", "messages"),
    "chat → anthropic": ("/v1/chat/completions", "anthropic", "chat"),
    "messages → anthropic": ("/v1/messages", "anthropic", "messages"),
}
TOML = """
[server]
port = {port}
[store]
url = "memory://"
[upstreams.openai]
kind = "openai"
base_url = "{base}/v1"
api_key_env = "BENCH_UPSTREAM_KEY"
[upstreams.anthropic]
kind = "anthropic"
base_url = "{base}"
api_key_env = "BENCH_UPSTREAM_KEY"
[tenants.openai]
keys = ["{openai}"]
forward_client_key = false
workspace = "{workspace}"
upstream = "openai"
model_window = 128000
[tenants.anthropic]
keys = ["{anthropic}"]
forward_client_key = false
workspace = "{workspace}"
upstream = "anthropic"
model_window = 128000
"""


@contextlib.contextmanager
def serving(tmp: Path) -> Iterator[tuple[str, list[int]]]:
    """The fake upstream and ctxproxy; (ctxproxy's base URL, its pids)."""
    up_port, port = free_port(), free_port()
    upstream = [PYTHON, "-m", "benchmarks.upstream", "--port", str(up_port)]
    with running(upstream, port=up_port, log=tmp / "upstream.log"):
        config = tmp / "ctxproxy.toml"
        workspace = tmp / "ws"  # a copy: the embedded store would archive into sessions/
        shutil.copytree(WORKSPACE, workspace)
        config.write_text(
            TOML.format(
                port=port,
                base=f"http://127.0.0.1:{up_port}",
                workspace=workspace,
                openai=digest(KEYS["openai"]),
                anthropic=digest(KEYS["anthropic"]),
            )
        )
        argv = [PYTHON, "-m", "proxy", "serve", "--config", str(config), "--log-level", "WARNING"]
        env = {"BENCH_UPSTREAM_KEY": "sk-fake"}
        with running(argv, port=port, log=tmp / "ctxproxy.log", env=env) as proc:
            yield f"http://127.0.0.1:{port}", descendants(proc.pid)


def bodies(size: str, stream: bool) -> dict[str, bytes]:
    """The encoded body of each format for one cell."""
    chat = body_for(size, stream=stream)
    messages = to_messages_request({**chat, "model": "claude-sonnet-4-5"})
    return {"chat": orjson.dumps(chat), "messages": orjson.dumps(messages)}


async def load(base: str, route: str, body: bytes, seconds: float) -> tuple[int, int]:
    """(requests answered 200, others) sending `body` back to back for `seconds`."""
    path, tenant, _ = ROUTES[route]
    headers = {
        "Content-Type": "application/json",
        "x-api-key": KEYS[tenant],
        "Authorization": f"Bearer {KEYS[tenant]}",
    }
    done = failed = 0
    async with aiohttp.ClientSession() as http:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            async with http.post(base + path, data=body, headers=headers) as response:
                await response.read()
                if response.status == 200:
                    done += 1
                else:
                    failed += 1
    return done, failed


def run_cells(
    base: str, pids: list[int], sizes: list[str], *, seconds: float, rounds: int
) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        for stream in (False, True):
            encoded = bodies(size, stream)
            samples: dict[str, list[float]] = {route: [] for route in ROUTES}
            count = dict.fromkeys(ROUTES, 0)
            errors = dict.fromkeys(ROUTES, 0)
            for route in ROUTES:  # warm-up: the first requests import and fill memos
                asyncio.run(load(base, route, encoded[ROUTES[route][2]], 0.3))
            for _ in range(rounds):
                for route in ROUTES:
                    before = cpu_seconds(pids)
                    done, failed = asyncio.run(
                        load(base, route, encoded[ROUTES[route][2]], seconds)
                    )
                    samples[route].append((cpu_seconds(pids) - before) / max(done, 1) * 1e6)
                    count[route] += done
                    errors[route] += failed
            for route in ROUTES:
                rows.append(
                    {
                        "size": size,
                        "stream": stream,
                        "route": route,
                        "requests": count[route],
                        "errors": errors[route],
                        "cpu_us": statistics.median(samples[route]),
                        "body_kb": len(encoded[ROUTES[route][2]]) / 1024,
                    }
                )
            chat = rows[-len(ROUTES)]["cpu_us"]
            print(
                f"  {size} {'stream' if stream else 'json'}: "
                + ", ".join(
                    f"{r['route']} {r['cpu_us']:.0f}µs ({r['cpu_us'] / chat:.2f}x)"
                    for r in rows[-len(ROUTES) :]
                ),
                flush=True,
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| body | answer | route | body KB | requests | proxy CPU µs/request | vs chat |",
        "|---|---|---|---|---|---|---|",
    ]
    chat: dict[tuple[str, bool], float] = {}
    for row in rows:
        key = (row["size"], row["stream"])
        if row["route"] == "chat":
            chat[key] = row["cpu_us"]
        lines.append(
            f"| {row['size']} | {'stream' if row['stream'] else 'JSON'} | "
            f"{row['route']} | {row['body_kb']:.0f} | {row['requests']} | "
            f"{row['cpu_us']:.0f} | {row['cpu_us'] / chat[key]:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.messages_route")
    parser.add_argument("--seconds", type=float, default=0.75, help="per route, cell and round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sizes", default="small,agentic,coding")
    args = parser.parse_args()
    import tempfile

    with (
        tempfile.TemporaryDirectory(prefix="bench-messages-") as tmp,
        serving(Path(tmp)) as (base, pids),
    ):
        rows = run_cells(
            base, pids, args.sizes.split(","), seconds=args.seconds, rounds=args.rounds
        )
    print(table(rows))


if __name__ == "__main__":
    main()
