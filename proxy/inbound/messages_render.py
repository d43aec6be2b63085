"""The prepared internal body + its `Carrier` → the Messages body for an Anthropic upstream (pure).

Faithful by construction: every part of the client's body that no stage changed is emitted as
the client sent it — the very objects, in the client's key order — and only what changed is
re-rendered:

    system      unchanged: as sent (string or blocks). Changed (bootstrap): text blocks in the
                order the cache stage laid out — static part (with its marker), the client's
                own blocks as sent (markers kept), dynamic part — after Claude Code's
                attribution line, which stays first
    messages    by `proxy.inbound.messages_turns`: a client message nothing touched as sent,
                a changed one re-rendered around what it carries, a new one fresh
    tools, tool_choice, model, max_tokens, temperature, top_p, stop_sequences, stream:
                as sent unless the internal value changed, else rendered from it
    anything else (metadata, thinking, context_management, …): as sent

At most `MAX_BREAKPOINTS` `cache_control` markers leave: blocks the client never marked count
too (a server tool, a document by URL), so when the total is over, markers of ours (set here on
blocks the client had not marked) are removed, newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.content import MAX_BREAKPOINTS, system_lead
from proxy.inbound.messages_blocks import MARKER, block_of
from proxy.inbound.messages_carrier import Carrier, client_blocks
from proxy.inbound.messages_request import PARAMETERS
from proxy.inbound.messages_turns import render_turns, unchanged
from proxy.inbound.splice import ABSENT, items_of, merge_over_client, splice
from proxy.translate.anthropic_tools import tools_request
from proxy.types import JSON, Message

"""A key the output does not have."""


def internal_to_messages(chat_body: JSON, carrier: Carrier) -> JSON:
    """The Messages body to send upstream for the prepared `chat_body` (see the module doc).
    Neither argument is mutated; unchanged parts are shared with `carrier.body`."""
    messages: list[Message] = chat_body.get("messages") or []
    lead = system_lead(messages)
    ours: list[JSON] = []
    rendered: JSON = {
        "system": _system(messages[:lead], carrier, ours),
        "messages": render_turns(messages[lead:], carrier, ours),
        "tools": _tools(chat_body, carrier, ours),
        "tool_choice": _tool_choice(chat_body, carrier),
        **_parameters(chat_body, carrier),
    }
    out = merge_over_client(carrier.body, rendered)
    _cap_markers(out, ours)
    return out


def _system(lead: Sequence[Message], carrier: Carrier, ours: list[JSON]) -> Any:
    origin = carrier.system
    if origin is not None and len(lead) == 1 and unchanged(lead[0], origin):
        return carrier.body["system"]
    if not lead:
        return ABSENT
    current = [part for message in lead for part in _parts_with_marker(message)]
    if origin is None:
        return splice([], (), [], current, fresh=block_of, ours=ours)
    blocks = client_blocks(carrier, origin)
    snapshot = items_of(origin.internal)
    return splice(blocks, origin.slots, snapshot, current, fresh=block_of, ours=ours)


def _parts_with_marker(message: Message) -> list[Any]:
    """A system message's parts; a message-level marker goes on its last part."""
    parts = items_of(message)
    marker = message.get(MARKER)
    if marker is not None and parts and isinstance(parts[-1], dict):
        parts[-1] = {**parts[-1], MARKER: parts[-1].get(MARKER) or marker}
    return parts


def _tools(chat_body: JSON, carrier: Carrier, ours: list[JSON]) -> Any:
    final, built = chat_body.get("tools"), carrier.internal.get("tools")
    if final is built or final == built:
        return carrier.body.get("tools", ABSENT)
    client = carrier.body.get("tools")
    blocks = client if isinstance(client, list) else []
    return splice(blocks, carrier.tools, built or [], final or [], fresh=_fresh_tool, ours=ours)


def _fresh_tool(tool: Any) -> JSON | None:
    """A Messages tool for a function tool a stage added (None for anything else)."""
    tools: list[JSON] = tools_request({"tools": [tool]}).get("tools", [])
    return tools[0] if tools else None


def _tool_choice(chat_body: JSON, carrier: Carrier) -> Any:
    keys = ("tool_choice", "parallel_tool_calls")
    final = [chat_body.get(key) for key in keys]
    if final == [carrier.internal.get(key) for key in keys]:
        return carrier.body.get("tool_choice", ABSENT)
    choice, parallel = final
    out: JSON
    if choice in ("auto", "none"):
        out = {"type": choice}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        out = {"type": "tool", "name": choice["function"].get("name", "")}
    elif parallel is False:
        out = {"type": "auto"}
    else:
        return ABSENT
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _parameters(chat_body: JSON, carrier: Carrier) -> JSON:
    out: JSON = {}
    for key, ours in (("model", "model"), *PARAMETERS):
        final = chat_body.get(ours, ABSENT)
        if final == carrier.internal.get(ours, ABSENT):
            continue
        if key == "stop_sequences" and isinstance(final, str):
            final = [final]
        out[key] = final
    return out


def _cap_markers(out: JSON, ours: list[JSON]) -> None:
    """Remove markers of ours, newest first, while the body has more than the API allows.
    Only blocks made here are touched (`ours` holds nothing shared with the client's body)."""
    if not ours:
        return  # every marker is the client's: passed through as sent
    total = _marker_count(out)
    while total > MAX_BREAKPOINTS and ours:
        block = ours.pop()
        if block.pop(MARKER, None) is not None:
            total -= 1


def _marker_count(out: JSON) -> int:
    """Markers where the API takes them: the body, tools, system blocks, message blocks and
    the blocks inside a tool result (a walk of those lists only, not of every value)."""
    blocks: list[Any] = [out, *_listed(out.get("tools")), *_listed(out.get("system"))]
    for message in _listed(out.get("messages")):
        for block in _listed(message.get("content") if isinstance(message, dict) else None):
            blocks.append(block)
            if isinstance(block, dict) and block.get("type") == "tool_result":
                blocks += _listed(block.get("content"))
    return sum(1 for b in blocks if isinstance(b, dict) and b.get(MARKER) is not None)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
