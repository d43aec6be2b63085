"""Choosing ctxproxy's defaults from the cost benchmark's rows, and its markdown tables.

A setting's *score* on a family is its prompt $ divided by direct's on the same sessions,
averaged over the two timings. Settings that sent an invalid request, read less than 85% of the
prompt from cache after the first turn (back to back, all sessions), or compact before 25,000
tokens are not eligible: the replay prices a summary but cannot tell what it lost, and below that
the summary, the recent messages and the bootstrap are most of the prompt, summarised anew every
few turns (the tables show what earlier compaction would cost). The
choice per cache style is the eligible setting with the lowest mean score over the three families
(each family weighs the same, whatever its sessions cost); settings within 1% of that score count
as tied, and of tied settings the one that compacts least often on those families wins.
Leave-one-family-out checks that this does not overfit: for each family, the setting that is best
on the other two, and its score on the held-out one next to the defaults' and the best possible.
Last, the setting whose mean score is closest to the best on every cache style at once (the
largest excess over a style's best, as a fraction, is the smallest; ties within 1% again to the
fewest summaries): when that excess is under 1%, one set of defaults serves both.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import mean
from typing import Any

from benchmarks.cost_replay import FAMILIES

MIN_CACHED = 0.85
TIE = 0.01
MIN_COMPACTION_TOKENS = 25_000


def compaction_tokens(setting: str) -> int:
    """The compaction threshold in a setting's label ("compact 25k", "compact auto (95k)")."""
    part = setting.split("compact ", 1)[1].split(" · ", 1)[0]
    return int(part.rsplit("(", 1)[-1].rstrip(")").removesuffix("k")) * 1000


def scores(rows: list[dict[str, Any]], style: str) -> dict[str, dict[str, float]]:
    """Setting -> family -> mean over timings of prompt $ / direct prompt $."""
    direct = {
        (r["timing"], f): r["families"][f]["prompt_usd"]
        for r in rows
        if r["cache"] == style and r["setting"] == "direct"
        for f in FAMILIES
    }
    out: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row["cache"] != style or row["parts"] is None:
            continue
        for family in FAMILIES:
            base = direct[(row["timing"], family)]
            ratio = row["families"][family]["prompt_usd"] / base if base else 1.0
            out.setdefault(row["setting"], {}).setdefault(family, []).append(ratio)
    return {s: {f: mean(v) for f, v in by.items()} for s, by in out.items()}


def eligible(rows: list[dict[str, Any]], style: str) -> set[str]:
    bad = {r["setting"] for r in rows if r["cache"] == style and r["families"]["all"]["invalid"]}
    cold = {
        r["setting"]
        for r in rows
        if r["cache"] == style
        and r["timing"] == "back to back"
        and r["families"]["all"]["cached_after_first"] < MIN_CACHED
    }
    every = {r["setting"] for r in rows if r["cache"] == style and r["parts"] is not None}
    early = {s for s in every if compaction_tokens(s) < MIN_COMPACTION_TOKENS}
    return every - bad - cold - early or every - bad - early


def summaries(rows: list[dict[str, Any]], style: str) -> dict[str, dict[str, int]]:
    """Setting -> family -> summarizer calls over its sessions in both timings."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        if row["cache"] == style:
            by = out.setdefault(row["setting"], dict.fromkeys(FAMILIES, 0))
            for family in FAMILIES:
                by[family] += row["families"][family]["summarizer_calls"]
    return out


def best(
    scored: dict[str, dict[str, float]],
    among: Iterable[str],
    families: Iterable[str],
    calls: dict[str, dict[str, int]],
) -> str:
    """The lowest mean score over `families`; of those within `TIE`, the fewest summaries."""
    kept, pool = list(families), list(among)
    score = {s: mean(scored[s][f] for f in kept) for s in pool}
    low = min(score.values())
    tied = [s for s in pool if score[s] <= low * (1 + TIE)]
    return min(tied, key=lambda s: (sum(calls[s][f] for f in kept), score[s], s))


def choose(rows: list[dict[str, Any]], *, previous: str) -> dict[str, Any]:
    """Per cache style: the chosen setting, its scores, and the leave-one-family-out folds,
    next to the `previous` defaults' scores; and the setting nearest the best on every style."""
    out: dict[str, Any] = {}
    for style in dict.fromkeys(r["cache"] for r in rows):
        scored = scores(rows, style)
        pool = eligible(rows, style)
        calls = summaries(rows, style)
        pick = best(scored, pool, FAMILIES, calls)
        defaults = previous
        folds = []
        for held in FAMILIES:
            fitted = best(scored, pool, [f for f in FAMILIES if f != held], calls)
            folds.append(
                {
                    "held_out": held,
                    "fitted": fitted,
                    "held_out_score": scored[fitted][held],
                    "defaults_score": scored[defaults][held],
                    "best_possible": min(scored[s][held] for s in pool),
                }
            )
        out[style] = {
            "chosen": pick,
            "scores": scored[pick],
            "defaults": scored[defaults],
            "eligible": len(pool),
            "folds": folds,
            "calls": calls,
            "means": {s: mean(scored[s].values()) for s in pool},
        }
    return {"styles": out, "common": common(out)}


