"""One Server-Sent Event written for a client: a named event holding compact JSON (pure).

Shared by the translated streams (`proxy.inbound.messages_stream`,
`proxy.inbound.responses_stream`); a relayed stream is copied as it came and never written here.
"""

from __future__ import annotations

import orjson

from proxy.types import JSON


def sse_event(name: str, payload: JSON) -> bytes:
    """One named SSE event holding `payload` as compact JSON."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
