"""One Responses item, content part or tool ⇄ one chat-completions part, tool call or tool (pure).

Client → internal, for what a chat model can read:

    input_text, output_text            → text part
    input_image with an image_url      → image_url part (`detail` kept when chat knows it)
    input_file with file_data/file_id  → file part
    input_audio                        → input_audio part
    function_call                      → tool call (`id` = `call_id`, arguments as sent)
    custom_tool_call                   → tool call of a function standing for the custom tool:
                                         arguments `{"input": <input>}` (`CUSTOM_INPUT`)
    function tool                      → chat function tool (flat ⇄ nested `function`)
    custom tool                        → chat function tool taking one string, `input`; its
                                         grammar, if any, told in the description
    anything else                      → None: carried, not converted (input_image by file_id,
                                         input_file by URL, refusals, hosted tools, …)

Assistant and tool content keep text parts only, system content too (what chat accepts there).
Internal → fresh Responses parts and items (`fresh_part`, `fresh_call_item`, `fresh_tool`) for
what a stage made: a text part is `input_text`, or `output_text` in an assistant message.
"""

from __future__ import annotations

import json
from typing import Any

from proxy.types import JSON

CUSTOM_INPUT = "input"
"""The one argument of the function standing for a custom tool."""
CHAT_DETAILS = ("auto", "low", "high")
TEXT_KINDS = ("input_text", "output_text")
CALL_KINDS = ("function_call", "custom_tool_call")
OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")


def part_of(part: Any, *, text_only: bool = False) -> JSON | None:
    """The chat part standing for a Responses content part, or None when it is carried only."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in TEXT_KINDS and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if text_only:
        return None
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: JSON = {"url": part["image_url"]}
        if part.get("detail") in CHAT_DETAILS:
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        return _file_part(part)
    if kind == "input_audio" and isinstance(part.get("input_audio"), dict):
        return {"type": "input_audio", "input_audio": part["input_audio"]}
    return None


def _file_part(part: JSON) -> JSON | None:
    if isinstance(part.get("file_data"), str):
        file: JSON = {"file_data": part["file_data"]}
        if isinstance(part.get("filename"), str):
            file["filename"] = part["filename"]
        return {"type": "file", "file": file}
    if isinstance(part.get("file_id"), str):
        return {"type": "file", "file": {"file_id": part["file_id"]}}
    return None


def fresh_part(part: Any, *, role: str) -> JSON | None:
    """A Responses content part for an internal part a stage made (None: none stands for it)."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in ("text", "refusal") and isinstance(part.get(kind), str):
        if role == "assistant":
            return {"type": "output_text", "text": part[kind], "annotations": []}
        return {"type": "input_text", "text": part[kind]}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        detail = image.get("detail", "auto") if isinstance(image, dict) else "auto"
        return {"type": "input_image", "image_url": str(url or ""), "detail": detail}
    if kind == "file" and isinstance(part.get("file"), dict):
        return {"type": "input_file", **part["file"]}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio")}
    return None


def call_of(item: JSON) -> JSON:
    """A `function_call` or `custom_tool_call` item → the internal tool call."""
    given = item.get("arguments")
    arguments = given if isinstance(given, str) else "{}"
    if item.get("type") == "custom_tool_call":
        arguments = json.dumps({CUSTOM_INPUT: item.get("input", "")}, ensure_ascii=False)
    return {
        "id": item.get("call_id", ""),
        "type": "function",
        "function": {"name": item.get("name", ""), "arguments": arguments},
    }


def fresh_call_item(call: Any, *, custom: frozenset[str] = frozenset()) -> JSON | None:
    """A `function_call` item (a `custom_tool_call` for a custom tool's name) for a tool call a
    stage made; None for anything that is not a function call."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return None
    name = str(call["function"].get("name") or "")
    arguments = call["function"].get("arguments")
    arguments = arguments if isinstance(arguments, str) else "{}"
    if name in custom:
        return {
            "type": "custom_tool_call",
            "call_id": str(call.get("id") or ""),
            "name": name,
            "input": custom_input(arguments),
        }
    return {
        "type": "function_call",
        "call_id": str(call.get("id") or ""),
        "name": name,
        "arguments": arguments,
    }


def custom_input(arguments: str) -> str:
    """The input of a custom tool's call from the arguments of the function standing for it
    (arguments that are not `{"input": <string>}` are the input as they are)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(parsed, dict) and isinstance(parsed.get(CUSTOM_INPUT), str):
        return str(parsed[CUSTOM_INPUT])
    return arguments


def tool_of(tool: Any) -> JSON | None:
    """The chat tool standing for a Responses tool; None for a tool carried only (hosted)."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    function: JSON = {"name": tool["name"]}
    kind = tool.get("type")
    if kind == "function":
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        if isinstance(tool.get("parameters"), dict):
            function["parameters"] = tool["parameters"]
        if isinstance(tool.get("strict"), bool):
            function["strict"] = tool["strict"]
    elif kind == "custom":
        function["description"] = _custom_description(tool)
        function["parameters"] = {
            "type": "object",
            "properties": {CUSTOM_INPUT: {"type": "string"}},
            "required": [CUSTOM_INPUT],
        }
    else:
        return None
    return {"type": "function", "function": function}


def _custom_description(tool: JSON) -> str:
    text = str(tool.get("description") or "")
    form = tool.get("format")
    if isinstance(form, dict) and form.get("type") == "grammar":
        rule = f"The `{CUSTOM_INPUT}` follows this {form.get('syntax', '')} grammar:\n"
        return f"{text}\n\n{rule}{form.get('definition', '')}".strip()
    return text


def fresh_tool(tool: Any) -> JSON | None:
    """A Responses function tool for a chat function tool a stage added (not strict unless it
    says so, as in chat)."""
    if not isinstance(tool, dict) or not isinstance(tool.get("function"), dict):
        return None
    function = tool["function"]
    out: JSON = {"type": "function", "name": str(function.get("name") or "")}
    for key in ("description", "parameters", "strict"):
        if key in function:
            out[key] = function[key]
    out.setdefault("parameters", {"type": "object", "properties": {}})
    out.setdefault("strict", False)  # chat's default (the Responses API's is strict)
    return out


def tool_choice_of(choice: Any) -> Any:
    """The internal `tool_choice` for a Responses one; None when chat has no equivalent."""
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        return {"type": "function", "function": {"name": str(choice.get("name") or "")}}
    return None


def fresh_tool_choice(choice: Any) -> Any:
    """A Responses `tool_choice` for an internal one a stage set."""
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": str(choice["function"].get("name") or "")}
    return choice
