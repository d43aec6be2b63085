"""When a conversation is due for compaction: the threshold and the settings' checks."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.compaction.policy import CompactSettings, should_compact, threshold_tokens

SETTINGS = CompactSettings()


def test_auto_threshold_is_window_minus_output_reserve_and_buffer() -> None:
    assert threshold_tokens(SETTINGS, model_window=128_000) == 95_000
    assert threshold_tokens(CompactSettings(threshold_tokens=6_000), model_window=128_000) == 6_000


def test_should_compact_only_strictly_over_the_threshold() -> None:
    assert not should_compact(6_000, threshold=6_000)
    assert should_compact(6_001, threshold=6_000)


@pytest.mark.parametrize(
    "kwargs", [{"keep_recent": -1}, {"soft_ratio": 0}, {"threshold_tokens": 0}, {"timeout_s": 0}]
)
def test_settings_are_checked_once(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CompactSettings(**kwargs)
