"""Raw TCP upstreams for faults aiohttp's server will not produce on demand."""

from __future__ import annotations

import asyncio
import contextlib

import orjson

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)


class RawUpstream:
    """A loopback HTTP/1.1 server scripted per connection.

    `mode="reset"`: every connection is reset as soon as its request head arrived.
    `mode="stale"`: each connection answers one request with keep-alive, then closes as the
    next request arrives, without answering: exactly what a pooled connection looks like when
    the upstream's idle timer fired while the request was on its way.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.connections = 0
        self.answered = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            async with asyncio.timeout(10):
                await self._requests(reader, writer)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            with contextlib.suppress(OSError):
                writer.transport.abort()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if self.mode == "reset":
            return
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(COMPLETION)
            + COMPLETION
        )
        await writer.drain()
        self.answered += 1
        await reader.readuntil(b"\r\n\r\n")  # the next request: drop it unanswered


class RecordingUpstream(RawUpstream):
    """Answers every request with `200 {}` and records its request line and headers exactly as
    they arrived (no server-side parsing or normalising of the target)."""

    def __init__(self) -> None:
        super().__init__("record")
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        """(method, request target as sent, headers with lower-case names)"""

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *fields = head.decode("latin-1").split("\r\n")
            method, target, _ = line.split(" ", 2)
            headers = {}
            for field in filter(None, fields):
                name, _, value = field.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.requests.append((method, target, headers))
            await reader.readexactly(int(headers.get("content-length", "0")))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            )
            await writer.drain()


def _chunk_event(content: str) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": None}
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip
    return b"data: " + orjson.dumps(body) + b"\n\n"


class EndingSSEUpstream(RawUpstream):
    """Streams three `data:` chunks, then ends its body cleanly without `[DONE]`: with a chunked
    terminator (`framing="chunked"`) or by closing a close-delimited body (`"close"`)."""

    EVENTS = (_chunk_event("a"), _chunk_event("b"), _chunk_event("c"))

    def __init__(self, framing: str) -> None:
        super().__init__(framing)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                await reader.readexactly(int(value))
        chunked = self.mode == "chunked"
        framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Connection: close\r\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + framing + b"\r\n")
        for event in self.EVENTS:
            writer.write(b"%x\r\n%s\r\n" % (len(event), event) if chunked else event)
            await writer.drain()
            await asyncio.sleep(0.01)
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            await reader.read()  # keep the connection until the proxy lets it go
        else:
            writer.close()
        self.answered += 1
