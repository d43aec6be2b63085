"""`previous_response_id`, the pure part: the record kept for a response the proxy served, and
a request continuing from it expanded to the whole conversation (pure).

The proxy keeps, per tenant and for the session's lifetime, each response it served as a
`StoredResponse`: the full input of the request it answered (itself already expanded) and the
items it output. A request naming it as `previous_response_id` is expanded before anything else
runs: its input becomes the record's input, the record's output, then its own input, and it no
longer names the previous response. The pipeline then sees (and can prune, compact, bootstrap)
the whole conversation, in front of any upstream. The `instructions` of the earlier request are
not carried over (the API does not carry them either).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.inbound.responses_request import input_items
from proxy.types import JSON


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    input: tuple[Any, ...]
    """The input items of the request it answered, expanded."""
    output: tuple[Any, ...]
    """The items it output."""


def stored_response(request: Mapping[str, Any], response: Mapping[str, Any]) -> StoredResponse:
    """The record of `response`, the answer to the (expanded) `request`."""
    output = response.get("output")
    return StoredResponse(
        id=str(response.get("id") or ""),
        input=input_items(request),
        output=tuple(output) if isinstance(output, list) else (),
    )


def record_json(record: StoredResponse) -> JSON:
    """The record as JSON, for the store."""
    return {"id": record.id, "input": list(record.input), "output": list(record.output)}


def record_from_json(value: Any) -> StoredResponse | None:
    """A record read back from the store; None for anything that is not one."""
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return None
    given, output = value.get("input"), value.get("output")
    if not isinstance(given, list) or not isinstance(output, list):
        return None
    return StoredResponse(id=value["id"], input=tuple(given), output=tuple(output))


def expand_previous(body: Mapping[str, Any], record: StoredResponse) -> JSON:
    """`body`, which continues `record`, with the whole conversation as its input and no
    `previous_response_id`; every other key as sent. `body` is not mutated."""
    out = {key: value for key, value in body.items() if key != "previous_response_id"}
    out["input"] = [*record.input, *record.output, *input_items(body)]
    return out
