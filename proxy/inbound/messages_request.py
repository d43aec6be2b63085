"""A Messages API request body → the internal chat-completions body and its `Carrier` (pure).

    system (string or text blocks)  → one leading `system` message (string, or text parts with
                                      the client's `cache_control`)
    user message, string            → a `user` message with that string
    user message, blocks            → one `tool` message per `tool_result` block (in order,
                                      `tool_call_id` = `tool_use_id`, text content kept, the
                                      block's marker on the message), then one `user` message
                                      with the blocks a chat model can read (see
                                      `proxy.inbound.messages_blocks`)
    assistant message               → one `assistant` message: text blocks as text parts,
                                      `tool_use` blocks as `tool_calls`
    tools                           → function tools (`input_schema` → `parameters`); server
                                      and other typed tools are carried only
    tool_choice                     → auto/none as is, any → required, tool → that function;
                                      `disable_parallel_tool_use` → `parallel_tool_calls: false`
    max_tokens → max_completion_tokens, stop_sequences → stop; model, stream, temperature and
    top_p as they are. Everything else (metadata, thinking, context_management, top_k, …)
    stays in the carrier only.

Claude Code's attribution line (a first system block `x-anthropic-billing-header: cc_version=…;
cch=…;`, whose hashes change from conversation to conversation, some from request to request)
is carried too: it means nothing to a model, it would break an OpenAI upstream's prefix cache,
and in the internal form it would change the conversation's salt, lineage and derived session
id on every request, so that stored summaries and the compaction trigger never matched. An
Anthropic upstream gets it back where it was, first.

Blocks with no chat equivalent are carried by the message they sit in; a user message of
carried blocks only becomes an empty `user` message, or rides with its last tool result. The
input is never mutated; the internal body is built of new messages and parts (markers, schemas
and tool inputs are shared: stages never mutate, STYLE rule 3).
"""

from __future__ import annotations

from typing import Any

from proxy.inbound.messages_blocks import MARKER, part_of, tool_call_of
from proxy.inbound.messages_carrier import SYSTEM, Carrier, Origin
from proxy.types import JSON, Message

PARAMETERS = (
    ("max_tokens", "max_completion_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("stop_sequences", "stop"),
    ("stream", "stream"),
)
"""(Messages key, internal key) of the plain parameters; the render maps them back."""
ROLES = ("user", "assistant")
ATTRIBUTION_PREFIX = "x-anthropic-billing-header:"


def messages_to_internal(body: JSON, *, hide_message_markers: bool = False) -> tuple[JSON, Carrier]:
    """The internal body for a Messages `body` checked by `request_problem`, and its carrier.

    `hide_message_markers`: the client's `cache_control` markers on messages (not on system
    blocks or tools) stay out of the internal form and come back on their blocks as sent. The
    stages then see an unmarked history: pruning, which never edits what lies before the
    client's last marker, may act on a client that marks its newest turn on every request (as
    Claude Code does); breakpoints of ours that would make more than four are dropped by the
    render."""
    origins: list[Origin] = []
    system = _system_origin(body.get("system"))
    messages: list[Message] = [system.internal] if system else []
    for index, message in enumerate(body.get("messages") or ()):
        for origin in _message_origins(index, message):
            if hide_message_markers:
                _unmark(origin.internal)
            origins.append(origin)
            messages.append(origin.internal)
    internal: JSON = {"model": body["model"]} if "model" in body else {}
    internal["messages"] = messages
    for key, ours in PARAMETERS:
        if key in body:
            internal[ours] = body[key]
    tools, slots = _tools(body.get("tools"))
    if tools:
        internal["tools"] = tools
        internal.update(tool_choice_of(body.get("tool_choice")))
    carrier = Carrier(body, internal, tuple(origins), system, slots, hide_message_markers)
    return internal, carrier


def _unmark(message: Message) -> None:
    """Remove `cache_control` from an internal message built here (never the client's: it, its
    content list, parts and tool calls are new objects), its parts and its tool calls."""
    message.pop(MARKER, None)
    for key in ("content", "tool_calls"):
        items = message.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    item.pop(MARKER, None)


def _system_origin(system: Any) -> Origin | None:
    if isinstance(system, str):
        return Origin(SYSTEM, (), (0,) if system else (), {"role": "system", "content": system})
    if not isinstance(system, list):
        return None
    read = [i for i, block in enumerate(system) if not is_attribution(block)]
    parts, kept = _parts(system, read)
    message: Message = {"role": "system", "content": parts}
    return Origin(SYSTEM, tuple(range(len(system))), tuple(read[k] for k in kept), message)


def is_attribution(block: Any) -> bool:
    """Claude Code's attribution line, a system block the stages never see (module doc)."""
    return _is_text(block) and str(block.get("text", "")).startswith(ATTRIBUTION_PREFIX)


def _parts(
    blocks: list[Any], owned: Any, *, text_only: bool = False
) -> tuple[list[JSON], tuple[int, ...]]:
    """The parts of the owned blocks a chat model can read, and their positions among them."""
    parts: list[JSON] = []
    slots: list[int] = []
    for position, index in enumerate(owned):
        block = blocks[index]
        part = part_of(block) if not text_only or _is_text(block) else None
        if part is not None:
            parts.append(part)
            slots.append(position)
    return parts, tuple(slots)


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text"


def _message_origins(index: int, message: JSON) -> list[Origin]:
    role = "assistant" if message.get("role") == "assistant" else "user"
    content = message.get("content")
    if isinstance(content, str):
        slots = (0,) if content else ()
        return [Origin(index, (), slots, {"role": role, "content": content})]
    blocks: list[Any] = content if isinstance(content, list) else []
    if role == "assistant":
        return [_assistant_origin(index, blocks)]
    return _user_origins(index, blocks)


def _assistant_origin(index: int, blocks: list[Any]) -> Origin:
    parts, slots = _parts(blocks, range(len(blocks)), text_only=True)
    uses = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("type") == "tool_use"]
    message: Message = {"role": "assistant", "content": parts or (None if uses else "")}
    if uses:
        message["tool_calls"] = [tool_call_of(blocks[i]) for i in uses]
    return Origin(index, tuple(range(len(blocks))), (*slots, *uses), message)


