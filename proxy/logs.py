"""Structured JSON logs, one object per line. Message contents and secrets are never logged:
call sites log ids, counts and exception type names only. A record's `fields` (passed as
`extra={"fields": {...}}`, as the access line does) become keys of its object."""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

LOG_REQUEST_ID: ContextVar[str] = ContextVar("ctxproxy_request_id", default="")
"""The id of the request being served, set by the HTTP layer; each task has its own."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or LOG_REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info and record.exc_info[0] is not None:
            entry["exc"] = record.exc_info[0].__name__
        return json.dumps(entry)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
