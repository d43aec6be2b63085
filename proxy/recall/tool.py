"""The recall tool as the upstream sees it, and the rounds around its calls. Pure.

`recall_tool` is the function-tool definition: the same bytes for one tool name every time, so a
session offered it keeps one cached prefix. `offer_recall` decides whether a request gets it
(rules below); `with_recall_tool` appends it at the end of `tools` (the client's tools keep their
place); `answering` is the last round's body, which must answer: the tool stays defined,
`tool_choice` is "none".
`split_calls` tells the proxy's calls from the client's in an answer; `continuation` is what the
next round appends to the upstream conversation (the assistant's recall calls and their results).

Offer rules, in order (the first that holds is the reason it is not offered, for counting):
    disabled           `enabled` is false
    tool_choice_none   the client's `tool_choice` is "none"
    several_choices    the client asks for `n` > 1 answers (rounds are for one answer)
    legacy_functions   the client uses the legacy `functions` field
    name_clash         a client tool already has the recall tool's name
    nothing_cut        nothing was cut and the session was never offered the tool
A session once offered the tool keeps it (`offered_before`), so its prefix stays byte-stable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from proxy.errors import InvalidSetting
from proxy.types import JSON, Message

__all__ = [
    "Offer",
    "RecallSettings",
    "answering",
    "continuation",
    "next_round_body",
    "offer_recall",
    "recall_tool",
    "split_calls",
    "with_recall_tool",
]

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The function names OpenAI and Anthropic both accept."""


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """`[tenants.NAME.recall]`."""

    enabled: bool = True
    tool_name: str = "ctx_recall"
    max_result_chars: int = 20_000
    max_rounds: int = 3

    def __post_init__(self) -> None:
        if not _TOOL_NAME.fullmatch(self.tool_name):
            raise InvalidSetting("tool_name", "must be 1 to 64 of the characters A-Z a-z 0-9 _ -")
        if self.max_result_chars < 1_000:
            raise InvalidSetting("max_result_chars", "must be at least 1000")
        if self.max_rounds < 1:
            raise InvalidSetting("max_rounds", "must be at least 1")


_DESCRIPTION = (
    "Recall content that was cut from this conversation to save space: shortened tool results, "
    "stored outputs, summarized turns. Each cut's marker names its ref. With `ref`: the exact "
    "original text of that item (long texts come in pages: pass the `offset` the page names). "
    "With `query`: a case-insensitive literal search of everything cut, giving the matching "
    "lines with context and the ref of each."
)


def recall_tool(*, tool_name: str) -> JSON:
    """The tool definition (chat-completions `tools` entry). A new object each call, always the
    same JSON bytes for one `tool_name`."""
    return {
        "type": "function",
        "function": {
            "name": tool_name,
            "description": _DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {
                    "ref": {
                        "type": "string",
                        "description": "The ref a marker names, e.g. a tool call id.",
                    },
                    "query": {
                        "type": "string",
                        "description": "Text to find (one line, no patterns) in everything cut.",
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "With ref: the character to start from (default 0).",
                    },
                },
                "additionalProperties": False,
            },
        },
    }


class Offer(NamedTuple):
    """Whether to add the tool; `reason` says why not ("" when it is added)."""

    add: bool
    reason: str = ""


def offer_recall(
    body: Mapping[str, Any], *, settings: RecallSettings, cut: bool, offered_before: bool = False
) -> Offer:
    """Whether the request `body` (as the client sent it) gets the recall tool: `cut` says the
    prepared request carries a cut, `offered_before` that the session was offered it already."""
    if not settings.enabled:
        return Offer(False, "disabled")
    if body.get("tool_choice") == "none":
        return Offer(False, "tool_choice_none")
    if isinstance(body.get("n"), int) and body["n"] > 1:
        return Offer(False, "several_choices")
    if body.get("functions"):
        return Offer(False, "legacy_functions")
    if settings.tool_name in _tool_names(body.get("tools")):
        return Offer(False, "name_clash")
    if not cut and not offered_before:
        return Offer(False, "nothing_cut")
    return Offer(True)


def _tool_names(tools: Any) -> set[str]:
    """Names of the client's tools: a function's name, or a tool's own `name` (other kinds)."""
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return names


def with_recall_tool(body: JSON, *, settings: RecallSettings) -> JSON:
    """A shallow copy of `body` whose `tools` end with the recall tool."""
    tools = body.get("tools")
    kept = tools if isinstance(tools, list) else []
    return {**body, "tools": [*kept, recall_tool(tool_name=settings.tool_name)]}


def answering(body: JSON, *, settings: RecallSettings) -> JSON:
    """`body` for the last round, which must answer: the tools kept as they were (a history
    holding calls of the recall tool needs it defined: the Messages API refuses tool blocks of
    tools a request does not define; and the cached prefix stays byte-stable), `tool_choice`
    "none". A client's `tool_choice` naming one of its own functions is kept: it forbids the
    recall tool as well, and overriding it would change what the client asked for. `body`
    itself when it carries no tools (nothing to forbid)."""
    if not isinstance(body.get("tools"), list):
        return body
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if name != settings.tool_name:
            return body
    return {**body, "tool_choice": "none"}


def split_calls(tool_calls: Iterable[Any], *, tool_name: str) -> tuple[list[JSON], list[JSON]]:
    """(the proxy's recall calls, the client's calls) of an answer's `tool_calls`, in order."""
    recall: list[JSON] = []
    client: list[JSON] = []
    for call in tool_calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        (recall if name == tool_name else client).append(call)
    return recall, client


def continuation(
    content: str | None, calls: Sequence[JSON], answers: Sequence[str], *, round_index: int
) -> list[Message]:
    """The messages the next round appends: the assistant's message with its recall calls only
    (the client's calls of a mixed answer are dropped: the model re-issues what it still needs)
    and one tool result per call. A call without an id gets `recall_<round>_<i>`."""
    if len(calls) != len(answers):
        raise ValueError("one answer per recall call")
    ids = [str(c.get("id") or f"recall_{round_index}_{i}") for i, c in enumerate(calls)]
    assistant: Message = {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": str((call.get("function") or {}).get("name", "")),
                    "arguments": str((call.get("function") or {}).get("arguments") or "{}"),
                },
            }
            for call_id, call in zip(ids, calls, strict=True)
        ],
    }
    results = [
        {"role": "tool", "tool_call_id": call_id, "content": answer}
        for call_id, answer in zip(ids, answers, strict=True)
    ]
    return [assistant, *results]


def next_round_body(
    body: JSON, added: Sequence[Message], *, last: bool, settings: RecallSettings
) -> JSON:
    """The upstream body of the next round: `body`'s messages then `added` (so the previous
    round's prefix stays cached); the last round cannot call a tool (`answering`)."""
    out = {**body, "messages": [*body["messages"], *added]}
    return answering(out, settings=settings) if last else out
