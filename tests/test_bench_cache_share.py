"""benchmarks/cache_share.py: the three pruning set-ups replay as configured, in simulated time.

Batched pruning waits for the provider's cache to go cold (`when_cache_cold_s`), which only the
simulated clock's pauses bring about: a replay that kept real time for a turn's `now` never
pruned, and reported batched pruning as if it were off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cache_share import PRUNING, SimClock, replay_style
from tests.traces import TRACE_DIR

TRACE = "claudecode-spotter__258c7280-seg2.json"  # 60 turns: two cold pauses


@pytest.mark.skipif(not (TRACE_DIR / TRACE).exists(), reason=f"{TRACE} not in {TRACE_DIR}")
async def test_batched_pruning_sends_more_than_every_turn_and_less_than_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("benchmarks.payloads.TRACES", TRACE_DIR)  # as the tests find them
    sent = {
        label: (await replay_style(tmp_path / label, "anthropic", toml, [TRACE]))["prompt_tokens"]
        for label, toml in PRUNING.items()
    }
    assert sent["every turn"] < sent["batched"] < sent["off"]


def test_the_simulated_clock_pauses_six_minutes_every_25_turns() -> None:
    clock = SimClock()
    start = clock()
    steps = []
    for _ in range(50):
        before = clock()
        clock.advance()
        steps.append(clock() - before)
    assert steps.count(360.0) == 2 and steps.count(20.0) == 48
    assert clock() == start + 48 * 20.0 + 2 * 360.0
