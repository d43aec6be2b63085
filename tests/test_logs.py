"""Structured logs: one JSON object a line, with the id of the request being served."""

from __future__ import annotations

import json
import logging

from proxy.logs import LOG_REQUEST_ID, JsonFormatter


def test_log_lines_are_json_with_the_request_id() -> None:
    record = logging.LogRecord(
        "proxy.x", logging.WARNING, __file__, 1, "stage %s skipped", ("prune",), None
    )
    token = LOG_REQUEST_ID.set("abc123")
    try:
        line = json.loads(JsonFormatter().format(record))
    finally:
        LOG_REQUEST_ID.reset(token)
    assert line["msg"] == "stage prune skipped"
    assert line["request_id"] == "abc123" and line["level"] == "warning"


def test_outside_a_request_there_is_no_request_id() -> None:
    record = logging.LogRecord("proxy.x", logging.INFO, __file__, 1, "hello", (), None)
    assert "request_id" not in json.loads(JsonFormatter().format(record))
