"""Usage as upstreams report it, including the usage-only stream chunk in both forms."""

from __future__ import annotations

import pytest

from proxy.usage import Usage, is_usage_only_chunk, usage_from, usage_from_body


def test_openai_usage_with_cached_tokens() -> None:
    body = (
        b'{"usage": {"prompt_tokens": 10, "completion_tokens": 2, '
        b'"prompt_tokens_details": {"cached_tokens": 4}}}'
    )
    assert usage_from_body(body) == Usage(10, 2, 4, 0)


def test_anthropic_style_fields_are_read_too() -> None:
    payload = {
        "usage": {
            "prompt_tokens": 10,
            "cache_read_input_tokens": 6,
            "cache_creation_input_tokens": 3,
        }
    }
    assert usage_from(payload) == Usage(10, 0, 6, 3)


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"usage": null}', b'{"usage": "x"}'])
def test_missing_or_malformed_usage_is_none(body: bytes) -> None:
    assert usage_from_body(body) is None


def test_usage_only_chunk_forms() -> None:
    assert is_usage_only_chunk({"choices": [], "usage": {"prompt_tokens": 1}})
    assert is_usage_only_chunk({"choices": None, "usage": {"prompt_tokens": 1}})
    assert not is_usage_only_chunk({"choices": [{"delta": {}}], "usage": {"prompt_tokens": 1}})
    assert not is_usage_only_chunk({"choices": [], "usage": None})


def test_openai_cache_write_tokens_count_as_cache_creation() -> None:
    details = {"cached_tokens": 100, "cache_write_tokens": 900}
    payload = {"usage": {"prompt_tokens": 1200, "prompt_tokens_details": details}}
    assert usage_from(payload) == Usage(1200, 0, 100, 900)


def test_anthropic_one_hour_writes_are_kept_apart() -> None:
    split = {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 700}
    payload = {
        "usage": {
            "prompt_tokens": 1200,
            "cache_creation_input_tokens": 1000,
            "cache_creation": split,
        }
    }
    assert usage_from(payload) == Usage(1200, 0, 0, 1000, cache_write_1h_tokens=700)


def test_one_hour_writes_never_exceed_the_writes() -> None:
    split = {"ephemeral_1h_input_tokens": 5000}
    payload = {
        "usage": {"prompt_tokens": 9, "cache_creation_input_tokens": 8, "cache_creation": split}
    }
    assert usage_from(payload) == Usage(9, 0, 0, 8, cache_write_1h_tokens=8)
