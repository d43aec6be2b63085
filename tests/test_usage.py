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
