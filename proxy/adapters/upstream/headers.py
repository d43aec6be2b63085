"""Which headers cross the proxy, in each direction, and the loop marker.

Hop-by-hop headers (RFC 9110 §7.6.1), `Proxy-*` and any name listed in `Connection` never cross.
Credentials are replaced, not forwarded, and ctxproxy's own `X-Ctx-*` headers stay here, except
one: `X-Ctx-Via`, the loop marker. Every request a proxy sends upstream carries the ids of the
proxies it already passed, then its own (`via_chain`); a request that arrives carrying a proxy's
own id has come back to it (`came_back`): its upstream is, through however many hops, itself.
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

# Names dropped whatever the request, per direction and body handling (lower case).
_TO_UPSTREAM_REBUILT = HOP_BY_HOP | CREDENTIALS | REBUILT
_TO_UPSTREAM_AS_IS = HOP_BY_HOP | CREDENTIALS | {"host"}
_TO_CLIENT = HOP_BY_HOP | {"content-length", "date", "server"}
_TO_CLIENT_DECODED = _TO_CLIENT | {"content-encoding"}
_NEVER_PREFIXES = ("proxy-",)
_NEVER_UPSTREAM_PREFIXES = ("proxy-", "x-ctx-")


def _connection_listed(headers: Mapping[str, str]) -> frozenset[str]:
    """Names listed in every `Connection` header (a request may carry several)."""
    getall = getattr(headers, "getall", None)
    values = getall("connection", []) if getall is not None else [headers.get("connection", "")]
    names = {name.strip().lower() for value in values for name in (value or "").split(",")}
    return frozenset(names - {""})


def _filtered(
    headers: Mapping[str, str], dropped: frozenset[str], prefixes: tuple[str, ...]
) -> CIMultiDict[str]:
    if "connection" in headers or "Connection" in headers:
        dropped = dropped | _connection_listed(headers)
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in _items(headers):
        lower = name.lower()
        if lower not in dropped and not lower.startswith(prefixes):
            out.add(name, value)
    return out


def upstream_request_headers(
    client: Mapping[str, str], *, rebuilt_body: bool, via: str | None = None
) -> CIMultiDict[str]:
    """The client's headers to send upstream: no hop-by-hop, no credentials, no `X-Ctx-*`;
    with `via` (this proxy's instance id), the loop marker `via_chain` makes.

    With `rebuilt_body` the body is re-serialised, so its length and encoding headers go too.
    """
    dropped = _TO_UPSTREAM_REBUILT if rebuilt_body else _TO_UPSTREAM_AS_IS
    out = _filtered(client, dropped, _NEVER_UPSTREAM_PREFIXES)
    if via:
        out[VIA] = via_chain(client, via)
    return out


VIA = "X-Ctx-Via"


def via_chain(client: Mapping[str, str], instance: str) -> str:
    """The loop marker to send upstream: the ids the client's request carried, then `instance`."""
    return ", ".join([*_via_ids(client), instance])


def came_back(headers: Mapping[str, str], instance: str) -> bool:
    """True when `headers` carry `instance` in their loop marker: the request was sent by this
    very proxy (its upstream leads back to it)."""
    return instance in _via_ids(headers)


def _via_ids(headers: Mapping[str, str]) -> list[str]:
    getall = getattr(headers, "getall", None)
    values = getall(VIA, []) if getall is not None else [headers.get(VIA, "")]
    return [part.strip() for value in values for part in (value or "").split(",") if part.strip()]


def client_response_headers(upstream: Mapping[str, str], *, decoded_body: bool) -> CIMultiDict[str]:
    """The upstream's response headers to relay; framing headers are aiohttp's to set."""
    return _filtered(upstream, _TO_CLIENT_DECODED if decoded_body else _TO_CLIENT, _NEVER_PREFIXES)


def _items(headers: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    items = getattr(headers, "items", None)
    return items() if items is not None else ()
