"""Turn one TOML table into a frozen settings dataclass, checking keys and types."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

from proxy.errors import ConfigError

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
        raise ConfigError(f"must be {_describe(hint)}", key=key, file=file)
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise ConfigError(f"must be one of {list(typing.get_args(hint))}", key=key, file=file)
    if origin is tuple:
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        if not isinstance(value, list):
            raise ConfigError("must be a list", key=key, file=file)
        return tuple(coerce(v, item, key, file) for v in value)
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
    raise ConfigError(f"must be {_describe(hint)}", key=key, file=file)


def _describe(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")
