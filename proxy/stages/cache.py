"""Cache layout: render the final `Draft` as the outgoing chat-completions body.

The leading system content is one message: static part, the client's own system content, dynamic
part. The static part is always the first bytes of it (joined with a blank line in `openai` and
`none` style, its own text part in `anthropic` style), so it is byte-identical whenever
`draft.system.static` is. With no static and no dynamic part the client's system messages are sent
exactly as they came. Merging drops message-level keys of client system messages other than
`content` (a message-level `cache_control` moves onto that message's last part).

Per `turn.cache_style`:
- `openai`: plain strings (text parts only if a client system message used parts or a marker);
  a stable `prompt_cache_key` per session (`session_cache_key`: OpenAI routes requests by it, so
  a session's requests meet their own cached prefix) when configured (the upstream's default)
  and the client set none.
- `none`: the same assembly; nothing else is added.
- `anthropic`: up to three breakpoints of ours where the client's own markers leave room.

Anthropic breakpoints (`place_breakpoints`): `{"type": "ephemeral"}` (+ `"ttl": "1h"`), L on the
last part of the last message with content (on a `tool` message: the message itself), S on the
static part, C on the last part of the client's system content. The client's own markers are
counted and always kept; ours fill the slots left under 4 in the order L, S, C (L caches the most,
S survives dynamic and history changes, C is mostly covered by L anyway). A breakpoint whose
prefix (tools + content up to it, at `CHARS_PER_TOKEN`) is under the model's minimum cacheable
length, or on a part or message the client already marked, is not placed. TTLs: a 1h breakpoint
must precede every 5m one, so ours falls back to 5m after an earlier 5m marker, becomes 1h before
a later client 1h marker, and is dropped if it can be neither.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson

from proxy.content import MAX_BREAKPOINTS, MarkerPath, body_with_messages, find_body_markers
from proxy.errors import InvalidSetting
from proxy.stages.marker import (
    Ttl,
    already_marked,
    as_parts,
    can_take_marker,
    resolve_part_index,
    text_parts,
    with_marker,
)
from proxy.types import JSON, Draft, Message, StageReport, SystemPrompt, Turn
from proxy.usage import CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """`min_cacheable_tokens=None` looks the minimum up by model
    (`MIN_CACHEABLE_BY_MODEL`). `prewarm`: after a background compaction, warm the provider
    cache for the new prefix with a one-token request (`proxy.compaction.prewarm`)."""

    ttl: Ttl = "5m"
    send_prompt_cache_key: bool = False
    min_cacheable_tokens: int | None = None
    prewarm: bool = False

    def __post_init__(self) -> None:
        if self.ttl not in ("5m", "1h"):
            raise InvalidSetting("ttl", f'must be "5m" or "1h", not {self.ttl!r}')
        if self.min_cacheable_tokens is not None and self.min_cacheable_tokens < 0:
            raise InvalidSetting("min_cacheable_tokens", "must be 0 or more")


def render_request(
    draft: Draft, turn: Turn, *, settings: CacheSettings
) -> tuple[JSON, StageReport]:
    """The outgoing body: `draft.body` (unknown keys kept) + `messages`. Never mutates `draft`."""
    body, report, _ = render_with_markers(draft, turn, settings=settings)
    return body, report


def render_with_markers(
    draft: Draft, turn: Turn, *, settings: CacheSettings, client_marked: bool = True
) -> tuple[JSON, StageReport, list[MarkerPath]]:
    """`render_request`, and the paths of the body's cache markers (for validation).

    `client_marked=False` promises that no object of `draft` has a `cache_control` key: the
    body is then not searched for the client's markers (only ours can be there)."""
    anthropic = turn.cache_style == "anthropic"
    system = _system_messages(draft.system, parts=anthropic)
    body = body_with_messages(draft.body, [*system, *draft.messages])
    added = 0
    if anthropic:
        body, added = place_breakpoints(
            body, draft.system, len(system), turn, settings, client_marked=client_marked
        )
    elif turn.cache_style == "openai" and settings.send_prompt_cache_key:
        body.setdefault("prompt_cache_key", session_cache_key(turn.tenant, turn.session))
    markers = find_body_markers(body) if client_marked or added else []
    counters = {
        "breakpoints": len(markers),
        "breakpoints_added": added,
        "static_chars": len(draft.system.static),
    }
    return body, StageReport(stage="cache", counters=counters), markers


def session_cache_key(tenant: str, session: str) -> str:
    """`ctxproxy-` and 32 hex digits of the tenant and session: stable for the session, the
    same length whatever the session id, and no client-chosen id sent upstream as it is."""
    digest = hashlib.sha256(f"{tenant}\x00{session}".encode()).hexdigest()
    return f"ctxproxy-{digest[:32]}"


def _system_messages(system: SystemPrompt, *, parts: bool) -> list[Message]:
    """The client's system messages as sent, or one message: static, client, dynamic."""
    if not system.static and not system.dynamic:
        return list(system.client)
    sent = [m for m in system.client if m.get("content")]
    if parts or _needs_parts(sent):
        client = [as_parts(m) for m in sent]
        content: Any = [
            *text_parts(system.static),
            *(part for message in client for part in message),
            *text_parts(system.dynamic),
        ]
    else:
        texts = [system.static, *[m["content"] for m in sent], system.dynamic]
        content = "\n\n".join([t for t in texts if t])
    role = system.client[0].get("role", "system") if system.client else "system"
    return [{"role": role, "content": content}]


def _needs_parts(sent: list[Message]) -> bool:
    """True when a client system message has content parts or a message-level marker."""
    for message in sent:  # a loop: cheaper than any() over a generator for one or two messages
        if isinstance(message["content"], list) or "cache_control" in message:
            return True
    return False


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
