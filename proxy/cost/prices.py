"""The price table: what a token of each kind costs per model (`config/prices.toml`). Pure.

`parse_prices` validates the TOML text (every price a non-negative number, a public `source`
page, the date it was `read`; or an `unpriced` reason instead of prices) and `load_prices` reads
it from a path, the one I/O here. `PriceTable.lookup` finds a model's `Price`, or `Unpriced` with
the reason: a model the table does not list is never given another model's price.

Matching (`normalize_model`, `PriceTable.lookup`): names are lower-cased, a gateway's provider
prefix ("anthropic/") and a bracketed suffix ("[1m]") are dropped and dots become dashes; an entry
matches its own name (or an alias) and the dated snapshots of it: the name followed by
`-YYYYMMDD`, `-YYYY-MM-DD` or `-latest`. Any other continuation is another model:
"claude-sonnet-4" does not price "claude-sonnet-4-5-20250929", whose own entry does.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = [
    "Price",
    "PriceError",
    "PriceTable",
    "Unpriced",
    "load_prices",
    "normalize_model",
    "parse_prices",
]

_SNAPSHOT = re.compile(r"(.+?)(?:-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest))?")
_RATES = ("input", "cache_read", "cache_write", "cache_write_1h", "output")
_REQUIRED = ("input", "cache_read", "output")
_KEYS = frozenset({*_RATES, "source", "read", "note", "aliases", "unpriced"})


class PriceError(ValueError):
    """The price table is malformed; the message names the entry and the key."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. `cache_write` is a write at the cache's default lifetime
    (Anthropic's 5 minutes); None means writes cost what input costs. `cache_write_1h` is
    Anthropic's 1-hour write; None means the model has none (such writes price as `cache_write`)."""

    model: str
    input: float
    cache_read: float
    output: float
    cache_write: float | None = None
    cache_write_1h: float | None = None
    source: str = ""
    read: str = ""


@dataclass(frozen=True, slots=True)
class Unpriced:
    """No price for `model`: `reason` says why (not listed, or deliberately left out)."""

    model: str
    reason: str


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Entries by normalised name (aliases included): a `Price` or a deliberate `Unpriced`."""

    entries: Mapping[str, Price | Unpriced]

    def lookup(self, model: str) -> Price | Unpriced:
        """The entry whose name is `model` or a dated snapshot of it; `Unpriced` otherwise."""
        name = normalize_model(model)
        found = self.entries.get(name)
        if found is None and (snapshot := _SNAPSHOT.fullmatch(name)) is not None:
            found = self.entries.get(snapshot[1])
        return Unpriced(model, "not in the price table") if found is None else found


def normalize_model(model: str) -> str:
    """Lower-case, no provider prefix (`openai/`), no bracketed suffix (`[1m]`), dots as dashes."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = re.sub(r"\[[^\]]*\]$", "", name)
    return name.replace(".", "-")


def load_prices(path: Any) -> PriceTable:
    """`parse_prices` of the file at `path` (a `str` or `os.PathLike`); `PriceError` names it."""
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    return parse_prices(text, origin=str(path))


def parse_prices(text: str, *, origin: str = "<prices>") -> PriceTable:
    """The table in `text` (TOML, `[models."NAME"]` entries); `PriceError` on any bad entry."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"{origin}: not valid TOML: {exc}") from None
    models = data.get("models")
    if not isinstance(models, dict) or set(data) - {"models"}:
        raise PriceError(f'{origin}: expected only [models."NAME"] tables')
    entries: dict[str, Price | Unpriced] = {}
    for name, raw in models.items():
        where = f"{origin}: models.{name!r}"
        if not isinstance(raw, dict):
            raise PriceError(f"{where}: expected a table")
        entry = _entry(name, raw, where)
        for key in (name, *_aliases(raw, where)):
            normal = normalize_model(key)
            if normal in entries:
                raise PriceError(f"{where}: {key!r} is listed twice")
            entries[normal] = entry
    return PriceTable(MappingProxyType(entries))


def _entry(name: str, raw: dict[str, Any], where: str) -> Price | Unpriced:
    unknown = set(raw) - _KEYS
    if unknown:
        raise PriceError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    source, read = raw.get("source"), raw.get("read")
    if not isinstance(source, str) or not source.startswith("https://"):
        raise PriceError(f"{where}.source: the https:// page the prices come from")
    if not isinstance(read, datetime.date):
        raise PriceError(f"{where}.read: the date the page was read (YYYY-MM-DD)")
    if "unpriced" in raw:
        if not isinstance(raw["unpriced"], str) or set(raw) & set(_RATES):
            raise PriceError(f"{where}.unpriced: a reason, and then no prices")
        return Unpriced(name, raw["unpriced"])
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise PriceError(f"{where}: missing {', '.join(missing)}")
    if "cache_write_1h" in raw and "cache_write" not in raw:
        raise PriceError(f"{where}: cache_write_1h without cache_write")
    return Price(
        model=name,
        input=_rate(raw, "input", where),
        cache_read=_rate(raw, "cache_read", where),
        output=_rate(raw, "output", where),
        cache_write=_rate(raw, "cache_write", where) if "cache_write" in raw else None,
        cache_write_1h=_rate(raw, "cache_write_1h", where) if "cache_write_1h" in raw else None,
        source=source,
        read=read.isoformat(),
    )


def _rate(raw: dict[str, Any], key: str, where: str) -> float:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PriceError(f"{where}.{key}: a non-negative number of USD per million tokens")
    return float(value)


def _aliases(raw: dict[str, Any], where: str) -> list[str]:
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise PriceError(f"{where}.aliases: a list of model names")
    return aliases
