"""Known context windows by name prefix."""

from __future__ import annotations

import pytest

from proxy.models import DEFAULT_WINDOW, context_window


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano", 1_047_576),
        ("gpt-4", 8_192),
        ("o3", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini", 200_000),
        ("o1-mini", 128_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("claude-sonnet-4-5", 200_000),
        ("claude-3-5-haiku-20241022", 200_000),
        ("openai/GPT-4o", 128_000),
        ("some-local-model", DEFAULT_WINDOW),
        ("", DEFAULT_WINDOW),
    ],
)
def test_context_window_by_longest_known_prefix(model: str, window: int) -> None:
    assert context_window(model) == window
