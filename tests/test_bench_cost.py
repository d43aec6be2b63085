"""benchmarks/cost_replay.py and cost.py: a session priced direct and through ctxproxy.

A short real session (13 turns) against the simulated Anthropic cache, back to back: direct
reads nearly all of every later prompt from cache; pruning on every turn misses on most turns,
each miss blamed on pruning; with pruning off there is no miss; no request is invalid.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cost import DEFAULTS, PREVIOUS, candidates, tenant_toml
from benchmarks.cost_replay import SessionCost, replay_session
from proxy.cost.prices import Price
from tests.traces import TRACE_DIR

TRACE = "sweagent-demo-fc__marshmallow-1867.json"
SONNET = Price(
    "claude-sonnet-4-5",
    input=3.0,
    cache_read=0.3,
    output=15.0,
    cache_write=3.75,
    cache_write_1h=6.0,
)
needs_trace = pytest.mark.skipif(not (TRACE_DIR / TRACE).exists(), reason=f"no {TRACE}")


async def replay(tmp: Path, toml: str | None, monkeypatch: pytest.MonkeyPatch) -> SessionCost:
    monkeypatch.setattr("benchmarks.payloads.TRACES", TRACE_DIR)
    return await replay_session(
        tmp, TRACE, style="anthropic", toml=toml, pauses=False, price=SONNET, ttl_s=300.0
    )


@needs_trace
async def test_direct_reads_almost_everything_from_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = await replay(tmp_path, None, monkeypatch)
    assert direct.requests == 13 and direct.invalid == 0
    assert direct.cached_after_first / direct.prompt_after_first > 0.85
    assert not direct.misses
    assert direct.cost.cache_read > 0 and direct.cost.cache_write > 0
    assert direct.cost.total == pytest.approx(
        direct.cost.input + direct.cost.cache_read + direct.cost.cache_write + direct.cost.output
    )


@needs_trace
async def test_pruning_every_turn_misses_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    every = await replay(tmp_path / "every", tenant_toml("anthropic", *PREVIOUS), monkeypatch)
    off = await replay(
        tmp_path / "off", tenant_toml("anthropic", "off", *PREVIOUS[1:]), monkeypatch
    )
    assert every.invalid == off.invalid == 0
    assert every.misses["prune"] >= 3 and set(every.misses) == {"prune"}
    assert not off.misses
    assert every.cost.cache_write > off.cost.cache_write


def test_one_change_at_a_time_around_the_defaults_then_the_previous_defaults() -> None:
    found = candidates("anthropic", grid=False)
    assert found[0] == DEFAULTS and found[-1] == PREVIOUS != DEFAULTS
    assert all(sum(a != b for a, b in zip(s, DEFAULTS, strict=True)) == 1 for s in found[1:-1])
    assert len(candidates("openai", grid=True)) < len(candidates("anthropic", grid=True))


def test_cache_cold_pruning_waits_for_the_breakpoints_lifetime() -> None:
    assert "when_cache_cold_s = 3600" in tenant_toml("anthropic", "cache-cold", "25k", "1h")
    assert "when_cache_cold_s = 300" in tenant_toml("anthropic", "cache-cold", "25k", "5m")
    assert 'ttl = "1h"' in tenant_toml("anthropic", "off", "25k", "1h")
