"""Start-up checks that need the final settings (the listen address once `serve` has applied
its flags): an upstream at the proxy's own address would send every request back to it."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from proxy.errors import ConfigError
from proxy.settings import Settings


def check_upstreams_are_not_self(settings: Settings) -> None:
    """Raise `ConfigError` when an upstream's `base_url` is the proxy's own listen address
    (same port; loopback, `localhost` and the wildcard addresses count as one host): every
    request would come back to the proxy itself. Checked once the address is final (`serve`)."""
    server = settings.server
    for name, upstream in settings.upstreams.items():
        if _same_address(upstream.base_url, server.host, server.port):
            from_env = settings.source == "<defaults>"
            key = "OPENAI_BASE_URL" if from_env else f"upstreams.{name}.base_url"
            raise ConfigError(
                f"{upstream.base_url} is this proxy's own address ({server.host}:{server.port});"
                " every request would come back to it",
                key=key,
                file="<environment>" if from_env else settings.source,
            )


def _same_address(url: str, host: str, port: int) -> bool:
    parts = urlsplit(url)
    try:
        url_port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # not a port number: not an address either
        return False
    url_host, host = (parts.hostname or "").lower(), host.strip("[]").lower()
    return url_port == port and (url_host == host or (_is_local(url_host) and _is_local(host)))


def _is_local(host: str) -> bool:
    """Loopback (127.0.0.0/8, ::1, `localhost`) or a wildcard (0.0.0.0, ::): this machine."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
