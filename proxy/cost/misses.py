"""Why a prompt-cache miss happened: a pure classifier over two requests' facts.

A miss is a request of a session that read fewer tokens from the provider's cache than the
session's previous request left there (`cache_left`): with breakpoints (Anthropic), what the
previous request read plus what it wrote; with automatic prefix caching (OpenAI), its whole prompt
counted as the provider counts cached tokens (from 1,024, in steps of 128). This counts a miss on
every request whose cached tokens fell, and also on each request that keeps reading only an early
prefix (the system prompt) while the rest is written anew each time. Its cause, first that holds:
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

__all__ = ["MISS_CAUSES", "MissCause", "RequestFacts", "cache_left", "classify_miss", "is_miss"]

AUTOMATIC_MIN_TOKENS = 1024
AUTOMATIC_STEP = 128

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

    `at`: when the request was sent upstream (seconds). `prompt_tokens`, `cached_tokens`,
    `written_tokens`: the prompt's size, the cache reads and the cache writes the upstream
    reported (writes: Anthropic's `cache_creation_input_tokens`). `extends_previous`: the
    client's messages (as it sent them, before any stage) start with the previous request's
    messages, under the same system prompt and tools.
    `bootstrap_changed`, `compacted`, `pruned`: this request's prompt differs from the previous
    one's because of ctxproxy — the bootstrap text differs, a summary was applied that the
    previous request did not carry, new pruning decisions were taken (replays do not count).
    """

    at: float
    prompt_tokens: int
    cached_tokens: int
    written_tokens: int = 0
    extends_previous: bool = True
    bootstrap_changed: bool = False
    compacted: bool = False
    pruned: bool = False


def cache_left(facts: RequestFacts, *, automatic: bool) -> int:
    """The tokens of `facts`' prompt the provider holds in its cache after serving it.

    `automatic`: the provider caches every prompt by itself and reports no writes (OpenAI):
    the prompt, rounded down to its 128-token steps, from 1,024 tokens on. Otherwise (Anthropic
    breakpoints): what the request read plus what it wrote."""
    if not automatic:
        return facts.cached_tokens + facts.written_tokens
    if facts.prompt_tokens < AUTOMATIC_MIN_TOKENS:
        return 0
    steps = (facts.prompt_tokens - AUTOMATIC_MIN_TOKENS) // AUTOMATIC_STEP
    return AUTOMATIC_MIN_TOKENS + steps * AUTOMATIC_STEP


def is_miss(previous: RequestFacts | None, current: RequestFacts, *, automatic: bool) -> bool:
    """True when `current` read fewer cached tokens than `previous` left in the cache."""
    return previous is not None and current.cached_tokens < cache_left(
        previous, automatic=automatic
    )


def classify_miss(
    previous: RequestFacts | None,
    current: RequestFacts,
    *,
    cache_ttl_s: float,
    automatic: bool = False,
) -> MissCause | None:
    """The cause of `current`'s miss (module doc), or None when it is not a miss.

    `cache_ttl_s` is the lifetime of the entries the previous request wrote or refreshed:
    Anthropic 300 or 3,600 (the breakpoints' `ttl`), OpenAI at least 300 (its entries last 5 to
    10 minutes idle, so a longer gap counts as `ttl`). `automatic` as for `cache_left`."""
    if previous is None or not is_miss(previous, current, automatic=automatic):
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
