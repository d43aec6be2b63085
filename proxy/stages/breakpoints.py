"""Anthropic prompt-cache breakpoints, placed by the cache stage in `anthropic` style. Pure.

Up to three breakpoints of ours, `{"type": "ephemeral"}` (+ `"ttl": "1h"`): L on the last part of
the last message with content (on a `tool` message: the message itself), S on the static part, C
on the last part of the client's system content. The client's own markers are counted and always
kept; ours fill the slots left under 4 in the order L, S, C (L caches the most, S survives dynamic
and history changes, C is mostly covered by L anyway). A breakpoint whose prefix (tools + content
up to it, chars/4) is under the model's minimum cacheable length, or on a part or message the
client already marked, is not placed. TTLs: a 1h breakpoint must precede every 5m one, so ours
falls back to 5m after an earlier 5m marker, becomes 1h before a later client 1h marker, and is
dropped if it can be neither.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson

from proxy.content import MAX_BREAKPOINTS, MarkerPath, find_body_markers
from proxy.engine.pipeline import body_with_messages
from proxy.stages.marker import (
    Ttl,
    already_marked,
    as_parts,
    can_take_marker,
    resolve_part_index,
    text_parts,
    with_marker,
)
from proxy.types import JSON, Message, SystemPrompt, Turn

if TYPE_CHECKING:  # only a type here: proxy.stages.cache imports this module
    from proxy.stages.cache import CacheSettings

CHARS_PER_TOKEN = 4
# Minimum cacheable prefix in tokens (Anthropic prompt-caching docs), first match wins; model names
# are lower-cased with dots as dashes so gateway spellings (`anthropic/claude-opus-4.6`) match.
MIN_CACHEABLE_BY_MODEL: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-7", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
    ("claude-haiku-3", 2048),
)
DEFAULT_MIN_CACHEABLE = 1024  # Sonnet 3.7 to 4.6, Opus 4 and 4.1, and anything unknown

_Candidate: TypeAlias = tuple[int, int, int]  # message index, part index (-1 = last), prefix chars


def min_cacheable_tokens(model: str, *, settings: CacheSettings) -> int:
    """The configured minimum, else the model family's from the table, else 1024."""
    if settings.min_cacheable_tokens is not None:
        return settings.min_cacheable_tokens
    name = model.lower().replace(".", "-")
    return next((n for key, n in MIN_CACHEABLE_BY_MODEL if key in name), DEFAULT_MIN_CACHEABLE)


def place_breakpoints(
    body: JSON,
    system: SystemPrompt,
    n_system: int,
    turn: Turn,
    settings: CacheSettings,
    *,
    client_marked: bool,
) -> tuple[JSON, int]:
    messages: list[Message] = body["messages"]
    found = find_body_markers(body) if client_marked else []
    client_marks = [(_order(p), _ttl_of(_at(body, p))) for p in found]
    floor = min_cacheable_tokens(turn.model, settings=settings) * CHARS_PER_TOKEN
    accepted: list[tuple[tuple[int, ...], Ttl, _Candidate]] = []
    for candidate in _candidates(body, system, n_system):
        index, part, chars = candidate
        if len(client_marks) + len(accepted) >= MAX_BREAKPOINTS:
            break
        if chars < floor or already_marked(messages[index], part):
            continue
        position = (1, index, resolve_part_index(messages[index], part))  # a tool's: its last part
        ttl = _fit_ttl(position, settings.ttl, [*client_marks, *((o, t) for o, t, _ in accepted)])
        if ttl is not None:
            accepted.append((position, ttl, candidate))
    out = list(messages)
    for _, ttl, (index, part, _) in accepted:
        out[index] = with_marker(out[index], part, ttl)
    return body_with_messages(body, out), len(accepted)


def _candidates(body: JSON, system: SystemPrompt, n_system: int) -> Iterator[_Candidate]:
    """Our breakpoints in priority order: last message (L), static part (S), client system (C)."""
    messages: list[Message] = body["messages"]
    sizes = [_chars(m.get("content")) + _chars(m.get("tool_calls")) for m in messages]
    tools = _chars(body.get("tools"))
    last = next(
        (i for i in reversed(range(n_system, len(messages))) if can_take_marker(messages[i])), -1
    )
    if last >= 0:
        yield last, -1, tools + sum(sizes[: last + 1])
    if system.static:
        yield 0, 0, tools + len(system.static)
    client = [m for m in system.client if m.get("content")]
    if client:
        merged = bool(system.static or system.dynamic)
        part = len(text_parts(system.static)) + sum(len(as_parts(m)) for m in client) - 1
        chars = tools + len(system.static) + sum(_chars(m.get("content")) for m in client)
        yield (0, part, chars) if merged else (n_system - 1, -1, chars)


def _fit_ttl(
    position: tuple[int, ...], wanted: Ttl, marks: Sequence[tuple[tuple[int, ...], Ttl]]
) -> Ttl | None:
    """The TTL a new breakpoint at `position` may have so 1h ones still precede 5m ones."""
    earlier_5m = any(o < position and t == "5m" for o, t in marks)
    later_1h = any(o > position and t == "1h" for o, t in marks)
    if earlier_5m and later_1h:
        return None
    return "5m" if earlier_5m else "1h" if later_1h else wanted


def _ttl_of(holder: Any) -> Ttl:
    marker = holder.get("cache_control")
    return "1h" if isinstance(marker, dict) and marker.get("ttl") == "1h" else "5m"


def _order(path: MarkerPath) -> tuple[int, ...]:
    """Anthropic's processing order: tools, then system and messages, then a top-level marker."""
    section = {"tools": 0, "messages": 1}.get(str(path[0]), 2) if path else 2
    return (section, *(p for p in path if isinstance(p, int)))


def _at(value: Any, path: MarkerPath) -> Any:
    for key in path:
        value = value[key]
    return value


def _chars(value: Any) -> int:
    if value is None:
        return 0
    return len(value) if isinstance(value, str) else len(orjson.dumps(value))
