"""An Anthropic upstream's event stream on its way to a Messages client, incrementally (pure).

Feed the upstream's bytes as they arrive (`feed`); each call returns the bytes to send: the
complete events among them exactly as they came (a partial event is held back until it is
whole, so that an error event written after a cut never lands inside one). On the way:

    message_start, message_delta   usage read (`proxy.inbound.messages_usage`); rescaled for
                                   `report_usage = "client"` when a `scale` is given
                                   (`proxy.inbound.client_usage`), else untouched
    message_stop                   `complete`: the answer is whole; nothing after it is passed
    error                          `failed`: the upstream told the client; nothing after it

`fail(message)` is the error event ending a stream the upstream cut (or left idle, or ended
before `message_stop`), in the API's own shape.
"""

from __future__ import annotations

from proxy.inbound.client_usage import rescaled_event
from proxy.inbound.messages_usage import MessagesUsageWatcher
from proxy.sse import SSEDecoder, SSEvent, sse_event
from proxy.usage import Usage

STOP = "message_stop"
ERROR = "error"


class PassedEvents:
    """One relayed stream; one instance per request."""

    def __init__(self, *, scale: float | None = None) -> None:
        self._decoder = SSEDecoder()
        self._watcher = MessagesUsageWatcher()
        self._scale = scale
        self.complete = False
        self.failed = False

    @property
    def usage(self) -> Usage | None:
        """The usage read so far (chat form: prompt = input + cache read + cache creation)."""
        return self._watcher.usage

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet complete."""
        return self._decoder.pending

    @property
    def tail(self) -> bytes:
        """Line-end bytes after the last event (`proxy.sse.SSEDecoder.tail`)."""
        return self._decoder.tail

    @property
    def over(self) -> bool:
        return self.complete or self.failed

    def feed(self, chunk: bytes) -> bytes:
        out = bytearray()
        for event in self._decoder.feed(chunk):
            if self.over:
                break
            self._watcher.see(event)
            kind = _kind(event)
            self.complete = kind == STOP
            self.failed = kind == ERROR
            out += event.raw if self._scale is None else rescaled_event(event, self._scale)
        return bytes(out)

    def fail(self, message: str, error_type: str = "api_error") -> bytes:
        """The error event that ends the stream (nothing once it is over)."""
        if self.over:
            return b""
        self.failed = True
        payload = {"type": "error", "error": {"type": error_type, "message": message}}
        return sse_event("error", payload)


def _kind(event: SSEvent) -> str:
    """The event's name; for an unnamed one, the end or an error told by its data."""
    if event.event:
        return event.event
    head = event.data[:40]
    if f'"{STOP}"' in head:
        return STOP
    return ERROR if '"type":"error"' in head.replace(" ", "") else ""
