"""What a relay saw (`Relayed`), and a whole JSON answer relayed to the client.

A body is forwarded as it came, with the upstream's headers and ours over them; usage is picked
out of a 200 answer. Streams are relayed event by event by `proxy.server.stream_relay`, which
returns the same `Relayed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from aiohttp import web
from multidict import CIMultiDict

from proxy.ports import UpstreamReply
from proxy.usage import Usage, usage_from_body


class Relayed(NamedTuple):
    """What the relay saw: usage (if any), whether the answer completed, time to first byte."""

    usage: Usage | None
    completed: bool
    first_byte_s: float | None = None
    error: str = ""


async def relay_body(
    request: web.Request, reply: UpstreamReply, *, headers: Mapping[str, str]
) -> tuple[web.Response, Relayed]:
    body = reply.body or b""
    response = web.Response(
        status=reply.status, body=body, headers=with_ours(reply.headers, headers)
    )
    usage = usage_from_body(body) if reply.status == 200 else None
    return response, Relayed(usage=usage, completed=reply.status == 200)


def with_ours(upstream: Mapping[str, str], ours: Mapping[str, str]) -> CIMultiDict[str]:
    """The upstream's headers, repeated ones kept (`Set-Cookie`), ours replacing any same name."""
    merged = CIMultiDict(upstream)
    merged.update(ours)
    return merged
