"""Reading, copying and writing JSON with integers beyond 64 bits kept exact."""

from __future__ import annotations

import orjson
import pytest

from proxy.exact_json import copy_json, json_text, loads_exact

EDGES = [10**29, -(10**29), 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**19, 0]


@pytest.mark.parametrize("number", EDGES)
def test_loads_exact_keeps_every_integer_exact_through_orjson(number: int) -> None:
    raw = b'{"a": %d, "b": [1.5, "%d"], "c": {"d": %d}}' % (number, number, number)
    assert orjson.dumps(loads_exact(raw)) == b'{"a":%d,"b":[1.5,"%d"],"c":{"d":%d}}' % (
        number,
        number,
        number,
    )


def test_a_big_integer_survives_copy_json_and_json_text() -> None:
    value = loads_exact(b'{"a": [123456789012345678901234567890, 1], "b": "x"}')
    copied = copy_json(value)
    assert copied == value and copied is not value and copied["a"] is not value["a"]
    assert orjson.dumps(copied) == b'{"a":[123456789012345678901234567890,1],"b":"x"}'
    assert json_text(copied) == '{"a":[123456789012345678901234567890,1],"b":"x"}'
    assert json_text({"a": 1}) == '{"a": 1}'  # the stdlib's spacing when it can
