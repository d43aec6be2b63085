"""A Responses stream's events for the client, fed the upstream's bytes as they arrive
(`proxy.server.responses_relay` copies what they give):

    NativeEvents      a Responses upstream's events as they came, watched for usage and the
                      finished response (`ResponsesUsageWatcher`); with `report_usage =
                      "client"` the terminal event alone is rewritten with the scaled usage; an
                      `error` event when the stream stops short
    TranslatedEvents  a chat upstream's chunks as Responses events (`ResponsesStreamTranslator`),
                      `response.failed` when the stream stops short

`Answer` is what the answer to one request is made of (the echo, the ids, the usage scale).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from proxy.inbound.responses_stream import ResponsesStreamTranslator
from proxy.inbound.responses_usage import TERMINAL, ResponsesUsageWatcher
from proxy.inbound.usage_report import scaled_responses_usage
from proxy.sse import SSEDecoder, sse_event
from proxy.types import JSON
from proxy.usage import Usage


class Answer(NamedTuple):
    """What the answer to one Responses request is made of."""

    request: Mapping[str, Any]
    """The client's body as sent: the Response echoes it."""
    response_id: str
    created_at: int
    scale: float | None = None
    """`report_usage = "client"`: the input tokens reported are scaled by this."""


class Events(Protocol):
    """A stream's events for the client, fed the upstream's bytes."""

    @property
    def done(self) -> bool: ...

    @property
    def usage(self) -> Usage | None: ...

    @property
    def response(self) -> JSON | None: ...

    def feed(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...

    def fail(self, message: str, code: str) -> bytes: ...


class NativeEvents:
    """A Responses upstream's events, copied as they came (the terminal one rewritten when the
    usage reported is scaled)."""

    def __init__(self, scale: float | None) -> None:
        self._watcher = ResponsesUsageWatcher()
        self._scale = scale
        self._decoder = SSEDecoder() if scale is not None else None
        self.done = False

    @property
    def usage(self) -> Usage | None:
        return self._watcher.usage

    @property
    def response(self) -> JSON | None:
        return self._watcher.response

    def feed(self, chunk: bytes) -> bytes:
        self._watcher.feed(chunk)
        self.done = self._watcher.response is not None
        if self._decoder is None:
            return chunk
        return b"".join(self._rewritten(e.event, e.data, e.raw) for e in self._decoder.feed(chunk))

    def _rewritten(self, name: str, data: str, raw: bytes) -> bytes:
        if name not in TERMINAL or self._scale is None:
            return raw
        payload = orjson.loads(data)
        response = payload["response"]
        usage = scaled_responses_usage(response.get("usage"), self._scale)
        return sse_event(name, {**payload, "response": {**response, "usage": usage}})

    def finish(self) -> bytes:
        if self.done:
            return b""
        return self.fail("The upstream stream ended before the response was complete.")

    def fail(self, message: str, code: str = "server_error") -> bytes:
        self.done = True
        event = {"type": "error", "code": code, "message": message, "param": None}
        return sse_event("error", {**event, "sequence_number": 0})


class TranslatedEvents:
    """A chat upstream's chunks as Responses events."""

    def __init__(self, answer: Answer) -> None:
        self._translator = ResponsesStreamTranslator(
            request=answer.request,
            response_id=answer.response_id,
            created_at=answer.created_at,
            scale=answer.scale,
        )

    @property
    def done(self) -> bool:
        return self._translator.done

    @property
    def usage(self) -> Usage | None:
        return self._translator.usage

    @property
    def response(self) -> JSON | None:
        return self._translator.response

    def feed(self, chunk: bytes) -> bytes:
        return self._translator.feed(chunk)

    def finish(self) -> bytes:
        return self._translator.finish()

    def fail(self, message: str, code: str = "server_error") -> bytes:
        return self._translator.fail(message, code)
