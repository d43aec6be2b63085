"""What one request cost, from the usage its answer reported. Pure.

`token_counts` splits a `usage` object into the four ways input is billed plus output, for each
wire shape an upstream reports:
- OpenAI chat completions: `prompt_tokens` (all input), `prompt_tokens_details.cached_tokens`
  (read from the cache), `prompt_tokens_details.cache_write_tokens` (written), `completion_tokens`.
  ctxproxy's Anthropic translation adds `cache_read_input_tokens` and
  `cache_creation_input_tokens` to this shape; they are read when the details are absent.
- OpenAI Responses: `input_tokens` (all input) with `input_tokens_details.cached_tokens`,
  `output_tokens`.
- Anthropic Messages: `input_tokens` (the uncached rest only), `cache_read_input_tokens`,
  `cache_creation_input_tokens` (split by `cache_creation.ephemeral_1h_input_tokens` /
  `ephemeral_5m_input_tokens` when present; otherwise all at the default 5 minutes),
  `output_tokens`.
`usage_counts` does the same for the server's `proxy.usage.Usage` (every upstream's usage, already
in the chat shape). `price_counts` multiplies them by a `Price`; `price_usage` does both, or says
why it cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.cost.prices import Price, PriceTable, Unpriced
from proxy.usage import Usage

__all__ = [
    "COST_KINDS",
    "Cost",
    "TokenCounts",
    "price_counts",
    "price_usage",
    "token_counts",
    "usage_counts",
]

PER_MILLION = 1_000_000
COST_KINDS = ("input", "cache_read", "cache_write", "output")
"""The fields of `Cost`: the values of the cost metric's `kind` label."""


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Tokens of one request by how they are billed; `input` is neither read nor written."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    output: int = 0

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write + self.cache_write_1h


@dataclass(frozen=True, slots=True)
class Cost:
    """USD by kind (`COST_KINDS`)."""

    input: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    output: float = 0.0

    @property
    def total(self) -> float:
        return self.input + self.cache_read + self.cache_write + self.output

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.input + other.input,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output + other.output,
        )


def token_counts(usage: Mapping[str, Any]) -> TokenCounts | None:
    """The billed counts in a `usage` object of any shape above; None when it has no counts."""
    if "prompt_tokens" in usage:
        return _chat_counts(usage)
    if "input_tokens" not in usage:
        return None
    if "input_tokens_details" in usage:  # Responses: input_tokens includes the cached ones
        read = _count(_details(usage, "input_tokens_details").get("cached_tokens"))
        total = _count(usage.get("input_tokens"))
        return TokenCounts(
            input=max(total - read, 0),
            cache_read=min(read, total),
            output=_count(usage.get("output_tokens")),
        )
    written = _count(usage.get("cache_creation_input_tokens"))
    hour = min(_count(_details(usage, "cache_creation").get("ephemeral_1h_input_tokens")), written)
    return TokenCounts(
        input=_count(usage.get("input_tokens")),
        cache_read=_count(usage.get("cache_read_input_tokens")),
        cache_write=written - hour,
        cache_write_1h=hour,
        output=_count(usage.get("output_tokens")),
    )


def usage_counts(usage: Usage) -> TokenCounts:
    """The billed counts of a `Usage` (its prompt tokens include the cached and written ones)."""
    read = min(usage.cached_tokens, usage.prompt_tokens)
    written = min(usage.cache_creation_tokens, usage.prompt_tokens - read)
    hour = min(usage.cache_write_1h_tokens, written)
    return TokenCounts(
        input=usage.prompt_tokens - read - written,
        cache_read=read,
        cache_write=written - hour,
        cache_write_1h=hour,
        output=usage.completion_tokens,
    )


def _chat_counts(usage: Mapping[str, Any]) -> TokenCounts:
    details = _details(usage, "prompt_tokens_details")
    total = _count(usage.get("prompt_tokens"))
    read = _count(details.get("cached_tokens", usage.get("cache_read_input_tokens")))
    written = _count(details.get("cache_write_tokens", usage.get("cache_creation_input_tokens")))
    read = min(read, total)
    written = min(written, total - read)
    hour = min(_count(_details(usage, "cache_creation").get("ephemeral_1h_input_tokens")), written)
    return TokenCounts(
        input=total - read - written,
        cache_read=read,
        cache_write=written - hour,
        cache_write_1h=hour,
        output=_count(usage.get("completion_tokens")),
    )


def price_counts(counts: TokenCounts, price: Price) -> Cost:
    """USD of `counts` at `price`. Writes without a write price cost what input costs; 1-hour
    writes without a 1-hour price cost what default writes cost."""
    write = price.cache_write if price.cache_write is not None else price.input
    hour = price.cache_write_1h if price.cache_write_1h is not None else write
    return Cost(
        input=counts.input * price.input / PER_MILLION,
        cache_read=counts.cache_read * price.cache_read / PER_MILLION,
        cache_write=(counts.cache_write * write + counts.cache_write_1h * hour) / PER_MILLION,
        output=counts.output * price.output / PER_MILLION,
    )


def price_usage(usage: Mapping[str, Any], model: str, table: PriceTable) -> Cost | Unpriced:
    """The request's cost, or `Unpriced` (the model is not priced, or `usage` has no counts)."""
    price = table.lookup(model)
    if isinstance(price, Unpriced):
        return price
    counts = token_counts(usage)
    if counts is None:
        return Unpriced(model, "the usage reports no token counts")
    return price_counts(counts, price)


def _details(usage: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = usage.get(key)
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int:
    """A count as reported, or 0 for anything but a non-negative integer (a bool is not one)."""
    return value if type(value) is int and value >= 0 else 0