def _user_origins(index: int, blocks: list[Any]) -> list[Origin]:
    results = [i for i, b in enumerate(blocks) if _is_tool_result(b)]
    rest = tuple(i for i in range(len(blocks)) if i not in set(results))
    origins = [_tool_origin(index, i, blocks[i]) for i in results]
    parts, slots = _parts(blocks, rest)
    if parts or not origins:
        message: Message = {"role": "user", "content": parts or ""}
        origins.append(Origin(index, rest, slots, message))
    elif rest:  # carried blocks only: they ride with the last tool result
        last = origins[-1]
        origins[-1] = Origin(index, (*last.blocks, *rest), last.slots, last.internal)
    return origins


def _is_tool_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _tool_origin(index: int, position: int, block: JSON) -> Origin:
    content = block.get("content")
    if isinstance(content, str):
        text: Any = content
        slots: tuple[int, ...] = (0,) if content else ()
    elif isinstance(content, list):
        parts, slots = _parts(content, range(len(content)), text_only=True)
        text = parts or ""
    else:
        text, slots = "", ()
    message: Message = {
        "role": "tool",
        "tool_call_id": block.get("tool_use_id", ""),
        "content": text,
    }
    if block.get(MARKER) is not None:
        message[MARKER] = block[MARKER]
    return Origin(index, (position,), slots, message)


def _tools(tools: Any) -> tuple[list[JSON], tuple[int, ...]]:
    """Function tools for the client's custom tools, and each one's index in `tools`."""
    out: list[JSON] = []
    slots: list[int] = []
    for index, tool in enumerate(tools if isinstance(tools, list) else ()):
        if isinstance(tool, dict) and tool.get("type", "custom") == "custom" and "name" in tool:
            out.append(function_tool(tool))
            slots.append(index)
    return out, tuple(slots)


def function_tool(tool: JSON) -> JSON:
    """A custom Messages tool → a chat function tool (its marker on the tool)."""
    function: JSON = {"name": tool["name"]}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("input_schema") or {"type": "object", "properties": {}}
    if isinstance(tool.get("strict"), bool):
        function["strict"] = tool["strict"]
    out: JSON = {"type": "function", "function": function}
    if tool.get(MARKER) is not None:
        out[MARKER] = tool[MARKER]
    return out


def tool_choice_of(choice: Any) -> JSON:
    """`tool_choice` (and `parallel_tool_calls`) of the internal body; empty when not given."""
    if not isinstance(choice, dict):
        return {}
    kind = choice.get("type")
    out: JSON = {}
    if kind in ("auto", "none"):
        out["tool_choice"] = kind
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name", "")}}
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def request_problem(body: Any) -> str | None:
    """Why `body` is not a Messages request this edge can take (the message of a 400), or None.

    Checks the shape the conversion relies on; the upstream checks the rest."""
    if not isinstance(body, dict):
        return "body: Input should be an object"
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: Field required"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        problem = _content_problem(message.get("content"), f"messages.{i}.content")
        if problem:
            return problem
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        problem = _content_problem(system, "system")
        if problem:
            return problem
    if body.get("tools") is not None and not _objects(body["tools"]):
        return "tools: Input should be a list of objects"
    return None


def _content_problem(content: Any, where: str) -> str | None:
    if isinstance(content, str) or _objects(content):
        return None
    return f"{where}: Input should be a string or a list of objects"


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)
