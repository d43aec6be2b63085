"""Section 8, cost in dollars: every request of the recorded sessions priced, direct and through
ctxproxy with each setting, behind simulated Anthropic and OpenAI caches, in two timings.

`python -m benchmarks.cost [--quick] [--grid] [--caches anthropic,openai] [--timings back,pauses]
[--keep] [--out PATH]` (`--keep`: rows of the caches and timings not run now are kept from the
existing PATH.json, so a grid can be run a part at a time). Each trace of ../shared/traces is
replayed per `benchmarks.cost_replay` (fresh simulated cache per session; direct = the client's
own requests with its last message marked). Timings: *back to back* (agent steps 20 s apart: the
cache never goes cold) and *human pauses* (12 minutes before each later user message and every
25th turn). Prices: `config/prices.toml`, claude-sonnet-4-5 behind the Anthropic cache, gpt-5.1
behind the OpenAI one. *Prompt $* = input + cache reads + cache writes (what ctxproxy changes);
*total $* adds output (the trace's assistant messages, the same for every setting, and the
summaries). The ratio to direct is of prompt $, per family (claudecode, sweagent, taubench) and
overall. Settings: the defaults, then each alternative changing one thing (`--grid`: every
combination of pruning, compaction threshold and breakpoint TTL, to choose the defaults by
leave-one-family-out: `benchmarks.cost_choice`).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT
from benchmarks.cost_choice import choose, markdown
from benchmarks.cost_replay import FAMILIES, SessionCost, replay_session
from benchmarks.replay import trace_names
from proxy.cost.prices import Price, load_prices
from proxy.cost.pricing import Cost

PRICED = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5.1"}
TIMINGS = {"back to back": False, "human pauses": True}
PRUNING = {
    "every turn": "min_savings_chars = 0\nwhen_cache_cold_s = 0",
    "batched 10k": "min_savings_chars = 10000\nwhen_cache_cold_s = 0",
    "batched 30k": "min_savings_chars = 30000\nwhen_cache_cold_s = 0",
    "batched 100k": "min_savings_chars = 100000\nwhen_cache_cold_s = 0",
    "cache-cold": "min_savings_chars = 0\nwhen_cache_cold_s = {cache_life_s}",
    "off": "enabled = false",
}
COMPACTION = {
    "auto (95k)": "auto",
    "60k": "60000",
    "40k": "40000",
    "25k": "25000",
    "15k": "15000",
}
TTLS = {"5m": "5m", "1h": "1h"}
Setting = tuple[str, str, str]
"""(pruning, compaction, ttl): keys of `PRUNING`, `COMPACTION`, `TTLS`."""
PREVIOUS: Setting = ("every turn", "auto (95k)", "5m")
"""ctxproxy's defaults before they were chosen by cost (the bench config's window: 128,000)."""
DEFAULTS: Setting = ("cache-cold", "25k", "5m")
"""ctxproxy's defaults, chosen from the `--grid` run; the row of a tenant with no settings must
match them."""
CODE = "code defaults"


def cache_life_s(style: str, ttl: str) -> float:
    """How long the simulated cache keeps an entry unused: Anthropic's breakpoint TTL, the
    OpenAI model's 10 minutes. `cache-cold` pruning waits exactly this long."""
    if style == "openai":
        return 600.0
    return 3600.0 if ttl == "1h" else 300.0


def tenant_toml(style: str, pruning: str, compaction: str, ttl: str) -> str:
    threshold = COMPACTION[compaction]
    threshold = f'"{threshold}"' if threshold == "auto" else threshold
    prune = PRUNING[pruning].format(cache_life_s=int(cache_life_s(style, ttl)))
    return (
        f"\n[tenants.default.prune]\n{prune}\n"
        f"[tenants.default.compact]\nthreshold_tokens = {threshold}\n"
        f'[tenants.default.cache]\nttl = "{TTLS[ttl]}"\n'
    )


def candidates(style: str, *, grid: bool) -> list[Setting]:
    """Settings to replay: the defaults, one change at a time and the previous defaults; or
    every combination. The TTL only matters with Anthropic-style breakpoints."""
    ttls = list(TTLS) if style == "anthropic" else ["5m"]
    if grid:
        return list(itertools.product(PRUNING, COMPACTION, ttls))
    prune, compact, ttl = DEFAULTS
    found = [DEFAULTS]
    found += [(p, compact, ttl) for p in PRUNING if p != prune]
    found += [(prune, c, ttl) for c in COMPACTION if c != compact]
    found += [(prune, compact, t) for t in ttls if t != ttl]
    return found if PREVIOUS in found else [*found, PREVIOUS]


def label(setting: Setting | str | None) -> str:
    if setting is None:
        return "direct"
    if isinstance(setting, str):
        return "ctxproxy, no settings (the code's defaults)"
    prune, compact, ttl = setting
    return f"prune {prune} · compact {compact} · ttl {ttl}"


