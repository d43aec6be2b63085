"""Provider prompt-cache models: how much of a request a provider would read from its cache and
write to it. Pure (state in the object, time passed in). Tokens are characters / 4.

Anthropic (`AnthropicCache`): a request is a sequence of blocks (tools, then each message's
content parts and tool calls; a string content is one text part, as the Messages API sees it,
so marking a message changes none of its bytes); a `cache_control` marker makes the prefix up to
its block a breakpoint. A read takes the longest cached prefix that ends at a breakpoint or at
one of the 20 blocks before it, and refreshes that entry. A write stores the prefix at every
marked block that reaches the minimum (1,024 tokens); one request writes once, from the read up
to its furthest new breakpoint, and the part up to its last new 1-hour breakpoint counts as a
1-hour write. Entries live 5 minutes (`"ttl": "1h"` on the marker: an hour) from their last
write or read.
OpenAI (`OpenAICache`): the longest common prefix with a prompt seen in the last 10 minutes,
counted only from 1,024 tokens and then in 128-token steps; no markers, no write charge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from proxy.usage import CHARS_PER_TOKEN

__all__ = ["AnthropicCache", "CacheUse", "OpenAICache", "OpenAIDigests", "blocks"]

LOOKBACK = 20
MIN_TOKENS = 1024
STEP = 128
TTL_S = MappingProxyType({"5m": 300.0, "1h": 3600.0})
_ABSENT = (float("-inf"), 0.0)


@dataclass(frozen=True, slots=True)
class CacheUse:
    """A request's prompt tokens as the cache counts them (`prompt`), how many it read from the
    cache and wrote to it (`written_1h` of those at the 1-hour lifetime)."""

    read: int = 0
    written: int = 0
    written_1h: int = 0
    prompt: int = 0


def blocks(body: dict[str, Any]) -> Iterator[tuple[bytes, str | None]]:
    """(canonical bytes, the marker's ttl `"5m"`/`"1h"` or None) per block, in cache order."""
    for tool in body.get("tools") or []:
        yield orjson.dumps(tool, option=orjson.OPT_SORT_KEYS), _ttl(tool)
    for message in body["messages"]:
        yield from _message_blocks(message)


def _message_blocks(message: dict[str, Any]) -> Iterator[tuple[bytes, str | None]]:
    role = message.get("role", "").encode()
    own_ttl = _ttl(message)
    content = message.get("content")
    parts = content if isinstance(content, list) else [content] if content else []
    calls = message.get("tool_calls") or []
    items = [*parts, *calls] or [""]
    for index, part in enumerate(items):
        ttl = _ttl(part) if isinstance(part, dict) else None
        if isinstance(part, str):  # a string is one text part: marking it changes no byte
            part = {"type": "text", "text": part}
        clean = {k: v for k, v in part.items() if k != "cache_control"} if ttl else part
        data = role + orjson.dumps(clean, option=orjson.OPT_SORT_KEYS)
        yield data, ttl or (own_ttl if index == len(items) - 1 else None)


def _ttl(holder: Any) -> str | None:
    marker = holder.get("cache_control") if isinstance(holder, dict) else None
    if marker is None:
        return None
    return "1h" if isinstance(marker, dict) and marker.get("ttl") == "1h" else "5m"


@dataclass
class AnthropicCache:
    """One provider cache (one organisation's), shared by the requests served through it."""

    entries: dict[bytes, tuple[float, float]] = field(default_factory=dict)
    """Prefix hash -> (expires at, lifetime in seconds)."""
    written: int = 0
    """All tokens written so far."""

    def serve(self, body: dict[str, Any], *, now: float) -> CacheUse:
        """Read and write `body`'s prefixes at time `now` (seconds)."""
        chain, hashes, tokens, marks = hashlib.sha256(), [], [], []
        total = 0
        for data, ttl in blocks(body):
            chain.update(data)
            hashes.append(chain.copy().digest())
            total += len(data) // CHARS_PER_TOKEN
            tokens.append(total)
            if ttl is not None:
                marks.append((len(hashes) - 1, ttl))
        hit = self._read(now, hashes, tokens, [index for index, _ in marks])
        end = end_1h = hit
        for index, ttl in marks:
            if tokens[index] < MIN_TOKENS:
                continue
            expires, lifetime = self.entries.get(hashes[index], _ABSENT)
            if expires < now:
                end = max(end, tokens[index])
                if ttl == "1h":
                    end_1h = max(end_1h, tokens[index])
            lifetime = max(lifetime if expires >= now else 0.0, TTL_S[ttl])
            self.entries[hashes[index]] = (now + lifetime, lifetime)
        self.written += end - hit
        return CacheUse(read=hit, written=end - hit, written_1h=end_1h - hit, prompt=total)

    def _read(self, now: float, hashes: list[bytes], tokens: list[int], marks: list[int]) -> int:
        best = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK), -1):
                expires, lifetime = self.entries.get(hashes[index], _ABSENT)
                if expires >= now:
                    self.entries[hashes[index]] = (now + lifetime, lifetime)
                    best = max(best, tokens[index])
                    break
        return best


