"""Requests that aiohttp's HTTP parser refuses, answered and logged like every other bad request.

A header line over 8,190 bytes, a NUL or control character in a header, a bare LF, both
`Transfer-Encoding` and `Content-Length`, an unsupported `Content-Encoding`: aiohttp answers these
itself, before any middleware, with a `text/plain` 400, and logs them at error level with a
traceback as if the server had failed. Here:

    ServerLog        the `logger` of aiohttp's connection handlers (`SERVER_HANDLER_ARGS`, which
                     `create_app` passes): a client's malformed request is one warning line
                     naming the exception type, never an error; whatever runner serves the app
    ProxyRunner      an `AppRunner` whose connections answer those requests OpenAI-shaped
                     (`ParserErrorHandler`); `ctxproxy serve` runs it (`proxy.server.runner`)

A body that cannot be decoded (`Content-Encoding: gzip` over bytes that are not gzip) is found
only when the handler reads it: the error boundary answers it (400, OpenAI-shaped).
"""

from __future__ import annotations

import logging
import sys
from types import MappingProxyType
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from proxy.errors import error_body

log = logging.getLogger(__name__)


def client_fault(exc: BaseException | None) -> HttpProcessingError | None:
    """The 4xx parser error behind `exc` (itself, or what it was raised from), if any."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, HttpProcessingError) and 400 <= exc.code < 500:
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def reason_of(fault: HttpProcessingError) -> str:
    """aiohttp's one-line reason, without the request bytes it quotes after it."""
    first = fault.message.strip().split("\n", 1)[0]
    return first.split(": b'", 1)[0].split(" b'", 1)[0].rstrip(" :") or type(fault).__name__


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, with a client's malformed request logged at warning."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        fault = client_fault(exc)
        if fault is None:
            self.logger.exception(msg, *args, exc_info=exc_info, **kw)
            return
        log.warning("malformed request refused by the HTTP parser: %s", type(fault).__name__)


SERVER_HANDLER_ARGS = MappingProxyType({"logger": ServerLog(logging.getLogger("aiohttp.server"))})
"""`web.Application(handler_args=...)`: settings of every connection handler."""


class ParserErrorHandler(RequestHandler):
    """A connection handler answering the parser's 4xx refusals OpenAI-shaped."""

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        fault = client_fault(exc)
        if status >= 500 or fault is None:
            return super().handle_error(request, status, exc, message)
        log.warning("malformed request refused by the HTTP parser: %s", type(fault).__name__)
        if request.writer.output_size > 0:  # as aiohttp: an answer has begun, none can follow
            raise ConnectionError("an answer was sent already")
        body = error_body(
            f"Malformed HTTP request: {reason_of(fault)}.",
            "invalid_request_error",
            code="malformed_request",
        )
        response = web.json_response(body, status=status)
        response.force_close()
        return response


class _ProxyServer(web.Server):
    def __call__(self) -> RequestHandler:
        return ParserErrorHandler(self, loop=self._loop, **self._kwargs)


class ProxyRunner(web.AppRunner):
    """`web.AppRunner` whose connections are `ParserErrorHandler`s."""

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts the app, as AppRunner does
        return _ProxyServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            **plain._kwargs,
        )
