"""Render the results (a dict of the sections' outputs) as markdown, and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.cost_choice import cost_section
from benchmarks.payloads import SIZES
from benchmarks.report_tables import (
    cache_table,
    features_table,
    headline,
    instructions_table,
    memory_table,
    overhead_table,
    recall_table,
    savings_table,
    scaling_table,
)


def markdown(results: dict[str, Any]) -> str:
    parts = [
        f"# ctxproxy benchmark results\n\nMachine: {results['machine']}  \n"
        f"Run: {results['started']}, mode `{results['mode']}`, "
        f"{results['seconds']:.0f} s in all.\n"
    ]
    kept = results.get("kept", {})
    if kept:
        parts.append(
            "Carried over from an earlier run (not re-run): "
            + ", ".join(f"{name} ({started})" for name, started in kept.items())
            + ".\n"
        )
    sections = [
        ("Targets", headline),
        ("1. Proxy overhead", overhead_table),
        ("2. Pipeline cost at scale", scaling_table),
        ("3. Tokens saved on real sessions", savings_table),
        ("4. Cache share", cache_table),
        ("5. Memory", memory_table),
        ("6. Instructions per request", instructions_table),
        ("7. Where ctxproxy's extra instructions go", features_table),
        ("8. Cost in dollars", cost_section),
        ("9. Recall", recall_table),
    ]
    for title, render in sections:
        try:
            parts.append(f"## {title}\n\n{render(results)}\n")
        except KeyError as exc:
            parts.append(f"## {title}\n\n(not run: {exc})\n")
    return "\n".join(parts)


def plot(results: dict[str, Any], path: Path) -> bool:
    """CPU per request and throughput by target (overhead), tokens saved by session; False
    when matplotlib is missing (install the `bench` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in results.get("overhead", {}).get("rows", []) if not r["stream"]]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    _bars(axes[0], rows, "cpu_us", "proxy CPU µs / request (non-streaming, c=16)", log=True)
    _bars(axes[1], rows, "rps", "requests/s (non-streaming, c=16)", log=True)
    _savings(axes[2], results)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


COLORS = {
    "direct": "tab:grey",
    "aiohttp pass-through": "tab:blue",
    "nginx": "tab:orange",
    "ctxproxy": "tab:green",
    "ctxproxy + Redis": "tab:olive",
    "LiteLLM": "tab:red",
}


def _bars(ax: Any, rows: list[dict[str, Any]], key: str, title: str, *, log: bool) -> None:
    sizes = [s for s in SIZES if any(r["size"] == s for r in rows)]
    names = list(
        dict.fromkeys(r["target"] for r in rows if r["target"] != "direct" or key == "rps")
    )
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        values = [
            next(
                (
                    r[key]
                    for r in rows
                    if r["size"] == s and r["target"] == name and r["concurrency"] == 16
                ),
                0,
            )
            for s in sizes
        ]
        ax.bar(
            [x + i * width for x in range(len(sizes))],
            values,
            width,
            label=name,
            color=COLORS.get(name),
        )
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(sizes))], sizes)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)


def _savings(ax: Any, results: dict[str, Any]) -> None:
    configs = results.get("savings", {}).get("configs", {})
    for i, (label, rows) in enumerate(configs.items()):
        saved = [1 - r["proxy_tokens"] / r["direct_tokens"] for r in rows]
        ax.barh([y + i * 0.4 for y in range(len(rows))], saved, 0.4, label=label)
        ax.set_yticks(range(len(rows)), [r["trace"][:34] for r in rows], fontsize=7)
    ax.set_xlim(-0.5, 1.0)  # a tiny session can cost more (bootstrap adds ~500 tokens)
    ax.axvline(0.7, color="grey", linestyle=":")
    ax.axvline(0.4, color="grey", linestyle="--")
    ax.set_title("share of prompt tokens saved per session")
    ax.legend(fontsize=8)
