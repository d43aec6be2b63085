"""How many of ctxproxy's files and functions one non-streaming chat request touches, and how
often the request goes back into a file it already left: `python -m benchmarks.request_path`.

The proxy and a fast fake upstream run in this process; one warm-up request, then one request
(the `small` benchmark body, or `--size`) is followed with `sys.setprofile` from the moment it is
sent until its after-work (session record, events, metrics) is done. Every Python call whose code
lives in `proxy/` counts: files, functions (by qualified name), and entries into each file (a
call into a file other than the caller's). A coroutine resumed after an await is not a new call.
Import-time code and start-up are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

import proxy
from benchmarks import upstream
from benchmarks.payloads import body_for
from benchmarks.targets import ctxproxy_config
from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.server.appkeys import LIFECYCLE

ROOT = str(Path(proxy.__file__).resolve().parent)


class Tracer:
    """Records the calls into `proxy/` code, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (caller's file, file, function)
        self._frames: dict[int, FrameType] = {}  # held: an id is not reused while tracing

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(ROOT):
            return
        if id(frame) in self._frames:  # a generator or coroutine resumed, not called
            return
        self._frames[id(frame)] = frame
        caller = frame.f_back.f_code.co_filename if frame.f_back is not None else ""
        self.calls.append((caller, code.co_filename, code.co_qualname))


async def follow(size: str) -> Tracer:
    fake = web.Application()
    fake.router.add_post("/v1/chat/completions", upstream.chat)
    tracer = Tracer()
    with tempfile.TemporaryDirectory(prefix="bench-path-") as tmp:
        async with TestServer(fake) as fake_server:
            base = str(fake_server.make_url("/v1"))
            config = ctxproxy_config(Path(tmp), base, 0)
            settings = load_settings(config, environ={"BENCH_UPSTREAM_KEY": "sk-fake"})
            app = create_app(settings)
            async with TestServer(app) as server, aiohttp.ClientSession() as client:
                url = str(server.make_url("/v1/chat/completions"))
                body = body_for(size, stream=False)
                for run in range(2):
                    if run:
                        sys.setprofile(tracer)
                    async with client.post(url, json=body) as response:
                        assert response.status == 200, await response.text()
                        await response.read()
                    await asyncio.gather(*list(app[LIFECYCLE].tasks))
                    sys.setprofile(None)
    return tracer


def report(tracer: Tracer) -> None:
    def short(path: str) -> str:
        return str(Path(path).relative_to(Path(ROOT).parent))

    files = collections.Counter(short(f) for _, f, _ in tracer.calls)
    functions = {(short(f), name) for _, f, name in tracer.calls}
    entries = collections.Counter(short(f) for caller, f, _ in tracer.calls if caller != f)
    print(f"{len(files)} files, {len(functions)} functions, {len(tracer.calls)} calls")
    print("entries into each file (calls from another file), most first:")
    for name, count in entries.most_common():
        print(f"  {count:4d}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=("small", "agentic", "coding"))
    args = parser.parse_args(argv)
    report(asyncio.run(follow(args.size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
