"""The Responses API's stream events, written for a client (pure).

`EventWriter` numbers each event (`sequence_number`, from 0) and writes it as SSE
(`proxy.sse.sse_event`); one writer per stream. `replay_response` writes the whole event
sequence of a finished Response, as the API would have streamed it:

    response.created, response.in_progress             (the response, in progress, no output)
    per output item:  response.output_item.added       (the item in progress, empty)
      message:        response.content_part.added, response.output_text.delta (the text),
                      response.output_text.done, response.content_part.done, per part
                      (a refusal part: response.refusal.delta / .done)
      function_call:  response.function_call_arguments.delta / .done
      custom_tool_call: response.custom_tool_call_input.delta / .done
                      response.output_item.done        (the item as finished)
    response.completed (response.incomplete, response.failed: by the response's status)

It answers what ctxproxy makes itself (a compaction item) and a non-streamed upstream answer a
client asked to stream; `proxy.inbound.responses_stream` uses the same writer incrementally.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from proxy.sse import sse_event
from proxy.types import JSON

TERMINAL = MappingProxyType(
    {"completed": "response.completed", "incomplete": "response.incomplete"}
)
ARGUMENT_EVENTS = MappingProxyType(
    {
        "function_call": ("arguments", "response.function_call_arguments"),
        "custom_tool_call": ("input", "response.custom_tool_call_input"),
    }
)
PART_EVENTS = MappingProxyType(
    {
        "output_text": ("text", "response.output_text"),
        "refusal": ("refusal", "response.refusal"),
    }
)


class EventWriter:
    """Writes one stream's events, numbering them."""

    def __init__(self) -> None:
        self.sequence = 0

    def event(self, kind: str, **fields: Any) -> bytes:
        payload: JSON = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse_event(kind, payload)

    def lifecycle(self, response: JSON) -> bytes:
        """`response.created` then `response.in_progress`, the response as given."""
        return self.event("response.created", response=response) + self.event(
            "response.in_progress", response=response
        )

    def finish(self, response: JSON) -> bytes:
        """The terminal event for a finished `response`, by its status."""
        kind = TERMINAL.get(str(response.get("status")), "response.failed")
        return self.event(kind, response=response)

    def open_part(self, item: JSON, index: int, content_index: int, part: JSON) -> bytes:
        empty = {**part, PART_EVENTS[part["type"]][0]: ""}
        return self.event(
            "response.content_part.added",
            item_id=item["id"],
            output_index=index,
            content_index=content_index,
            part=empty,
        )

    def part_delta(
        self, item: JSON, index: int, content_index: int, kind: str, delta: str
    ) -> bytes:
        extra: JSON = {"logprobs": []} if kind == "output_text" else {}
        return self.event(
            f"{PART_EVENTS[kind][1]}.delta",
            item_id=item["id"],
            output_index=index,
            content_index=content_index,
            delta=delta,
            **extra,
        )

    def close_part(self, item: JSON, index: int, content_index: int, part: JSON) -> bytes:
        field, prefix = PART_EVENTS[part["type"]]
        extra: JSON = {"logprobs": []} if part["type"] == "output_text" else {}
        done = self.event(
            f"{prefix}.done",
            item_id=item["id"],
            output_index=index,
            content_index=content_index,
            **{field: part[field]},
            **extra,
        )
        return done + self.event(
            "response.content_part.done",
            item_id=item["id"],
            output_index=index,
            content_index=content_index,
            part=part,
        )

    def argument_delta(self, item: JSON, index: int, delta: str) -> bytes:
        prefix = ARGUMENT_EVENTS[item["type"]][1]
        return self.event(f"{prefix}.delta", item_id=item["id"], output_index=index, delta=delta)

    def close_arguments(self, item: JSON, index: int) -> bytes:
        field, prefix = ARGUMENT_EVENTS[item["type"]]
        extra: JSON = {"name": item["name"]} if item["type"] == "function_call" else {}
        return self.event(
            f"{prefix}.done",
            item_id=item["id"],
            output_index=index,
            **{field: item[field]},
            **extra,
        )


def in_progress(item: JSON) -> JSON:
    """`item` as it is announced by `response.output_item.added`: nothing in it yet."""
    out = dict(item)
    if "status" in out:
        out["status"] = "in_progress"
    if item.get("type") == "message":
        out["content"] = []
    kind = ARGUMENT_EVENTS.get(str(item.get("type")))
    if kind is not None:
        out[kind[0]] = ""
    return out


def replay_response(response: JSON, writer: EventWriter | None = None) -> bytes:
    """The whole event sequence of the finished `response` (module docstring)."""
    writer = writer or EventWriter()
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    out = [writer.lifecycle(start)]
    for index, item in enumerate(response.get("output") or ()):
        out.append(
            writer.event("response.output_item.added", output_index=index, item=in_progress(item))
        )
        if item.get("type") == "message":
            for n, part in enumerate(item.get("content") or ()):
                if part.get("type") not in PART_EVENTS:
                    continue
                field = PART_EVENTS[part["type"]][0]
                out.append(writer.open_part(item, index, n, part))
                out.append(writer.part_delta(item, index, n, part["type"], part[field]))
                out.append(writer.close_part(item, index, n, part))
        elif item.get("type") in ARGUMENT_EVENTS:
            field = ARGUMENT_EVENTS[item["type"]][0]
            out.append(writer.argument_delta(item, index, item[field]))
            out.append(writer.close_arguments(item, index))
        out.append(writer.event("response.output_item.done", output_index=index, item=item))
    out.append(writer.finish(response))
    return b"".join(out)
