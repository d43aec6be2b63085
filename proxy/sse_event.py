"""One Server-Sent Event as `SSEDecoder` dispatches it. Pure: no I/O, no state.

`SSEvent` keeps the exact bytes an event occupied on the wire, so a relay never re-encodes what it
forwards.
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
