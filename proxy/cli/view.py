"""Rendering of the sessions view: pure functions from plain data to `rich` renderables.

Rows are session state hashes (DESIGN §5 `P{t:s}:state`, all values strings); events are entries
of the events stream (`proxy.server.observe.events`). Nothing here does I/O, so a recording
`Console` checks the output in tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

BAR_WIDTH = 12
SessionKey = tuple[str, str]


def number(row: Mapping[str, str], name: str) -> int:
    try:
        return int(float(row.get(name) or 0))
    except ValueError:
        return 0


def context_bar(tokens: int, threshold: int, *, width: int = BAR_WIDTH) -> Text:
    """`█████░░░ 881 / 6000`: the last prompt against the compaction threshold; red at or over."""
    ratio = tokens / threshold if threshold > 0 else 0.0
    filled = min(width, int(ratio * width))
    style = "red" if ratio >= 1 else "yellow" if ratio >= 0.8 else "green"
    bar = Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")
    return bar + Text(f" {tokens} / {threshold or '?'}")


def ago(then: float, now: float) -> str:
    if then <= 0:
        return "-"
    seconds = max(0, int(now - then))
    if seconds < 120:
        return f"{seconds}s ago"
    return f"{seconds // 60}m ago" if seconds < 7200 else f"{seconds // 3600}h ago"


def describe_event(event: Mapping[str, str]) -> str:
    """One line saying what the proxy did: status, cuts, compaction; never content."""
    if event.get("kind") == "compaction":
        return f"compaction {event.get('outcome', '?')} ({event.get('reason', '')})"
    parts = [f"{event.get('status', '?')} {event.get('outcome', '')}".strip()]
    try:
        stages: dict[str, Any] = orjson.loads(event.get("stages") or "{}")
    except orjson.JSONDecodeError:
        stages = {}
    pruned = (stages.get("prune") or {}).get("chars_pruned", 0)
    saved = (stages.get("budgets") or {}).get("chars_saved", 0)
    if pruned:
        parts.append(f"pruned {pruned} chars")
    if saved:
        parts.append(f"budgets cut {saved} chars")
    if event.get("compaction"):
        parts.append(f"compaction {event['compaction']}")
    if event.get("latency_ms"):
        parts.append(f"{float(event['latency_ms']):.0f} ms")
    return " · ".join(parts)


def sessions_table(
    rows: Sequence[Mapping[str, str]],
    *,
    last_events: Mapping[SessionKey, Mapping[str, str]],
    now: float,
    title: str = "ctxproxy sessions",
) -> Table:
    """One line per session: tenant, session, model, context bar, cached share, compactions."""
    table = Table(title=title, title_justify="left", expand=False)
    for name in ("tenant", "session", "model", "last prompt / threshold", "cached"):
        table.add_column(name, no_wrap=True)
    table.add_column("compactions", justify="right")
    table.add_column("requests", justify="right")
    table.add_column("last event")
    for row in rows:
        prompt, cached = number(row, "last_prompt_tokens"), number(row, "last_cached_tokens")
        event = last_events.get((row.get("tenant", ""), row.get("session", "")))
        updated = ago(float(row.get("updated_at") or 0), now)
        table.add_row(
            row.get("tenant", ""),
            row.get("session", ""),
            row.get("model", ""),
            context_bar(prompt, number(row, "threshold_tokens")),
            f"{cached * 100 // prompt}%" if prompt else "-",
            str(number(row, "compactions")),
            str(number(row, "requests")),
            f"{describe_event(event)} · {updated}" if event else updated,
        )
    if not rows:
        table.caption = "no sessions yet"
    return table


def session_detail_view(detail: Mapping[str, Any], *, now: float) -> RenderableType:
    """A session's state, its stored summaries (newest last) and the size of its archive."""
    state: Mapping[str, str] = detail.get("state") or {}
    facts = Table(title=f"session {state.get('session', '?')}", show_header=False,
                  title_justify="left")  # fmt: skip
    facts.add_column("field", style="bold")
    facts.add_column("value")
    facts.add_row("context", context_bar(number(state, "last_prompt_tokens"),
                                         number(state, "threshold_tokens")))  # fmt: skip
    for name in sorted(state):
        value = state[name]
        if name == "updated_at":
            value = f"{_iso(float(value or 0))} ({ago(float(value or 0), now)})"
        facts.add_row(name, value)
    parts: list[RenderableType] = [facts]
    compactions = sorted(detail.get("compactions") or [], key=lambda c: c.get("created_at", 0))
    parts.append(Text(f"\nStored summaries: {len(compactions)}", style="bold"))
    for index, compaction in enumerate(compactions, 1):
        head = (f"#{index} covers {compaction.get('covers', '?')} messages, "
                f"created {_iso(float(compaction.get('created_at') or 0))}, "
                f"archive entry {compaction.get('archive_id') or '-'}")  # fmt: skip
        parts.append(Text(head, style="cyan"))
        parts.append(Text(_summary_text(compaction.get("replacement") or [])))
    parts.append(Text(
        f"\nArchive: {detail.get('archive_entries', 0)} histories archived; "
        f"snapshot {detail.get('snapshot_bytes', 0)} bytes", style="bold",
    ))  # fmt: skip
    return Group(*parts)


def _summary_text(replacement: Sequence[Mapping[str, Any]], limit: int = 600) -> str:
    if not replacement:
        return "(empty)"
    content = replacement[0].get("content")
    text = content if isinstance(content, str) else orjson.dumps(content).decode()
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def _iso(ts: float) -> str:
    if ts <= 0:
        return "-"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