async def replay_all(
    tmp: Path,
    names: list[str],
    *,
    style: str,
    setting: Setting | str | None,
    pauses: bool,
    price: Price,
) -> list[SessionCost]:
    """Every trace `names`: direct (`setting` None), ctxproxy unconfigured (`CODE`), or set."""
    if setting is None or isinstance(setting, str):
        toml, ttl_s = (None if setting is None else ""), cache_life_s(style, "5m")
    else:
        toml, ttl_s = tenant_toml(style, *setting), cache_life_s(style, setting[2])
    return [
        await replay_session(
            tmp / f"{i}", name, style=style, toml=toml, pauses=pauses, price=price, ttl_s=ttl_s
        )
        for i, name in enumerate(names)
    ]


def summarize(sessions: list[SessionCost]) -> dict[str, Any]:
    """Totals per family and overall: prompt and total $, cached share after turn 1, misses."""
    out: dict[str, Any] = {}
    for family in (*FAMILIES, "all"):
        picked = [s for s in sessions if family in ("all", s.family)]
        cost = sum((s.cost for s in picked), Cost())
        after = sum(s.prompt_after_first for s in picked)
        misses: dict[str, int] = {}
        for session in picked:
            for cause, count in session.misses.items():
                misses[cause] = misses.get(cause, 0) + count
        out[family] = {
            "sessions": len(picked),
            "prompt_usd": cost.input + cost.cache_read + cost.cache_write,
            "total_usd": cost.total,
            "cost": asdict(cost),
            "cached_after_first": sum(s.cached_after_first for s in picked) / after if after else 0,
            "invalid": sum(s.invalid for s in picked),
            "summarizer_calls": sum(s.summarizer_calls for s in picked),
            "misses": misses,
        }
    return out


async def run_async(
    tmp: Path,
    *,
    quick: bool,
    grid: bool,
    caches: tuple[str, ...] = tuple(PRICED),
    timings: tuple[str, ...] = tuple(TIMINGS),
    kept: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    names = trace_names()
    if quick:  # a session of each family at least, the long ones left out
        names = [n for n in names if "seg1" not in n][::2]
    table = load_prices(ROOT / "config" / "prices.toml")
    running = set(itertools.product(caches, timings))
    rows = [r for r in kept or [] if (r["cache"], r["timing"]) not in running]
    for style, timing in itertools.product(caches, timings):
        pauses = TIMINGS[timing]
        price = table.lookup(PRICED[style])
        assert isinstance(price, Price), f"{PRICED[style]} must be priced"
        code: list[Setting | str | None] = [] if grid else [CODE]  # the grid holds the defaults
        settings: list[Setting | str | None] = [None, *code, *candidates(style, grid=grid)]
        started = time.monotonic()
        for setting in settings:
            sessions = await replay_all(
                tmp / f"{style}-{timing}-{label(setting)}",
                names,
                style=style,
                setting=setting,
                pauses=pauses,
                price=price,
            )
            rows.append(
                {
                    "cache": style,
                    "timing": timing,
                    "setting": label(setting),
                    "parts": list(setting) if isinstance(setting, tuple) else None,
                    "families": summarize(sessions),
                }
            )
        print(
            f"  {style}, {timing}: {len(settings)} settings in {time.monotonic() - started:.0f} s",
            flush=True,
        )
    return {
        "traces": len(names),
        "grid": grid,
        "priced": PRICED,
        "rows": rows,
        "defaults": label(DEFAULTS),
        "previous": label(PREVIOUS),
        "choice": choose(rows, previous=label(PREVIOUS)),
    }


def run(tmp: Path, *, quick: bool, grid: bool = False, **only: Any) -> dict[str, Any]:
    return asyncio.run(run_async(tmp, quick=quick, grid=grid, **only))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="7 short sessions (~1 minute)")
    parser.add_argument("--grid", action="store_true", help="every combination of settings")
    parser.add_argument("--caches", default=",".join(PRICED))
    parser.add_argument("--timings", default="back,pauses", help="back (to back), (human) pauses")
    parser.add_argument("--keep", action="store_true", help="keep the other rows of --out")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cost")
    args = parser.parse_args()
    caches = tuple(args.caches.split(","))
    timings = tuple(
        t for t in TIMINGS if t.split()[-1] in args.timings or t.split()[0] in args.timings
    )
    kept = json.loads(args.out.with_suffix(".json").read_text())["rows"] if args.keep else []
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp:
        result = run(
            Path(tmp), quick=args.quick, grid=args.grid, caches=caches, timings=timings, kept=kept
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(f"wrote {args.out}.md and .json")


if __name__ == "__main__":
    main()
