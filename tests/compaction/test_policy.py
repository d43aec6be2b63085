"""When a conversation is due for compaction: the threshold and the settings' checks."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.compaction.policy import (
    CompactSettings,
    compaction_efficiency,
    should_compact,
    threshold_tokens,
    worth_compacting,
)

SETTINGS = CompactSettings(threshold_tokens="auto")


def test_auto_threshold_is_window_minus_output_reserve_and_buffer() -> None:
    assert threshold_tokens(SETTINGS, model_window=128_000) == 95_000
    assert threshold_tokens(CompactSettings(threshold_tokens=6_000), model_window=128_000) == 6_000


def test_should_compact_only_strictly_over_the_threshold() -> None:
    assert not should_compact(6_000, threshold=6_000)
    assert should_compact(6_001, threshold=6_000)


def test_a_compaction_is_worth_it_only_if_it_can_save_five_percent_of_the_request() -> None:
    assert worth_compacting(500, 10_000, efficiency=1.0)
    assert not worth_compacting(499, 10_000, efficiency=1.0)
    assert not worth_compacting(4_000, 10_000, efficiency=0.1)  # summaries that saved little
    assert worth_compacting(5_000, 10_000, efficiency=0.1)
    assert not worth_compacting(0, 10, efficiency=1.0)


def test_efficiency_is_what_the_last_compaction_saved_per_character_it_folded_in() -> None:
    assert compaction_efficiency(0, 0) == 1.0  # nothing recorded: before the first compaction
    assert compaction_efficiency(300, 1_000) == 0.3
    assert compaction_efficiency(-2_000, 1_000) == 0.1  # a summary longer than what it replaced
    assert compaction_efficiency(5_000, 1_000) == 1.0  # an earlier summary was condensed too


@pytest.mark.parametrize(
    "kwargs", [{"keep_recent": -1}, {"soft_ratio": 0}, {"threshold_tokens": 0}, {"timeout_s": 0}]
)
def test_settings_are_checked_once(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CompactSettings(**kwargs)
