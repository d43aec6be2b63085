"""Turn one TOML table into a frozen settings dataclass, checking keys and types.

Errors say what a key must be in plain words (`an integer or "auto"`, `a list of strings`), and
a value the dataclass refuses (`InvalidSetting`) is reported under its own key with its rule.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

from proxy.errors import ConfigError, InvalidSetting

T = TypeVar("T")


def expect_table(value: Any, where: str, file: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError("must be a table", key=where, file=file)
    return value


def build_table(
    cls: type[T],
    table: Any,
    where: str,
    file: str,
    *,
    base: T | None = None,
    allowed: set[str] | None = None,
) -> T:
    """`base` (default: `cls()`) with the table's keys applied; unknown keys are errors."""
    table = expect_table(table, where, file)
    hints = typing.get_type_hints(cls)
    names = allowed if allowed is not None else {f.name for f in fields(cls)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for key, value in table.items():
        if key not in names:
            raise ConfigError("unknown key", key=f"{where}.{key}", file=file)
        changes[key] = coerce(value, hints[key], f"{where}.{key}", file)
    made = base if base is not None else cls()
    try:
        return replace(made, **changes)  # type: ignore[type-var]
    except InvalidSetting as exc:
        raise ConfigError(exc.rule, key=f"{where}.{exc.name}", file=file) from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), key=where, file=file) from exc


def coerce(value: Any, hint: Any, key: str, file: str) -> Any:
    """Check `value` against a type hint; lists become tuples. Raise ConfigError if it fits not."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return coerce(value, option, key, file)
            except ConfigError:
                continue
        raise ConfigError(f"must be {describe(hint)}", key=key, file=file)
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise ConfigError(f"must be {describe(hint)}", key=key, file=file)
    if origin is tuple:
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        if not isinstance(value, list):
            raise ConfigError(f"must be {describe(hint)}", key=key, file=file)
        try:
            return tuple(coerce(v, item, key, file) for v in value)
        except ConfigError:
            raise ConfigError(f"must be {describe(hint)}", key=key, file=file) from None
    return _scalar(value, hint, key, file)


def _scalar(value: Any, hint: Any, key: str, file: str) -> Any:
    if hint is Any:
        return value
    if hint is type(None):
        if value is None:
            return None
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is Path:
        if isinstance(value, str) and value and "\x00" not in value:
            return Path(value)
    else:
        raise ConfigError(f"unsupported setting type {hint!r}", key=key, file=file)
    raise ConfigError(f"must be {describe(hint)}", key=key, file=file)


WORDS: dict[Any, tuple[str, str]] = {
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "booleans"),
    str: ("a string", "strings"),
    Path: ("a path", "paths"),
    Any: ("any value", "values"),
}


def describe(hint: Any) -> str:
    """A type hint in the words of a TOML user: `int | Literal["auto"]` is 'an integer or
    "auto"', `tuple[str, ...]` 'a list of strings'. `None` is left out: TOML has no null, a
    key left out keeps its default."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _either([describe(h) for h in typing.get_args(hint) if h is not type(None)])
    if origin is typing.Literal:
        return _either([json.dumps(value) for value in typing.get_args(hint)])
    if origin is tuple:
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        return f"a list of {WORDS.get(item, WORDS[Any])[1]}"
    known = WORDS.get(hint)
    return known[0] if known is not None else str(getattr(hint, "__name__", hint))


def _either(options: list[str]) -> str:
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"
