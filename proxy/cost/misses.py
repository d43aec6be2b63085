"""Why a prompt-cache miss happened: a pure classifier over two requests' facts.

A miss is a request of a session whose cached (read) tokens fell against the session's previous
request: part of a prefix that was cached is not any more. Its cause, first that holds:
1. `ttl`        — the gap since the previous request exceeds the cache's lifetime: the entries
                  expired, whatever else changed (going direct would have missed too);
2. `client`     — the client's history does not extend the previous one (it edited, dropped or
                  summarised messages itself, or changed its system prompt or tools);
3. `bootstrap`  — ctxproxy's bootstrap text changed (a workspace file changed): the system
                  prompt, first in the prompt;
4. `compaction` — ctxproxy applied a new summary: the history from its start;
5. `prune`      — ctxproxy took a new batch of pruning decisions: old tool results mid-history;
6. `unknown`    — none of these (a provider evicted early, or a cache lookup limit, such as
                  Anthropic's 20 blocks before a breakpoint, was passed).
The proxy's own changes are ordered by where they sit in the prompt: the earliest one is the one
that invalidated the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MISS_CAUSES", "MissCause", "RequestFacts", "classify_miss", "is_miss"]

MissCause = Literal["ttl", "client", "bootstrap", "compaction", "prune", "unknown"]
MISS_CAUSES: tuple[MissCause, ...] = (
    "ttl",
    "client",
    "bootstrap",
    "compaction",
    "prune",
    "unknown",
)


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the engine records for each request of a session, for miss attribution.

    `at`: when the request was sent upstream (seconds). `cached_tokens`: the cache reads the
    upstream reported. `extends_previous`: the client's messages (as it sent them, before any
    stage) start with the previous request's messages, under the same system prompt and tools.
    `bootstrap_changed`, `compacted`, `pruned`: this request's prompt differs from the previous
    one's because of ctxproxy — the bootstrap text differs, a summary was applied that the
    previous request did not carry, new pruning decisions were taken (replays do not count).
    """

    at: float
    cached_tokens: int
    extends_previous: bool = True
    bootstrap_changed: bool = False
    compacted: bool = False
    pruned: bool = False


def is_miss(previous: RequestFacts | None, current: RequestFacts) -> bool:
    """True when `current` read fewer cached tokens than the session's `previous` request."""
    return previous is not None and current.cached_tokens < previous.cached_tokens


def classify_miss(
    previous: RequestFacts | None, current: RequestFacts, *, cache_ttl_s: float
) -> MissCause | None:
    """The cause of `current`'s miss (module doc), or None when it is not a miss.

    `cache_ttl_s` is the lifetime of the entries the previous request wrote or refreshed:
    Anthropic 300 or 3,600 (the breakpoints' `ttl`), OpenAI at least 300 (its entries last 5 to
    10 minutes idle, so a longer gap counts as `ttl`)."""
    if previous is None or not is_miss(previous, current):
        return None
    if current.at - previous.at > cache_ttl_s:
        return "ttl"
    if not current.extends_previous:
        return "client"
    if current.bootstrap_changed:
        return "bootstrap"
    if current.compacted:
        return "compaction"
    if current.pruned:
        return "prune"
    return "unknown"
