"""Tiny builders of Responses API bodies and items, the recorded Codex and Agents SDK fixtures,
and the wire checks: what the Responses API would reject in a request, and the SDK's own
validation of what ctxproxy answers (a Response, its stream events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from openai.types.responses.tool_param import ToolParam

from proxy.sse import SSEDecoder
from tests.fakes import anthropic_rules

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)
_ITEM: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseInputItemParam)
_TOOL: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ToolParam)
CALLS = ("function_call", "custom_tool_call")
OUTPUTS = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def fixture(name: str) -> JSON:
    """One recorded request: `{"path", "headers", "body"}` (see the fixtures' README)."""
    loaded: JSON = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


def fixture_names() -> list[str]:
    return sorted(path.stem for path in FIXTURES.glob("*.json"))


def user(text: str) -> JSON:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def developer(text: str) -> JSON:
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def said(text: str, ident: str = "msg_1") -> JSON:
    """An assistant message as the API outputs it (and clients send back)."""
    part = {"type": "output_text", "text": text, "annotations": []}
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


def call(call_id: str, name: str = "shell", **arguments: Any) -> JSON:
    args = json.dumps(arguments, separators=(",", ":"))
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": args}


def output(call_id: str, text: Any = "ok", **extra: Any) -> JSON:
    return {"type": "function_call_output", "call_id": call_id, "output": text, **extra}


def reasoning(ident: str = "rs_1", secret: str = "gAAAAABenc") -> JSON:
    return {"type": "reasoning", "id": ident, "summary": [], "encrypted_content": secret}


def body(*items: JSON, **fields: Any) -> JSON:
    out: JSON = {"model": "gpt-5-codex", "input": list(items)}
    out.update(fields)
    return out


def shell_tool() -> JSON:
    schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    }
    return {
        "type": "function",
        "name": "shell",
        "description": "Run a command.",
        "strict": False,
        "parameters": schema,
    }


def wire_problem(sent: JSON) -> str | None:
    """What the Responses API would reject in `sent` (None when it would take it): the SDK's
    input item and tool types for each item the API types (an assistant message in the short form
    Codex sends, `output_text` parts without ids, is accepted as the API does), and the pairing
    rule — every call answered once, after it, every output answering a call before it."""
    if not isinstance(sent.get("model"), str):
        return "model: Field required"
    if "instructions" in sent and not isinstance(sent["instructions"], str | None):
        return "instructions: Input should be a string"
    given = sent.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given or []
    for n, item in enumerate(items):
        problem = _item_problem(item)
        if problem:
            return f"input.{n}: {problem}"
    for n, tool in enumerate(sent.get("tools") or ()):
        try:
            anthropic_rules._force(_TOOL.validate_python(tool))
        except pydantic.ValidationError as exc:
            return f"tools.{n}: {exc.errors()[0]['msg']}"
    return pairing_problem(items)


def _item_problem(item: Any) -> str | None:
    if _codex_assistant(item):
        return None
    if isinstance(item, dict):  # the API takes null for an optional field (Codex sends some)
        item = {k: v for k, v in item.items() if v is not None}
    try:
        anthropic_rules._force(_ITEM.validate_python(item))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return None


def _codex_assistant(item: Any) -> bool:
    """An assistant message of output_text parts with no id or status (Codex's history)."""
    if not (isinstance(item, dict) and item.get("role") == "assistant" and "id" not in item):
        return False
    content = item.get("content")
    return isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "output_text" and isinstance(p.get("text"), str)
        for p in content
    )


def pairing_problem(items: list[Any]) -> str | None:
    """Every output answers a call made before it and not answered yet; every call is answered
    (a call id used again after its answer is a new call)."""
    pending: dict[str, list[str]] = {}
    for n, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in CALLS:
            pending.setdefault(str(item["call_id"]), []).append(kind)
        elif kind in OUTPUTS:
            call_id = str(item.get("call_id"))
            if OUTPUTS[kind] not in pending.get(call_id, []):
                return f"input.{n}: No tool call found for {kind} with call_id {call_id}"
            pending[call_id].remove(OUTPUTS[kind])
    missing = sorted(call_id for call_id, kinds in pending.items() if kinds)
    return f"No tool output found for function call {missing[0]}" if missing else None


CLIENT_CODES = ("context_length_exceeded", "insufficient_quota")
"""`response.failed` codes the API sends and clients act on (Codex compacts on the first) that
the SDK's `ResponseError.code` does not list: checked as `server_error`."""


def events_of(stream: bytes) -> list[JSON]:
    """Each event of a Responses stream, checked: valid for the SDK's event union, its SSE name
    the same as its type, numbered 0, 1, 2 …"""
    out: list[JSON] = []
    for event in SSEDecoder().feed(stream):
        payload = json.loads(event.data)
        assert event.event == payload["type"]
        assert payload["sequence_number"] == len(out)
        EVENTS.validate_python(_sdk_codes(payload))
        out.append(payload)
    return out


def _sdk_codes(payload: JSON) -> JSON:
    error = (payload.get("response") or {}).get("error")
    if isinstance(error, dict) and error.get("code") in CLIENT_CODES:
        response = {**payload["response"], "error": {**error, "code": "server_error"}}
        return {**payload, "response": response}
    return payload


def valid_response(payload: JSON) -> JSON:
    """`payload`, checked by the SDK's `Response` type."""
    Response.model_validate(payload)
    return payload
