"""Pricing one request from the usage its answer reported, in each wire shape."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.cost.prices import Price, Unpriced, parse_prices
from proxy.cost.pricing import (
    Cost,
    TokenCounts,
    price_counts,
    price_usage,
    token_counts,
    usage_counts,
)
from proxy.usage import Usage

SONNET = Price(
    "claude-sonnet-4-5",
    input=3.0,
    cache_read=0.3,
    output=15.0,
    cache_write=3.75,
    cache_write_1h=6.0,
)
GPT = Price("gpt-5.1", input=1.25, cache_read=0.125, output=10.0)
TABLE = parse_prices("""
[models."claude-sonnet-4-5"]
input = 3.0
cache_write = 3.75
cache_write_1h = 6.0
cache_read = 0.3
output = 15.0
source = "https://example.com"
read = 2026-12-03
""")


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        pytest.param(
            {
                "prompt_tokens": 1000,
                "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": 800},
            },
            TokenCounts(input=200, cache_read=800, output=50),
            id="openai-chat",
        ),
        pytest.param(
            {
                "prompt_tokens": 1000,
                "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300},
            },
            TokenCounts(input=100, cache_read=600, cache_write=300, output=50),
            id="openai-chat-with-writes",
        ),
        pytest.param(  # ctxproxy's Anthropic translation: prompt = input + writes + reads
            {
                "prompt_tokens": 1000,
                "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": 700},
                "cache_creation_input_tokens": 250,
                "cache_read_input_tokens": 700,
            },
            TokenCounts(input=50, cache_read=700, cache_write=250, output=50),
            id="translated-anthropic",
        ),
        pytest.param(
            {
                "input_tokens": 1000,
                "output_tokens": 50,
                "input_tokens_details": {"cached_tokens": 900},
            },
            TokenCounts(input=100, cache_read=900, output=50),
            id="openai-responses",
        ),
        pytest.param(
            {
                "input_tokens": 40,
                "output_tokens": 50,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 60,
            },
            TokenCounts(input=40, cache_read=900, cache_write=60, output=50),
            id="anthropic",
        ),
        pytest.param(
            {
                "input_tokens": 40,
                "output_tokens": 50,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 60,
                "cache_creation": {
                    "ephemeral_1h_input_tokens": 45,
                    "ephemeral_5m_input_tokens": 15,
                },
            },
            TokenCounts(input=40, cache_read=900, cache_write=15, cache_write_1h=45, output=50),
            id="anthropic-1h",
        ),
        pytest.param(  # nulls and nonsense count as 0; reads never exceed the prompt
            {
                "prompt_tokens": 100,
                "completion_tokens": None,
                "prompt_tokens_details": {"cached_tokens": 500},
            },
            TokenCounts(input=0, cache_read=100, output=0),
            id="clamped",
        ),
    ],
)
def test_token_counts_of_each_shape(usage: dict[str, Any], counts: TokenCounts) -> None:
    before = copy.deepcopy(usage)
    assert token_counts(usage) == counts
    assert usage == before


def test_usage_without_counts_gives_none() -> None:
    assert token_counts({"total_tokens": 5}) is None


def test_price_counts_anthropic() -> None:
    cost = price_counts(
        TokenCounts(
            input=1_000_000,
            cache_read=2_000_000,
            cache_write=1_000_000,
            cache_write_1h=1_000_000,
            output=100_000,
        ),
        SONNET,
    )
    assert cost == Cost(input=3.0, cache_read=0.6, cache_write=3.75 + 6.0, output=1.5)
    assert cost.total == pytest.approx(14.85)


def test_writes_without_a_write_price_cost_input() -> None:
    cost = price_counts(TokenCounts(cache_write=1_000_000, cache_write_1h=1_000_000), GPT)
    assert cost.cache_write == pytest.approx(2.5)


def test_costs_add_up_by_kind() -> None:
    assert Cost(1, 2, 3, 4) + Cost(0.5, 0.5, 0.5, 0.5) == Cost(1.5, 2.5, 3.5, 4.5)


def test_price_usage_prices_a_listed_model() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 10_000}
    cost = price_usage(usage, "claude-sonnet-4-5-20250929", TABLE)
    assert isinstance(cost, Cost)
    assert cost.total == pytest.approx((1000 * 3 + 10_000 * 0.3 + 100 * 15) / 1e6)


def test_price_usage_never_guesses() -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 1}
    assert price_usage(usage, "gpt-4o", TABLE) == Unpriced("gpt-4o", "not in the price table")
    assert isinstance(price_usage({}, "claude-sonnet-4-5", TABLE), Unpriced)


def test_usage_counts_split_the_servers_usage_like_the_wire_shapes() -> None:
    usage = Usage(1200, 7, cached_tokens=200, cache_creation_tokens=900, cache_write_1h_tokens=600)
    assert usage_counts(usage) == TokenCounts(
        input=100, cache_read=200, cache_write=300, cache_write_1h=600, output=7
    )
    wire = {
        "prompt_tokens": 1200,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 200},
        "cache_creation_input_tokens": 900,
        "cache_creation": {"ephemeral_1h_input_tokens": 600},
    }
    assert token_counts(wire) == usage_counts(usage)


def test_usage_counts_never_count_more_than_the_prompt() -> None:
    counts = usage_counts(Usage(100, 0, cached_tokens=80, cache_creation_tokens=50))
    assert (counts.input, counts.cache_read, counts.cache_write) == (0, 80, 20)
