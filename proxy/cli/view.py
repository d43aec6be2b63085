"""Rendering of the sessions view: pure functions from plain data to `rich` renderables.

Rows are session state hashes (DESIGN §5 `P{t:s}:state`, all values strings); events are entries
of the events stream (`proxy.server.observe.events`). Nothing here does I/O, so a recording
`Console` checks the output in tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
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


def context_bar(
    tokens: int, threshold: int, *, width: int = BAR_WIDTH, short: bool = False
) -> Text:
    """`█████░░░ 881 / 6000` (`short`: `█████░░░ 881/6k`): the last prompt against the
    compaction threshold; red at or over."""
    ratio = tokens / threshold if threshold > 0 else 0.0
    filled = min(width, int(ratio * width))
    style = "red" if ratio >= 1 else "yellow" if ratio >= 0.8 else "green"
    bar = Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")
    if short:
        return bar + Text(f" {short_count(tokens)}/{short_count(threshold) if threshold else '?'}")
    return bar + Text(f" {tokens} / {threshold or '?'}")


def short_count(n: int) -> str:
    """881 → `881`, 5898 → `5.9k`, 6000 → `6k`, 48000 → `48k`."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return f"{n // 1000}k"


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
    if event.get("cache_miss"):
        parts.append(f"cache miss: {event['cache_miss']}")
    if event.get("cost_usd"):
        parts.append(f"${float(event['cost_usd']):.4f}")
    if event.get("latency_ms"):
        parts.append(f"{float(event['latency_ms']):.0f} ms")
    return " · ".join(parts)


COLUMNS = (
    "tenant", "session", "model", "context", "cached", "miss", "compactions", "requests", "event",
)  # fmt: skip
HEADERS = MappingProxyType(
    {"context": "last prompt / threshold", "miss": "last miss", "event": "last event"}
)
SHORT_HEADERS = MappingProxyType(
    {**HEADERS, "context": "context", "compactions": "comp.", "requests": "req."}
)
DROPPED_FIRST = ("miss", "model", "cached", "requests", "tenant", "compactions")
"""Narrower than the full table, columns go in this order until it fits (`tenant` moves in
front of the session, or into the title when every row has the same)."""
EVENT_MIN_WIDTH = 24
"""The last event wraps; it is given at least this much."""


def sessions_table(
    rows: Sequence[Mapping[str, str]],
    *,
    last_events: Mapping[SessionKey, Mapping[str, str]],
    now: float,
    title: str = "ctxproxy sessions",
    width: int | None = None,
) -> Table:
    """One line per session: tenant, session, model, context bar, cached share, compactions,
    requests and the last event. Within `width` columns (None: no limit) when the full table
    does not fit: a short bar and headers, then fewer columns (`DROPPED_FIRST`); session ids are
    never cut, and the last event wraps."""
    tenants = {row.get("tenant", "") for row in rows}
    names, short = choose_columns(rows, last_events=last_events, now=now, width=width)
    if "tenant" not in names and len(tenants) == 1:
        title = f"{title} · tenant {next(iter(tenants))}"
    table = Table(title=title, title_justify="left", expand=False)
    for name in names:
        numeric = name in ("compactions", "requests")
        table.add_column(
            (SHORT_HEADERS if short else HEADERS).get(name, name),
            justify="right" if numeric else "left",
            no_wrap=name not in ("session", "event"),
            overflow="fold",
        )
    merged = "tenant" not in names and len(tenants) > 1
    for row in rows:
        cells = _cells(row, last_events=last_events, now=now, short=short, merged=merged)
        table.add_row(*(cells[name] for name in names))
    if not rows:
        table.caption = "no sessions yet"
    return table


def choose_columns(
    rows: Sequence[Mapping[str, str]],
    *,
    last_events: Mapping[SessionKey, Mapping[str, str]],
    now: float,
    width: int | None,
) -> tuple[tuple[str, ...], bool]:
    """The columns shown within `width`, and whether in their short form."""
    cells = [_cells(row, last_events=last_events, now=now, short=False) for row in rows]
    if width is None or _table_width(COLUMNS, cells, HEADERS) <= width:
        return COLUMNS, False
    names: tuple[str, ...] = COLUMNS
    for dropped in DROPPED_FIRST:
        merged = "tenant" not in names and len({row.get("tenant") for row in rows}) > 1
        cells = [
            _cells(row, last_events=last_events, now=now, short=True, merged=merged) for row in rows
        ]
        if _table_width(names, cells, SHORT_HEADERS) <= width:
            break
        names = tuple(name for name in names if name != dropped)
    return names, True


def _table_width(
    names: Sequence[str], cells: Sequence[Mapping[str, Text]], headers: Mapping[str, str]
) -> int:
    """Characters a table of these columns needs: each column's widest cell, the last event at
    most `EVENT_MIN_WIDTH` (it wraps), and 3 per column of borders and padding."""
    total = 1
    for name in names:
        widest = max([len(headers.get(name, name)), *(row[name].cell_len for row in cells)])
        total += 3 + (min(widest, EVENT_MIN_WIDTH) if name == "event" else widest)
    return total


def _cells(
    row: Mapping[str, str],
    *,
    last_events: Mapping[SessionKey, Mapping[str, str]],
    now: float,
    short: bool,
    merged: bool = False,
) -> dict[str, Text]:
    """Every column's cell for one row; `merged`: the session cell says `tenant/session`."""
    prompt, cached = number(row, "last_prompt_tokens"), number(row, "last_cached_tokens")
    tenant, session = row.get("tenant", ""), row.get("session", "")
    event = last_events.get((tenant, session))
    updated = ago(float(row.get("updated_at") or 0), now)
    return {
        "tenant": Text(tenant),
        "session": Text(f"{tenant}/{session}" if merged else session),
        "model": Text(row.get("model", "")),
        "context": context_bar(
            prompt,
            number(row, "threshold_tokens"),
            width=BAR_WIDTH // 2 if short else BAR_WIDTH,
            short=short,
        ),
        "cached": Text(f"{cached * 100 // prompt}%" if prompt else "-"),
        "miss": Text(last_miss(row, now=now)),
        "compactions": Text(str(number(row, "compactions"))),
        "requests": Text(str(number(row, "requests"))),
        "event": Text(f"{describe_event(event)} · {updated}" if event else updated),
    }


def last_miss(state: Mapping[str, str], *, now: float) -> str:
    """`prune 3m ago`: the cause of the session's last cache miss and when; `-` for none."""
    cause = state.get("last_miss_cause")
    return f"{cause} {ago(float(state.get('last_miss_at') or 0), now)}" if cause else "-"


def session_detail_view(detail: Mapping[str, Any], *, now: float) -> RenderableType:
    """A session's state, its stored summaries (newest last) and the size of its archive."""
    state: Mapping[str, str] = detail.get("state") or {}
    facts = Table(title=f"session {state.get('session', '?')}", show_header=False,
                  title_justify="left")  # fmt: skip
    facts.add_column("field", style="bold")
    facts.add_column("value")
    facts.add_row("context", context_bar(number(state, "last_prompt_tokens"),
                                         number(state, "threshold_tokens")))  # fmt: skip
    if state.get("last_miss_cause"):
        facts.add_row("last cache miss", f"{last_miss(state, now=now)}: read "
                      f"{number(state, 'last_miss_read')} of "
                      f"{number(state, 'last_miss_expected')} cached tokens"
                      + (f" (provider: {state['last_miss_provider']})"
                         if state.get("last_miss_provider") else ""))  # fmt: skip
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
