"""The "Python floor": a minimal aiohttp pass-through, run as its own process.

Parse the JSON body, re-serialise it, forward it with one shared client session, and stream the
answer back chunk by chunk. `python -m benchmarks.passthrough --port N --upstream URL`.
"""

from __future__ import annotations

import argparse

import aiohttp
import orjson
from aiohttp import web

SESSION = web.AppKey("session", aiohttp.ClientSession)
UPSTREAM = web.AppKey("upstream", str)
DROPPED = {"host", "content-length", "transfer-encoding", "connection"}


async def chat(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    headers = {k: v for k, v in request.headers.items() if k.lower() not in DROPPED}
    headers["Content-Type"] = "application/json"
    url = request.app[UPSTREAM] + request.path.removeprefix("/v1")
    async with request.app[SESSION].post(url, data=orjson.dumps(body), headers=headers) as up:
        if not body.get("stream"):
            return web.Response(
                body=await up.read(), status=up.status, content_type=up.content_type
            )
        response = web.StreamResponse(status=up.status, headers={"Content-Type": up.content_type})
        await response.prepare(request)
        async for chunk in up.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
    app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await app[SESSION].close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:9000/v1")
    args = parser.parse_args()
    app = web.Application(client_max_size=1 << 30)
    app[UPSTREAM] = args.upstream
    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
