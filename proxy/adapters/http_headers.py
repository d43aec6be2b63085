"""Which headers cross the proxy, in each direction.

Hop-by-hop headers (RFC 9110 §7.6.1), `Proxy-*` and any name listed in `Connection` never cross.
Credentials are replaced, not forwarded, and ctxproxy's own `X-Ctx-*` headers stay here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from multidict import CIMultiDict

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authenticate",
        "proxy-authorization",
    }
)
CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key", "cookie"})
REBUILT = frozenset({"host", "content-length", "content-encoding", "accept-encoding"})


def _connection_listed(headers: Mapping[str, str]) -> set[str]:
    """Names listed in every `Connection` header (a request may carry several)."""
    getall = getattr(headers, "getall", None)
    values = getall("connection", []) if getall is not None else [headers.get("connection", "")]
    return {name.strip().lower() for value in values for name in (value or "").split(",")} - {""}


def _crosses(name: str, dropped: set[str]) -> bool:
    lower = name.lower()
    return not (lower in HOP_BY_HOP or lower.startswith("proxy-") or lower in dropped)


def upstream_request_headers(client: Mapping[str, str], *, rebuilt_body: bool) -> CIMultiDict[str]:
    """The client's headers to send upstream: no hop-by-hop, no credentials, no `X-Ctx-*`.

    With `rebuilt_body` the body is re-serialised, so its length and encoding headers go too.
    """
    dropped = _connection_listed(client) | CREDENTIALS
    if rebuilt_body:
        dropped |= REBUILT
    else:
        dropped.add("host")
    return CIMultiDict(
        (k, v)
        for k, v in _items(client)
        if _crosses(k, dropped) and not k.lower().startswith("x-ctx-")
    )


def client_response_headers(upstream: Mapping[str, str], *, decoded_body: bool) -> CIMultiDict[str]:
    """The upstream's response headers to relay; framing headers are aiohttp's to set."""
    dropped = _connection_listed(upstream) | {"content-length", "date", "server"}
    if decoded_body:
        dropped.add("content-encoding")
    return CIMultiDict((k, v) for k, v in _items(upstream) if _crosses(k, dropped))


def _items(headers: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    items = getattr(headers, "items", None)
    return list(items()) if items is not None else []
