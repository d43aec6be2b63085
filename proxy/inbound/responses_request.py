"""A Responses API request body → the internal chat-completions body and its `Carrier` (pure).

    instructions                    → a leading `system` message (one text part)
    input, a string                 → one `user` message
    message item, user              → a `user` message (string, or the parts a chat model reads,
                                      `proxy.inbound.responses_items`)
    message item, system/developer  → a message of that role, its text as parts
    assistant message, function_call, custom_tool_call, reasoning items in a row
                                    → one `assistant` message: text parts and `tool_calls`
    function_call_output, custom_tool_call_output
                                    → a `tool` message, `tool_call_id` = `call_id`, text kept
    a compaction item of ctxproxy's → the messages of its stored summary (given in `summaries`,
                                      by `encrypted_content`: the caller opened the handle)
    any other item                  → carried by the message before it (the first one, at the
                                      start): reasoning, hosted-tool calls, item references,
                                      OpenAI's own compaction items, compaction triggers, …
    tools, tool_choice              → function tools (a custom tool as a function of one string)
    max_output_tokens → max_completion_tokens; reasoning.effort → reasoning_effort;
    text.format → response_format; text.verbosity → verbosity; model, stream, temperature,
    top_p, parallel_tool_calls, prompt_cache_key, prompt_cache_retention, user,
    safety_identifier and service_tier as they are. Everything else (store, metadata, include,
    truncation, previous_response_id, context_management, …) stays in the carrier only.

System content is always text parts, so that the cache stage's assembly (static part, client
system, dynamic part) keeps each client part as its own part and the render can find them.
The input is never mutated; parts, schemas and arguments are shared (stages never mutate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.content import SYSTEM_ROLES
from proxy.inbound.compaction_handle import is_handle
from proxy.inbound.responses_carrier import INSTRUCTIONS, STRING, WHOLE, Carrier, Element, Origin
from proxy.inbound.responses_items import OUTPUT_KINDS, call_of, part_of, tool_choice_of, tool_of
from proxy.types import JSON, Message

PARAMETERS = (
    ("model", "model"),
    ("max_output_tokens", "max_completion_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("stream", "stream"),
    ("prompt_cache_key", "prompt_cache_key"),
    ("prompt_cache_retention", "prompt_cache_retention"),
    ("user", "user"),
    ("safety_identifier", "safety_identifier"),
    ("service_tier", "service_tier"),
)
"""(Responses key, internal key) of the plain parameters; the render maps them back."""
NESTED = (
    ("reasoning", "effort", "reasoning_effort"),
    ("text", "verbosity", "verbosity"),
)
"""(Responses key, its field, internal key) of the parameters one level down."""
ROLES = SYSTEM_ROLES | {"user", "assistant"}
ASSISTANT_KINDS = ("function_call", "custom_tool_call", "reasoning")


def input_items(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """The body's `input` as items: a string is one user message."""
    given = body.get("input")
    if isinstance(given, str):
        return ({"role": "user", "content": given},)
    return tuple(given) if isinstance(given, list) else ()


def responses_to_internal(
    body: JSON, *, summaries: Mapping[str, Sequence[Message]] | None = None
) -> tuple[JSON, Carrier]:
    """The internal body for a Responses `body` (checked by `proxy.inbound.responses_check`),
    and its carrier.

    `summaries`: for each compaction item of ctxproxy's in the input, by its `encrypted_content`,
    the messages standing for it (the stored summary, preserved tool output); a handle missing
    from it is a ValueError (the caller opens them all first)."""
    items = input_items(body)
    origins: list[Origin] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        part = {"type": "text", "text": instructions}
        message: Message = {"role": "system", "content": [part]}
        origins.append(Origin((), ((INSTRUCTIONS, STRING),), (0,), message))
    for group in _groups(items):
        origins += _origins(items, group, summaries or {})
    lead = 0
    while lead < len(origins) and origins[lead].internal.get("role") in SYSTEM_ROLES:
        lead += 1
    internal: JSON = {}
    for key, ours in PARAMETERS:
        if key in body:
            internal[ours] = body[key]
    internal["messages"] = [origin.internal for origin in origins]
    internal.update(_nested(body))
    tools, slots, custom = _tools(body.get("tools"))
    if tools:
        internal["tools"] = tools
        choice = tool_choice_of(body.get("tool_choice"))
        if choice is not None:
            internal["tool_choice"] = choice
        if isinstance(body.get("parallel_tool_calls"), bool):
            internal["parallel_tool_calls"] = body["parallel_tool_calls"]
    calls = frozenset(
        str(item.get("call_id"))
        for item in items
        if isinstance(item, dict) and item.get("type") == "custom_tool_call"
    )
    carrier = Carrier(body, items, internal, tuple(origins), lead, slots, custom, calls)
    return internal, carrier