@dataclass
class OpenAICache:
    """Automatic prefix caching, as OpenAI describes it."""

    ttl_s: float = 600.0
    prompts: list[tuple[float, bytes]] = field(default_factory=list)
    written: int = 0

    def serve(self, body: dict[str, Any], *, now: float) -> CacheUse:
        parts = [data for data, _ in blocks(body)]
        text = b"".join(parts)
        self.prompts = [(t, p) for t, p in self.prompts if t >= now][-8:]
        common = max((_common_prefix(text, p) for _, p in self.prompts), default=0)
        self.prompts.append((now + self.ttl_s, text))
        tokens = common // CHARS_PER_TOKEN
        read = 0 if tokens < MIN_TOKENS else MIN_TOKENS + (tokens - MIN_TOKENS) // STEP * STEP
        return CacheUse(read=read, prompt=sum(len(p) // CHARS_PER_TOKEN for p in parts))


@dataclass
class OpenAIDigests:
    """`OpenAICache` at block granularity, in bounded memory: it keeps, for the last `keep`
    prompts, a digest and a token count per block (40 bytes a block) instead of the text. A read
    is the longest run of whole blocks a kept prompt shares, so it can count up to one block less
    than `OpenAICache` (the part of the first differing block that still matches)."""

    ttl_s: float = 600.0
    keep: int = 2
    prompts: list[tuple[float, list[bytes], list[int]]] = field(default_factory=list)

    def serve(self, body: dict[str, Any], *, now: float) -> CacheUse:
        chain, hashes, tokens, total = hashlib.sha256(), [], [], 0
        for data, _ in blocks(body):
            chain.update(data)
            hashes.append(chain.copy().digest())
            total += len(data) // CHARS_PER_TOKEN
            tokens.append(total)
        live = [p for p in self.prompts if p[0] >= now]
        common = max((_shared_tokens(hashes, seen, counts) for _, seen, counts in live), default=0)
        self.prompts = [*live, (now + self.ttl_s, hashes, tokens)][-self.keep :]
        read = 0 if common < MIN_TOKENS else MIN_TOKENS + (common - MIN_TOKENS) // STEP * STEP
        return CacheUse(read=read, prompt=total)


def _shared_tokens(hashes: list[bytes], seen: list[bytes], counts: list[int]) -> int:
    """Tokens of the longest run of leading blocks `hashes` shares with `seen` (chained digests:
    the last equal one ends the shared run)."""
    low, high = 0, min(len(hashes), len(seen))
    while low < high:
        middle = (low + high + 1) // 2
        if hashes[middle - 1] == seen[middle - 1]:
            low = middle
        else:
            high = middle - 1
    return counts[low - 1] if low else 0


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix, by binary search over C-speed slice comparisons."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
