"""Section 4, cache share: the replays against simulated provider caches (`proxy.cost.cachesim`),
direct and through ctxproxy's cache layout, with pruning on every turn, batched, and off.

Simulated time: 20 s between turns and a 6-minute pause every 25 turns (so 5-minute TTLs and
`when_cache_cold_s = 300` matter). Relative cost: uncached = 1; Anthropic cache writes 1.25,
reads 0.1; OpenAI cached tokens 0.5; against the direct replay's prompt tokens with no cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.replay import MODELS, Replayed, replay, rig, trace_names
from proxy.cost.cachesim import AnthropicCache, OpenAICache

# Compaction at `auto` (95k with the bench's 128k window), as when this section was first run.
AUTO = '\n[tenants.default.compact]\nthreshold_tokens = "auto"\n'
PRUNING = {
    "every turn": AUTO + "[tenants.default.prune]\nwhen_cache_cold_s = 0\n",
    "batched": AUTO
    + "[tenants.default.prune]\nmin_savings_chars = 20000\nwhen_cache_cold_s = 300\n",
    "off": AUTO + "[tenants.default.prune]\nenabled = false\n",
}
CACHES = {"anthropic": AnthropicCache, "openai": OpenAICache}


@dataclass
class SimClock:
    now: float = 1_800_000_000.0
    turns: int = 0

    def __call__(self) -> float:
        return self.now

    def advance(self) -> None:
        self.turns += 1
        self.now += 360.0 if self.turns % 25 == 0 else 20.0


async def replay_style(tmp: Path, style: str, toml: str | None, names: list[str]) -> dict[str, Any]:
    """Every trace with a fresh simulated cache; totals over all of them."""
    total = cached = after_first = cached_after_first = written = 0
    for name in names:
        clock = SimClock()
        cache = CACHES[style]()
        async with rig(tmp, tenant_toml=toml, cache_style=style, clock=clock) as setup:
            setup.fake.cache = cache
            setup.fake.clock = clock
            done: Replayed = await replay(
                setup, name, model=MODELS[style], before_each=clock.advance
            )
        total += sum(s.prompt_tokens for s in done.seen)
        cached += sum(s.cached_tokens for s in done.seen)
        after_first += sum(s.prompt_tokens for s in done.seen[1:])
        cached_after_first += sum(s.cached_tokens for s in done.seen[1:])
        written += cache.written
    return {
        "prompt_tokens": total,
        "cached_tokens": cached,
        "written_tokens": written,
        "cached_share": cached / total if total else 0.0,
        "cached_share_after_first": cached_after_first / after_first if after_first else 0.0,
        "cost": _cost(style, total, cached, written),
    }


def _cost(style: str, total: int, cached: int, written: int) -> float:
    if style == "anthropic":
        return (total - cached - written) + 1.25 * written + 0.1 * cached
    return (total - cached) + 0.5 * cached


async def run(tmp: Path, *, quick: bool) -> dict[str, Any]:
    names = trace_names()[::3] if quick else trace_names()
    rows = []
    for style in CACHES:
        direct = await replay_style(tmp / f"d-{style}", style, None, names)
        rows.append({"provider": style, "setup": "direct (no proxy)", **direct})
        for label, toml in PRUNING.items():
            result = await replay_style(tmp / f"{style}-{label}", style, toml, names)
            rows.append({"provider": style, "setup": f"ctxproxy, pruning {label}", **result})
        for row in rows[-4:]:
            row["relative_cost"] = row["cost"] / direct["prompt_tokens"]
            print(
                f"  cache {style} {row['setup']}: {row['cached_share']:.1%} cached, "
                f"cost {row['relative_cost']:.2f}",
                flush=True,
            )
    return {"rows": rows, "traces": len(names)}
