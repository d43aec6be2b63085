"""Structured logs: one JSON object a line, with the id of the request being served."""

from __future__ import annotations

import json
import logging

import pytest

from proxy.logs import LOG_REQUEST_ID, JsonFormatter, redacted_url


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


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@db:6379/0", "redis://:***@db:6379/0"),
        ("rediss://app:s3cret@db.example:6380/1", "rediss://app:***@db.example:6380/1"),
        ("redis://app@db:6379/0", "redis://app@db:6379/0"),
        ("unix:///run/redis.sock?db=0&password=s3cret", "unix:///run/redis.sock?db=0&password=***"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("memory://", "memory://"),
    ],
)
def test_a_url_in_a_log_line_never_shows_its_password(url: str, shown: str) -> None:
    assert redacted_url(url) == shown
