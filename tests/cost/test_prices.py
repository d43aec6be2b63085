"""The price table: the shipped config/prices.toml, validation, and matching model names."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cost.prices import (
    Price,
    PriceError,
    Unpriced,
    load_prices,
    normalize_model,
    parse_prices,
)

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "prices.toml"

ENTRY = """
[models."claude-sonnet-4-5"]
input = 3.0
cache_write = 3.75
cache_write_1h = 6.0
cache_read = 0.3
output = 15.0
source = "https://example.com/pricing"
read = 2026-12-03
"""


def table(text: str = ENTRY) -> object:
    return parse_prices(text)


def test_the_shipped_table_loads_and_every_entry_names_its_page_and_date() -> None:
    prices = load_prices(SHIPPED)
    assert len(prices.entries) >= 20
    for entry in prices.entries.values():
        if isinstance(entry, Price):
            assert entry.source.startswith("https://") and entry.read == "2026-12-03"


@pytest.mark.parametrize(
    ("model", "price_input", "read"),
    [
        ("claude-sonnet-4-5-20250929", 3.0, 0.3),  # a dated snapshot of a listed model
        ("claude-opus-4-5", 5.0, 0.5),  # not Opus 4's $15: its own entry
        ("claude-opus-4-20250514", 15.0, 1.5),
        ("anthropic/claude-opus-4.6", 5.0, 0.5),  # a gateway spelling
        ("claude-opus-4-6[1m]", 5.0, 0.5),
        ("claude-sonnet-4-0", 3.0, 0.3),  # an alias
        ("gpt-4.1-2025-04-14", 2.0, 0.5),
        ("gpt-4o-mini-2024-07-18", 0.15, 0.075),
        ("GPT-5.1", 1.25, 0.125),
    ],
)
def test_shipped_prices_of_listed_models(model: str, price_input: float, read: float) -> None:
    price = load_prices(SHIPPED).lookup(model)
    assert isinstance(price, Price)
    assert (price.input, price.cache_read) == (price_input, read)


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-7",  # a newer version than any listed Sonnet 4: never priced as one
        "gpt-4o-audio-preview",  # a variant priced differently
        "gpt-5.5",
        "o3",
        "llama-3-70b",
    ],
)
def test_models_the_table_does_not_list_are_unpriced(model: str) -> None:
    found = load_prices(SHIPPED).lookup(model)
    assert found == Unpriced(model, "not in the price table")


def test_a_deliberately_unpriced_model_says_why_and_blocks_shorter_names() -> None:
    found = load_prices(SHIPPED).lookup("claude-sonnet-5-5-20260601")
    assert isinstance(found, Unpriced) and "cache-read" in found.reason
    assert isinstance(load_prices(SHIPPED).lookup("claude-sonnet-5"), Price)


def test_anthropic_cache_writes_cost_1_25x_and_2x_input_in_the_shipped_table() -> None:
    """A typo check: every Anthropic page read shows these multipliers (Haiku 3's $0.30 is the
    page's rounding of $0.3125)."""
    for entry in load_prices(SHIPPED).entries.values():
        if isinstance(entry, Price) and entry.cache_write_1h is not None:
            assert entry.cache_write == pytest.approx(entry.input * 1.25, abs=0.02)
            assert entry.cache_write_1h == pytest.approx(entry.input * 2)


def test_normalize_model() -> None:
    assert normalize_model(" OpenAI/GPT-4.1-Mini ") == "gpt-4-1-mini"
    assert normalize_model("claude-opus-4-6[1m]") == "claude-opus-4-6"


def test_parse_a_minimal_entry() -> None:
    price = parse_prices(ENTRY).lookup("claude-sonnet-4-5")
    assert price == Price(
        model="claude-sonnet-4-5",
        input=3.0,
        cache_read=0.3,
        output=15.0,
        cache_write=3.75,
        cache_write_1h=6.0,
        source="https://example.com/pricing",
        read="2026-12-03",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("input = 3.0", "input = -3.0"), "input: a non-negative number"),
        (("input = 3.0", 'input = "3"'), "input: a non-negative number"),
        (("input = 3.0", "input = true"), "input: a non-negative number"),
        (("input = 3.0\n", ""), "missing input"),
        (("cache_write = 3.75\n", ""), "cache_write_1h without cache_write"),
        (('"https://example.com/pricing"', '"http://example.com"'), "source"),
        (("read = 2026-12-03", 'read = "yesterday"'), "read"),
        (("output = 15.0", "output = 15.0\nprice = 1"), "unknown key(s) price"),
        (("output = 15.0", 'output = 15.0\nunpriced = "why"'), "unpriced"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_entry_and_key(
    change: tuple[str, str], message: str
) -> None:
    with pytest.raises(PriceError, match=r"models\.'claude-sonnet-4-5'") as raised:
        parse_prices(ENTRY.replace(*change))
    assert message in str(raised.value)


def test_a_name_listed_twice_is_refused() -> None:
    twice = ENTRY + ENTRY.replace('"claude-sonnet-4-5"', '"x"').replace(
        "output = 15.0", 'output = 15.0\naliases = ["Claude-Sonnet-4.5"]'
    )
    with pytest.raises(PriceError, match="listed twice"):
        parse_prices(twice)


def test_not_toml_and_other_tables_are_refused() -> None:
    with pytest.raises(PriceError, match="not valid TOML"):
        parse_prices("[models")
    with pytest.raises(PriceError, match="only"):
        parse_prices("[other]\nx = 1\n")


def test_load_prices_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(ENTRY.replace("input = 3.0", "input = -1"))
    with pytest.raises(PriceError, match=str(path)):
        load_prices(path)
