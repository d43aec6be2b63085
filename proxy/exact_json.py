"""JSON values with every integer exact, also beyond 64 bits. Pure.

orjson reads an integer outside [-2**63, 2**64) as a float and cannot write a Python int that
large. `loads_exact` keeps such an integer as an `orjson.Fragment` of its digits instead (the
request body is read so when orjson's reading holds a float that large), which
every `orjson.dumps` writes back verbatim; `copy.deepcopy` and the stdlib's `json.dumps` cannot
handle one, so values that may hold one are copied with `copy_json` and written as text with
`json_text`.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar, cast

import orjson

T = TypeVar("T")


def loads_exact(raw: bytes) -> Any:
    """A JSON document (valid for orjson: the caller read it with orjson first), read by the
    stdlib's parser, with each integer orjson cannot hold as a `Fragment` of its digits."""
    return json.loads(raw, parse_int=_exact_int)


def _exact_int(digits: str) -> int | orjson.Fragment:
    number = int(digits)
    if -(2**63) <= number < 2**64:
        return number
    return orjson.Fragment(digits)


def copy_json(value: T) -> T:
    """A deep copy of a JSON value: new dicts and lists, the same (immutable) leaves."""
    if isinstance(value, dict):
        return cast(T, {key: copy_json(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(T, [copy_json(item) for item in value])
    return value


def json_text(value: Any) -> str:
    """`value` as JSON text, as `json.dumps(value, ensure_ascii=False)` writes it; one holding a
    `Fragment` is written by orjson (compact), which alone can."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:
        return orjson.dumps(value).decode()
