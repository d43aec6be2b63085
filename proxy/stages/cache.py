"""Cache layout: render the final `Draft` as the outgoing chat-completions body.

The leading system content is one message: static part, the client's own system content, dynamic
part. The static part is always the first bytes of it (joined with a blank line in `openai` and
`none` style, its own text part in `anthropic` style), so it is byte-identical whenever
`draft.system.static` is. With no static and no dynamic part the client's system messages are sent
exactly as they came. Merging drops message-level keys of client system messages other than
`content` (a message-level `cache_control` moves onto that message's last part).

Per `turn.cache_style`:
- `openai`: plain strings (text parts only if a client system message used parts or a marker);
  `prompt_cache_key = "ctxproxy-<tenant>"` when configured and the client set none.
- `none`: the same assembly; nothing else is added.
- `anthropic`: up to three breakpoints of ours where the client's own markers leave room, placed
  by `proxy.stages.breakpoints`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.content import MarkerPath, find_body_markers
from proxy.errors import InvalidSetting
from proxy.pipeline import body_with_messages
from proxy.stages.breakpoints import place_breakpoints
from proxy.stages.marker import Ttl, as_parts, text_parts
from proxy.types import JSON, Draft, Message, StageReport, SystemPrompt, Turn

__all__ = [
    "CacheSettings",
    "render_request",
    "render_with_markers",
]


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """`min_cacheable_tokens=None` looks the minimum up by model
    (`proxy.stages.breakpoints.MIN_CACHEABLE_BY_MODEL`)."""

    ttl: Ttl = "5m"
    send_prompt_cache_key: bool = False
    min_cacheable_tokens: int | None = None

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
        body.setdefault("prompt_cache_key", f"ctxproxy-{turn.tenant}")
    markers = find_body_markers(body) if client_marked or added else []
    counters = {
        "breakpoints": len(markers),
        "breakpoints_added": added,
        "static_chars": len(draft.system.static),
    }
    return body, StageReport(stage="cache", counters=counters), markers


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
