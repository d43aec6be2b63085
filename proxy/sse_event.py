"""One Server-Sent Event: the record `SSEDecoder` dispatches, and the encoding of a new one.

Pure: no I/O, no state. `SSEvent` keeps the exact bytes an event occupied on the wire so a relay
never re-encodes what it forwards; `encode_event` writes an event the proxy makes itself.
"""

from __future__ import annotations

from typing import NamedTuple


class SSEvent(NamedTuple):
    """One dispatched event: its fields and the raw bytes it occupied on the wire.

    A named tuple rather than a frozen dataclass: one is built per event of every stream."""

    raw: bytes
    data: str = ""
    event: str = ""
    id: str | None = None
    is_comment_only: bool = False


def encode_event(data: str, *, event: str = "") -> bytes:
    """Encode one event with `\\n` line ends; multi-line data becomes several `data:` lines."""
    head = f"event: {event}\n" if event else ""
    body = "".join(f"data: {line}\n" for line in data.split("\n"))
    return (head + body + "\n").encode()
