"""Serve the app on one TCP socket until SIGINT or SIGTERM, saying what happens.

The socket is bound here, or handed over already bound (`sock`: a worker of several,
`proxy.server.workers`).

The socket is bound before anything is announced: a port in use (or a host that cannot be
listened on) is an `OSError` raised to the caller, which makes one line of it, never a
"serving on" followed by a traceback. On the first signal the proxy stops accepting, says how
many requests it drains, lets them finish within the drain timeout (`Lifecycle.drain` ends the
streams still running then), tears the app down and says "stopped". A second Ctrl-C interrupts
the drain (`KeyboardInterrupt`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web

from proxy.server.appkeys import LIFECYCLE
from proxy.server.parser_errors import ProxyRunner

log = logging.getLogger("proxy")

SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve(
    app: web.Application,
    *,
    host: str = "",
    port: int = 0,
    drain_s: float,
    on_serving: Callable[[str], None],
    stop: asyncio.Event | None = None,
    signals: bool = False,
    sock: socket.socket | None = None,
) -> None:
    """Serve `app` on `host`:`port` (or on the listening socket `sock`) until a signal or until
    `stop` is set. Signal handlers are installed unless `stop` is given (and then too with
    `signals`). `on_serving` gets the URL once the socket is bound."""
    runner = ProxyRunner(  # its connections answer what aiohttp's parser refuses OpenAI-shaped
        app, access_log=None, handler_cancellation=True, shutdown_timeout=drain_s
    )
    await runner.setup()
    try:
        site = web.SockSite(runner, sock) if sock else web.TCPSite(runner, host, port)
        await site.start()
        on_serving(bound_url(runner.addresses[0]))
        await _until_stopped(stop or asyncio.Event(), signals=stop is None or signals)
        log.info(
            "shutting down (draining %d requests, at most %gs)…", app[LIFECYCLE].in_flight, drain_s
        )
    finally:
        await runner.cleanup()
    log.info("stopped")


async def _until_stopped(stop: asyncio.Event, *, signals: bool) -> None:
    if not signals:
        await stop.wait()
        return
    loop = asyncio.get_running_loop()
    for signum in SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in SIGNALS:  # back to the defaults: a second Ctrl-C stops the drain
            loop.remove_signal_handler(signum)


def bound_url(address: Any) -> str:
    """`http://host:port` of a bound socket's address (`[…]` around an IPv6 host)."""
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
