"""The prepared internal body + its `Carrier` → the Responses body for a Responses upstream
(`api = "responses"`) (pure).

Faithful by construction: what no stage changed is emitted as the client sent it — the very
objects, in the client's key order — and only what changed is re-rendered:

    instructions  unchanged: as sent. Changed (bootstrap): one string, the parts the cache stage
                  laid out joined by blank lines — the static part, the client's instructions,
                  then the dynamic part; the input's leading system and developer messages stay
                  in the input, as sent
    input         unchanged: as sent (a string stays a string). Changed: item by item
                  (`proxy.inbound.responses_input`)
    tools, tool_choice, parallel_tool_calls, model, max_output_tokens, temperature, top_p,
    stream, prompt_cache_key, …, reasoning.effort, text.verbosity, text.format:
                  as sent unless the internal value changed, else rendered from it
    anything else (store, metadata, include, truncation, …): as sent
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.content import system_lead
from proxy.inbound.responses_carrier import Carrier, client_item
from proxy.inbound.responses_input import changed_items, render_items
from proxy.inbound.responses_items import fresh_tool, fresh_tool_choice
from proxy.inbound.responses_request import NESTED, PARAMETERS
from proxy.inbound.splice import ABSENT, items_of, merge_over_client, same_item, splice
from proxy.types import JSON, Message

"""A key the output does not have."""


def internal_to_responses(chat_body: JSON, carrier: Carrier) -> JSON:
    """The Responses body to send upstream for the prepared `chat_body` (the module doc).
    Neither argument is mutated; unchanged parts are shared with `carrier.body`."""
    messages: list[Message] = chat_body.get("messages") or []
    lead = system_lead(messages)
    instructions, lead_items, lead_pristine = _lead(messages[:lead], carrier)
    items, pristine = render_items(messages[lead:], carrier.origins[carrier.lead :], carrier)
    given = carrier.body.get("input", ABSENT)
    rendered: JSON = {
        "instructions": instructions,
        "input": given if lead_pristine and pristine else [*lead_items, *items],
        "tools": _tools(chat_body, carrier),
        **_choice(chat_body, carrier),
        **_parameters(chat_body, carrier),
    }
    return merge_over_client(carrier.body, rendered)


def _lead(final: Sequence[Message], carrier: Carrier) -> tuple[Any, list[Any], bool]:
    """`instructions`, the leading system items and whether both are as the client sent them."""
    origins = carrier.origins[: carrier.lead]
    sent = carrier.body.get("instructions", ABSENT)
    if len(final) == len(origins) and all(
        m is o.internal or m == o.internal for m, o in zip(final, origins, strict=True)
    ):
        return sent, [client_item(carrier, i) for o in origins for i in o.items], True
    has_instructions = bool(origins) and not origins[0].items
    snapshot = [(n, part) for n, o in enumerate(origins) for part in items_of(o.internal)]
    matched: list[list[Any]] = [[] for _ in origins]
    head: list[Any] = []
    tail: list[Any] = []
    start = 0
    for part in [p for message in final for p in items_of(message)]:
        hit = next(
            (x for x in range(start, len(snapshot)) if same_item(part, snapshot[x][1])), None
        )
        if hit is None:
            (tail if start else head).append(part)
            continue
        matched[snapshot[hit][0]].append(part)
        start = hit + 1
    own = _texts(matched[0]) if has_instructions else []
    texts = [*_texts(head), *own, *_texts(tail)]
    if has_instructions and own and not head and not tail:
        instructions = sent
    elif texts:
        instructions = "\n\n".join(texts)
    else:
        instructions = ABSENT if has_instructions else sent
    items: list[Any] = []
    for n in range(1 if has_instructions else 0, len(origins)):
        origin = origins[n]
        if len(matched[n]) == len(items_of(origin.internal)):
            items += [client_item(carrier, i) for i in origin.items]
        elif matched[n]:
            kept: Message = {"role": origin.internal.get("role"), "content": matched[n]}
            items += changed_items(kept, origin, carrier)
    return instructions, items, False


def _texts(parts: list[Any]) -> list[str]:
    return [str(p["text"]) for p in parts if isinstance(p, dict) and p.get("type") == "text"]


def _tools(chat_body: JSON, carrier: Carrier) -> Any:
    final, built = chat_body.get("tools"), carrier.internal.get("tools")
    if final is built or final == built:
        return carrier.body.get("tools", ABSENT)
    client = carrier.body.get("tools")
    sent = client if isinstance(client, list) else []
    return splice(sent, carrier.tools, built or [], final or [], fresh=fresh_tool, ours=[])


def _choice(chat_body: JSON, carrier: Carrier) -> JSON:
    out: JSON = {}
    for key in ("tool_choice", "parallel_tool_calls"):
        final = chat_body.get(key, ABSENT)
        if final == carrier.internal.get(key, ABSENT):
            continue
        out[key] = (
            fresh_tool_choice(final) if key == "tool_choice" and final is not ABSENT else final
        )
    return out


def _parameters(chat_body: JSON, carrier: Carrier) -> JSON:
    out: JSON = {}
    for key, ours in PARAMETERS:
        final = chat_body.get(ours, ABSENT)
        if final != carrier.internal.get(ours, ABSENT):
            out[key] = final
    for key, field, ours in NESTED:
        final = chat_body.get(ours, ABSENT)
        if final != carrier.internal.get(ours, ABSENT):
            out[key] = _with_field(carrier.body.get(key), field, final)
    final = chat_body.get("response_format", ABSENT)
    if final != carrier.internal.get("response_format", ABSENT):
        text = out.get("text", carrier.body.get("text"))
        out["text"] = _with_field(text, "format", _text_format(final))
    return out


def _with_field(value: Any, field: str, final: Any) -> Any:
    """`value` (a dict, or none) with `field` set to `final` (removed for `ABSENT`)."""
    out = {k: v for k, v in (value if isinstance(value, dict) else {}).items() if k != field}
    if final is not ABSENT:
        out[field] = final
    return out or ABSENT


def _text_format(response_format: Any) -> Any:
    """A Responses `text.format` for a chat `response_format`."""
    if not isinstance(response_format, dict):
        return ABSENT
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema")
        return {"type": "json_schema", **(schema if isinstance(schema, dict) else {})}
    return {"type": response_format.get("type", "text")}