def _nested(body: Mapping[str, Any]) -> JSON:
    out: JSON = {}
    for key, field, ours in NESTED:
        value = body.get(key)
        if isinstance(value, dict) and value.get(field) is not None:
            out[ours] = value[field]
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        schema = {k: v for k, v in form.items() if k != "type"}
        out["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(form, dict) and form.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    return out


def _kind(item: Any) -> str:
    """`message:<role>`, the item's type, or `carried`."""
    if not isinstance(item, dict):
        return "carried"
    kind = item.get("type")
    if kind in (None, "message") and item.get("role") in ROLES:
        return f"message:{item['role']}"
    if kind in (*ASSISTANT_KINDS, *OUTPUT_KINDS):
        return str(kind)
    if kind == "compaction" and is_handle(item.get("encrypted_content")):
        return "summary"
    return "carried"


def _groups(items: tuple[Any, ...]) -> list[list[int]]:
    """Item indexes per internal message: an assistant run, or one item with what it carries."""
    groups: list[list[int]] = []
    leading: list[int] = []  # carried items before any message: they ride with the first
    run = False  # the last group is an assistant run still open
    for index, item in enumerate(items):
        kind = _kind(item)
        if kind == "carried":
            (groups[-1] if groups else leading).append(index)
            continue
        assistant = kind == "message:assistant" or kind in ASSISTANT_KINDS
        if assistant and run:
            groups[-1].append(index)
            continue
        groups.append([*leading, index])
        leading, run = [], assistant
    if leading:
        groups.append(leading)  # nothing but carried items: an empty user message stands for them
    return groups


def _origins(
    items: tuple[Any, ...], group: list[int], summaries: Mapping[str, Sequence[Message]]
) -> list[Origin]:
    kinds = [_kind(items[i]) for i in group]
    whole = tuple((i, WHOLE) for i in group)
    if "summary" in kinds:
        token = items[group[kinds.index("summary")]]["encrypted_content"]
        if token not in summaries:
            raise ValueError("a compaction item of ctxproxy's was not opened")
        return [Origin(tuple(group), whole, (), message, True) for message in summaries[token]]
    if any(k == "message:assistant" or k in ASSISTANT_KINDS for k in kinds):
        return [_assistant(items, group)]
    head = next((i for i, k in zip(group, kinds, strict=True) if k != "carried"), None)
    if head is None:  # carried items only: an empty user message stands for them
        return [Origin(tuple(group), whole, (), {"role": "user", "content": ""})]
    if kinds[group.index(head)] in OUTPUT_KINDS:
        return [_tool(items, group, head)]
    return [_message(items, group, head)]


def _parts(
    item: JSON, index: int, *, text_only: bool
) -> tuple[list[JSON], list[Element], list[Element]]:
    """An item's container (`content`, or a tool output's `output`) as internal parts, its
    elements, and the element each part stands for."""
    key = "output" if item.get("type") in OUTPUT_KINDS else "content"
    content = item.get(key)
    if isinstance(content, str):
        stands = [(index, STRING)] if content else []
        return [{"type": "text", "text": content}] if content else [], [(index, STRING)], stands
    if not isinstance(content, list) or not content:
        return [], [(index, WHOLE)], []
    parts: list[JSON] = []
    stands = []
    for k, client in enumerate(content):
        part = part_of(client, text_only=text_only)
        if part is not None:
            parts.append(part)
            stands.append((index, k))
    return parts, [(index, k) for k in range(len(content))], stands


def _single(
    items: tuple[Any, ...], group: list[int], head: int, *, text_only: bool
) -> tuple[list[JSON], tuple[Element, ...], tuple[int, ...]]:
    """The head item's parts, the elements of `group` (the head's own in its place, carried
    items whole) and the slot of each part among them."""
    parts, own, stands = _parts(items[head], head, text_only=text_only)
    elements = (
        *[(i, WHOLE) for i in group if i < head],
        *own,
        *[(i, WHOLE) for i in group if i > head],
    )
    return parts, elements, tuple(elements.index(e) for e in stands)


def _message(items: tuple[Any, ...], group: list[int], head: int) -> Origin:
    item = items[head]
    role = item["role"]
    parts, elements, slots = _single(items, group, head, text_only=role in SYSTEM_ROLES)
    content: Any = parts
    if role == "user" and isinstance(item.get("content"), str):
        content = item["content"]
    elif role == "user" and not parts:
        content = ""
    return Origin(tuple(group), elements, slots, {"role": role, "content": content})


def _tool(items: tuple[Any, ...], group: list[int], head: int) -> Origin:
    item = items[head]
    parts, elements, slots = _single(items, group, head, text_only=True)
    output = item.get("output")
    content: Any = output if isinstance(output, str) else (parts or "")
    message: Message = {"role": "tool", "tool_call_id": item.get("call_id", ""), "content": content}
    return Origin(tuple(group), elements, slots, message)


def _assistant(items: tuple[Any, ...], group: list[int]) -> Origin:
    elements: list[Element] = []
    part_slots: list[int] = []
    call_slots: list[int] = []
    parts: list[JSON] = []
    calls: list[JSON] = []
    for index in group:
        item = items[index]
        kind = _kind(item)
        if kind == "message:assistant":
            own, found, stands = _parts(item, index, text_only=True)
            part_slots += [len(elements) + found.index(e) for e in stands]
            parts += own
            elements += found
            continue
        if kind in ("function_call", "custom_tool_call"):
            call_slots.append(len(elements))
            calls.append(call_of(item))
        elements.append((index, WHOLE))
    message: Message = {"role": "assistant", "content": parts or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return Origin(tuple(group), tuple(elements), (*part_slots, *call_slots), message)


def _tools(tools: Any) -> tuple[list[JSON], tuple[int, ...], frozenset[str]]:
    """Chat tools for the client's function and custom tools, each one's index, custom names."""
    out: list[JSON] = []
    slots: list[int] = []
    custom: set[str] = set()
    for index, tool in enumerate(tools if isinstance(tools, list) else ()):
        converted = tool_of(tool)
        if converted is not None:
            out.append(converted)
            slots.append(index)
            if tool.get("type") == "custom":
                custom.add(tool["name"])
    return out, tuple(slots), frozenset(custom)
