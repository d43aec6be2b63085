"""Errors of ctxproxy, rendered by one boundary as OpenAI-shaped JSON.

    CtxProxyError                 base; carries status, type and code for the error body
    ├── ConfigError               a bad config key (start-up only; names the key and the file)
    ├── BadRequest                400: invalid JSON, missing or ill-typed fields
    │   └── BodyTooLarge          413: body over `max_body_bytes`
    ├── Unauthorized              401: missing or unknown bearer (`invalid_api_key`)
    ├── Forbidden                 403: a known key on a route it is not for (an admin key of no
    │                             tenant on a model route)
    ├── NotFound                  404: unknown output, session, or route
    ├── UpstreamUnreachable       502: connect refused/reset before headers
    ├── UpstreamTimeout           504: connect or first-byte bound exceeded
    ├── LoopDetected              508: the request carries this proxy's own loop marker
    └── StoreUnavailable          the state store failed; callers degrade, never fail a request

    ValueError
    └── InvalidSetting            a settings dataclass refused a value (`proxy.config` turns it
                                  into a ConfigError naming the key)

Upstream HTTP errors are not exceptions here: they are relayed as they came.
"""

from __future__ import annotations

from typing import Any


class CtxProxyError(Exception):
    status = 500
    error_type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def to_body(self) -> dict[str, Any]:
        return error_body(self.message, self.error_type, param=self.param, code=self.code)


class ConfigError(CtxProxyError):
    def __init__(self, message: str, *, key: str, file: str) -> None:
        super().__init__(f"{file}: {key}: {message}")
        self.key = key
        self.file = file


class InvalidSetting(ValueError):
    """A value outside its setting's rule: `name` is the field, `rule` says what it must be."""

    def __init__(self, name: str, rule: str) -> None:
        super().__init__(f"{name} {rule}")
        self.name = name
        self.rule = rule


class BadRequest(CtxProxyError):
    status = 400
    error_type = "invalid_request_error"


class BodyTooLarge(BadRequest):
    status = 413
    code = "request_too_large"


class Unauthorized(CtxProxyError):
    status = 401
    error_type = "invalid_request_error"
    code = "invalid_api_key"


class Forbidden(CtxProxyError):
    status = 403
    error_type = "invalid_request_error"


class NotFound(CtxProxyError):
    status = 404
    error_type = "invalid_request_error"
    code = "not_found"


class UpstreamUnreachable(CtxProxyError):
    status = 502
    error_type = "upstream_error"
    code = "upstream_unreachable"


class UpstreamTimeout(CtxProxyError):
    status = 504
    error_type = "upstream_error"
    code = "upstream_timeout"


class LoopDetected(CtxProxyError):
    status = 508
    error_type = "server_error"
    code = "loop_detected"


class StoreUnavailable(CtxProxyError):
    status = 503
    error_type = "server_error"
    code = "store_unavailable"


def error_body(
    message: str, error_type: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The OpenAI error shape: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}