def common(styles: dict[str, Any]) -> dict[str, Any]:
    """The setting nearest every style's best mean score, and how far above each it is."""
    shared = set.intersection(*(set(p["means"]) for p in styles.values()))

    def excess(setting: str) -> dict[str, float]:
        return {
            style: p["means"][setting] / min(p["means"].values()) - 1 for style, p in styles.items()
        }

    worst = {s: max(excess(s).values()) for s in shared}
    low = min(worst.values())
    tied = [s for s in shared if worst[s] <= low + TIE]
    pick = min(
        tied, key=lambda s: (sum(sum(p["calls"][s].values()) for p in styles.values()), worst[s], s)
    )
    return {"setting": pick, "excess": excess(pick)}


def _table(head: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def settings_table(result: dict[str, Any], style: str, timing: str) -> str:
    rows = [r for r in result["rows"] if r["cache"] == style and r["timing"] == timing]
    direct = next(r for r in rows if r["setting"] == "direct")["families"]
    body = []
    for row in rows:
        fam = row["families"]
        ratios = [f"{fam[f]['prompt_usd'] / direct[f]['prompt_usd']:.2f}×" for f in FAMILIES]
        misses = ", ".join(f"{k} {v}" for k, v in sorted(fam["all"]["misses"].items()))
        body.append(
            [
                row["setting"],
                f"${fam['all']['prompt_usd'] / fam['all']['sessions']:.3f}",
                f"${fam['all']['total_usd'] / fam['all']['sessions']:.3f}",
                f"**{fam['all']['prompt_usd'] / direct['all']['prompt_usd']:.2f}×**",
                *ratios,
                f"{fam['all']['cached_after_first']:.1%}",
                fam["all"]["invalid"],
                misses or "–",
            ]
        )
    return _table(
        [
            "setting",
            "prompt $/session",
            "total $/session",
            "prompt $ ÷ direct",
            *(f"÷ direct, {f}" for f in FAMILIES),
            "cached after turn 1",
            "invalid",
            "misses by cause",
        ],
        body,
    )


def choice_table(result: dict[str, Any]) -> str:
    parts = [
        f"Chosen among the {len(result['rows'])} rows of this run"
        + (
            ""
            if result.get("grid")
            else " (one change at a time around the defaults; the "
            "defaults themselves were chosen from a `--grid` run, `results/cost-grid.md`)"
        )
        + "."
    ]
    shared = result["choice"]["common"]
    over = ", ".join(f"{style} +{x:.1%}" for style, x in shared["excess"].items())
    parts.append(
        f"One setting for every cache style: *{shared['setting']}* (mean score above "
        f"each style's best: {over})."
    )
    for style, picked in result["choice"]["styles"].items():
        folds = [
            [
                f["held_out"],
                f["fitted"],
                f"{f['held_out_score']:.2f}×",
                f"{f['defaults_score']:.2f}×",
                f"{f['best_possible']:.2f}×",
            ]
            for f in picked["folds"]
        ]
        scores = ", ".join(f"{f} {picked['scores'][f]:.2f}×" for f in FAMILIES)
        old = ", ".join(f"{f} {picked['defaults'][f]:.2f}×" for f in FAMILIES)
        parts.append(
            f"**{style}**: chosen *{picked['chosen']}* ({scores}; the previous defaults: {old}; "
            f"{picked['eligible']} eligible settings).\n\n"
            + _table(
                [
                    "held-out family",
                    "best on the other two",
                    "its score held out",
                    "previous defaults held out",
                    "best possible held out",
                ],
                folds,
            )
        )
    return "\n\n".join(parts)


def cost_section(results: dict[str, Any]) -> str:
    """Section 8 of the full report (`benchmarks.report`): the choice and every table."""
    return markdown(results["cost"], level=3)


def markdown(result: dict[str, Any], *, level: int = 1) -> str:
    head, sub = "#" * level, "#" * (level + 1)
    out = [
        f"{head} Cost in dollars\n\n{result['traces']} sessions; priced as "
        + ", ".join(f"{m} ({s} cache)" for s, m in result["priced"].items())
        + ". Score = prompt $ ÷ direct's, mean of the two timings.\n",
        f"{sub} Choice\n\n" + choice_table(result) + "\n",
    ]
    for style, timing in dict.fromkeys((r["cache"], r["timing"]) for r in result["rows"]):
        out.append(f"{sub} {style} cache, {timing}\n\n{settings_table(result, style, timing)}\n")
    return "\n".join(out)
