"""The recall rounds in the Responses API's form (a Responses upstream answering a Responses
client natively). Pure.

`response_round` reads one upstream Response as a `ResponsesRound` (the stream merger feeds it
the round's `response.completed`); `recall_items` is what the next round appends to `input`: the
round's output items as they came (reasoning with its `encrypted_content`, messages, the recall
`function_call` items; the client's own calls of a mixed answer dropped, as the other dialects
drop them: the model re-issues what it still needs) then one `function_call_output` per recall
call; `next_responses_body` the next round's request; `combine_responses` the client's one
Response of all rounds.

A `reasoning` item must be followed by the item it belongs to, or the API refuses a request
that sends it back (the client's next one does): wherever an item is dropped, a reasoning item
right before it is dropped too (`kept_items`), and a reasoning item ending a round that is not
the last has lost its item as well.

The last round keeps the tool definitions (the API refuses an input holding calls of tools it
does not define) and sets `tool_choice` to `none`, so it must answer; a client's `tool_choice`
naming one of its own functions is kept (that forbids the recall tool as well).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from proxy.recall.rounds import sum_usage
from proxy.types import JSON

__all__ = [
    "ResponsesRound",
    "combine_responses",
    "is_call",
    "kept_items",
    "next_responses_body",
    "recall_items",
    "response_round",
    "shown_items",
    "without_recall_tool",
]

HEAD_KEYS = ("id", "object", "created_at", "model", "tool_choice")
"""What the client's Response takes from the first round (its request's `tool_choice`)."""
CALL = "function_call"
REASONING = "reasoning"


class ResponsesRound(NamedTuple):
    """One upstream round as it ended (the fields the loop reads are the chat `Round`'s)."""

    recall_calls: tuple[JSON, ...]
    """The round's `function_call` items of the recall tool."""
    client_calls: tuple[JSON, ...]
    content: tuple[JSON, ...]
    """Every output item of the round, whole."""
    finish_reason: str | None
    """The Response's `status`; None: it never ended (a stream cut off)."""
    usage: JSON | None


def is_call(item: Mapping[str, Any], *, tool_name: str, recall: bool) -> bool:
    """Whether `item` is a `function_call` of the recall tool (`recall`) or of the client's."""
    if item.get("type") != CALL:
        return False
    return (item.get("name") == tool_name) is recall


def kept_items(
    items: Sequence[JSON], keep: Callable[[JSON], bool], *, trailing: bool
) -> list[JSON]:
    """`items` that `keep` keeps, less each reasoning item whose next item is gone (and one
    ending `items`, unless `trailing`)."""
    out: list[JSON] = []
    next_kept = trailing
    for item in reversed(items):
        kept = next_kept if item.get("type") == REASONING else keep(item)
        if kept:
            out.append(item)
        next_kept = kept
    return out[::-1]


def shown_items(items: Sequence[JSON], *, tool_name: str, last: bool) -> list[JSON]:
    """A round's items the client sees: never a recall call, the client's calls only in the
    `last` round (earlier ones were re-issued by the model), reasoning only before what shows."""

    def keep(item: JSON) -> bool:
        if is_call(item, tool_name=tool_name, recall=True):
            return False
        return last or not is_call(item, tool_name=tool_name, recall=False)

    return kept_items(items, keep, trailing=last)


def _output(response: Mapping[str, Any]) -> list[JSON]:
    output = response.get("output")
    return [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []


def response_round(response: Mapping[str, Any], *, tool_name: str) -> ResponsesRound:
    """A Response as a round."""
    items = _output(response)
    status, usage = response.get("status"), response.get("usage")
    return ResponsesRound(
        tuple(i for i in items if is_call(i, tool_name=tool_name, recall=True)),
        tuple(i for i in items if is_call(i, tool_name=tool_name, recall=False)),
        tuple(items),
        status if isinstance(status, str) else None,
        usage if isinstance(usage, dict) else None,
    )


def recall_items(
    content: Sequence[JSON], answers: Sequence[str], *, tool_name: str, round_index: int
) -> list[JSON]:
    """The items the next round appends (see the module doc), `answers` in the order of the
    recall calls in `content`. A call without a `call_id` gets `call_recall_<round>_<i>`."""
    kept = kept_items(
        content, lambda i: not is_call(i, tool_name=tool_name, recall=False), trailing=False
    )
    items: list[JSON] = []
    outputs: list[JSON] = []
    for item in kept:
        if is_call(item, tool_name=tool_name, recall=True):
            if len(outputs) == len(answers):
                raise ValueError("one answer per recall call")
            call_id = str(item.get("call_id") or f"call_recall_{round_index}_{len(outputs)}")
            item = {**item, "call_id": call_id}
            answer = answers[len(outputs)]
            outputs.append({"type": "function_call_output", "call_id": call_id, "output": answer})
        items.append(item)
    if len(outputs) != len(answers):
        raise ValueError("one answer per recall call")
    return [*items, *outputs]


def next_responses_body(body: JSON, added: Sequence[JSON], *, last: bool, tool_name: str) -> JSON:
    """The next round's request: `body`'s input (a string as its one user message) then
    `added`; the last round with `tool_choice` `none` (see the module doc)."""
    given = body.get("input")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    out = {**body, "input": [*(given if isinstance(given, list) else []), *added]}
    if not last:
        return out
    choice = body.get("tool_choice")
    named = choice.get("name") if isinstance(choice, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "function" and named != tool_name:
        return out
    out["tool_choice"] = "none"
    return out


def without_recall_tool(response: JSON, *, tool_name: str) -> JSON:
    """`response` with the recall tool left out of the `tools` it echoes (else as it is)."""
    tools = response.get("tools")
    if not isinstance(tools, list):
        return response
    kept = [t for t in tools if not (isinstance(t, dict) and t.get("name") == tool_name)]
    return response if len(kept) == len(tools) else {**response, "tools": kept}


def combine_responses(responses: Sequence[JSON], *, tool_name: str) -> JSON:
    """The client's Response of the rounds' Responses, without a trace of the recall tool: the
    last one under the first one's id, model, time and `tool_choice`, its output every round's
    `shown_items` in order, its `tools` without the recall tool, usage summed."""
    last = responses[-1]
    out: JSON = {**last, **{k: responses[0][k] for k in HEAD_KEYS if k in responses[0]}}
    output: list[JSON] = []
    for number, response in enumerate(responses):
        final = number == len(responses) - 1
        output += shown_items(_output(response), tool_name=tool_name, last=final)
    if isinstance(last.get("output"), list):
        out["output"] = output
    usage = sum_usage([r["usage"] for r in responses if isinstance(r.get("usage"), dict)])
    if usage is not None:
        out["usage"] = usage
    return without_recall_tool(out, tool_name=tool_name)
