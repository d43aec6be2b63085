"""The load generator, run as its own process: one JSON command per stdin line, one JSON result
per stdout line. `python -m benchmarks.loadgen`.

Command: {"url", "size", "stream", "concurrency", "duration"}. `concurrency` workers send the
pre-encoded body back to back on keep-alive connections until `duration` has passed; requests in
flight then finish and count. Result: requests, errors, elapsed, latencies and stream TTFBs (s).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import aiohttp
import orjson

from benchmarks.payloads import encoded_bodies

HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}


async def one(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, float]:
    """(latency, ttfb) of one request; ttfb is the first body chunk of the answer."""
    started = time.perf_counter()
    ttfb = 0.0
    async with session.post(url, data=body, headers=HEADERS) as response:
        async for _chunk in response.content.iter_any():
            ttfb = ttfb or time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"status {response.status}")
    return time.perf_counter() - started, ttfb


async def worker(
    session: aiohttp.ClientSession, url: str, body: bytes, deadline: float, out: dict[str, Any]
) -> None:
    while time.perf_counter() < deadline:
        try:
            latency, ttfb = await one(session, url, body)
        except (TimeoutError, aiohttp.ClientError, RuntimeError) as exc:
            out["errors"] += 1
            out["last_error"] = repr(exc)[:200]
            continue
        out["latencies"].append(latency)
        out["ttfbs"].append(ttfb)


async def run(command: dict[str, Any], bodies: dict[tuple[str, bool], bytes]) -> dict[str, Any]:
    body = bodies[(command["size"], command["stream"])]
    out: dict[str, Any] = {"latencies": [], "ttfbs": [], "errors": 0}
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        deadline = started + command["duration"]
        await asyncio.gather(
            *(
                worker(session, command["url"], body, deadline, out)
                for _ in range(command["concurrency"])
            )
        )
        out["elapsed"] = time.perf_counter() - started
    out["requests"] = len(out["latencies"])
    return out


async def main() -> None:
    bodies = encoded_bodies()
    loop = asyncio.get_running_loop()
    print(orjson.dumps({"ready": True}).decode(), flush=True)
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        result = await run(orjson.loads(line), bodies)
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
