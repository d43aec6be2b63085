"""Provider prompt-cache models for the replays (section 4). Tokens are chars/4 throughout.

Anthropic: a request is a sequence of blocks (tools, system parts, message parts); a
`cache_control` marker makes its prefix a breakpoint. A read hits the longest cached prefix that
ends at a breakpoint or up to 20 blocks before one; a write stores the prefix at every breakpoint
that reaches the model's minimum (1,024 tokens); entries live `ttl_s` (5 min), refreshed on a hit.
OpenAI: the longest common prefix with an earlier prompt still in cache (`ttl_s`, 10 min), counted
only from 1,024 tokens and then in 128-token steps; no markers needed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

LOOKBACK = 20
MIN_TOKENS = 1024
STEP = 128


def blocks(body: dict[str, Any]) -> Iterator[tuple[bytes, bool]]:
    """(canonical bytes, is a breakpoint) for each block, in the order Anthropic caches them."""
    for tool in body.get("tools") or []:
        yield orjson.dumps(tool, option=orjson.OPT_SORT_KEYS), "cache_control" in tool
    for message in body["messages"]:
        yield from _message_blocks(message)


def _message_blocks(message: dict[str, Any]) -> Iterator[tuple[bytes, bool]]:
    role = message.get("role", "").encode()
    marked = "cache_control" in message
    content = message.get("content")
    parts = content if isinstance(content, list) else [content] if content else []
    calls = message.get("tool_calls") or []
    items = [*parts, *calls] or [""]
    for index, part in enumerate(items):
        own = isinstance(part, dict) and "cache_control" in part
        clean = {k: v for k, v in part.items() if k != "cache_control"} if own else part
        data = role + orjson.dumps(clean, option=orjson.OPT_SORT_KEYS)
        yield data, own or (marked and index == len(items) - 1)


@dataclass
class AnthropicCache:
    clock: Callable[[], float]
    ttl_s: float = 300.0
    entries: dict[bytes, float] = field(default_factory=dict)
    written: int = 0

    def serve(self, body: dict[str, Any]) -> int:
        now, chain, hashes, tokens, marks = self.clock(), hashlib.sha256(), [], [], []
        total = 0
        for data, mark in blocks(body):
            chain.update(data)
            hashes.append(chain.copy().digest())
            total += len(data) // 4
            tokens.append(total)
            if mark:
                marks.append(len(hashes) - 1)
        hit = self._read(now, hashes, tokens, marks)
        for index in marks:
            if tokens[index] >= MIN_TOKENS:
                if self.entries.get(hashes[index], 0) < now:
                    self.written += tokens[index] - hit
                self.entries[hashes[index]] = now + self.ttl_s
        return hit

    def _read(self, now: float, hashes: list[bytes], tokens: list[int], marks: list[int]) -> int:
        best = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK), -1):
                if self.entries.get(hashes[index], 0) >= now:
                    self.entries[hashes[index]] = now + self.ttl_s
                    best = max(best, tokens[index])
                    break
        return best


@dataclass
class OpenAICache:
    clock: Callable[[], float]
    ttl_s: float = 600.0
    prompts: list[tuple[float, bytes]] = field(default_factory=list)
    written: int = 0

    def serve(self, body: dict[str, Any]) -> int:
        now = self.clock()
        text = b"".join(data for data, _ in blocks(body))
        self.prompts = [(t, p) for t, p in self.prompts if t >= now][-8:]
        common = max((_common_prefix(text, p) for _, p in self.prompts), default=0)
        self.prompts.append((now + self.ttl_s, text))
        tokens = common // 4
        return 0 if tokens < MIN_TOKENS else MIN_TOKENS + (tokens - MIN_TOKENS) // STEP * STEP


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
