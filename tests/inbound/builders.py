"""Tiny builders of Messages API bodies and blocks, the recorded Claude Code fixtures, and the
wire check: what the Anthropic API would reject in a Messages body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

from tests.fakes import anthropic_rules

JSON = dict[str, Any]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_code"
EPHEMERAL: JSON = {"type": "ephemeral"}
SAMPLING = ("temperature", "top_p", "top_k")
"""Accepted by the API for older models; the installed SDK's request types no longer list them."""
_BETA_PARAMS = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)
_CHAT_PARAMS = pydantic.TypeAdapter(CompletionCreateParamsNonStreaming)


def fixture(name: str) -> JSON:
    """One recorded request: `{"path", "headers", "body"}` (see the fixtures' README)."""
    loaded: JSON = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


def fixture_names() -> list[str]:
    return sorted(path.stem for path in FIXTURES.glob("*.json"))


def text(value: str, **extra: Any) -> JSON:
    return {"type": "text", "text": value, **extra}


def tool_use(call_id: str, name: str = "Bash", **arguments: Any) -> JSON:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def tool_result(call_id: str, content: Any = "ok", **extra: Any) -> JSON:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def thinking(thought: str = "Let me think.", signature: str = "c2lnbmF0dXJl") -> JSON:
    return {"type": "thinking", "thinking": thought, "signature": signature}


def user(*content: Any) -> JSON:
    return {"role": "user", "content": content[0] if _one_string(content) else list(content)}


def assistant(*content: Any) -> JSON:
    return {"role": "assistant", "content": content[0] if _one_string(content) else list(content)}


def _one_string(content: tuple[Any, ...]) -> bool:
    return len(content) == 1 and isinstance(content[0], str)


def body(*messages: JSON, **fields: Any) -> JSON:
    out: JSON = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": list(messages)}
    out.update(fields)
    return out


def wire_problem(sent: JSON) -> str | None:
    """What the Messages API would reject in `sent` (None when it would take it): the SDK's
    beta request types (unknown keys too), then the fake API's turn, pairing, marker and
    thinking rules (`tests.fakes.anthropic_rules`)."""
    checked = {k: v for k, v in sent.items() if k not in SAMPLING}
    checked.setdefault("max_tokens", 1)  # count_tokens bodies have none
    if isinstance(checked.get("tools"), list):  # a JSON schema: any keys (the SDK lists a few)
        checked["tools"] = [_schema_free(tool) for tool in checked["tools"]]
    try:
        validated = anthropic_rules._force(
            _BETA_PARAMS.validate_python({**checked, "stream": False})
        )
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    if validated != {**checked, "stream": False}:
        return "Extra inputs are not permitted"
    messages = checked["messages"]
    return (
        anthropic_rules._turn_problem(messages)
        or anthropic_rules._tool_pairing_problem(messages)
        or anthropic_rules._cache_control_problem(checked)
        or anthropic_rules._thinking_problem(checked)
    )


def _schema_free(tool: Any) -> Any:
    if isinstance(tool, dict) and isinstance(tool.get("input_schema"), dict):
        return {**tool, "input_schema": {"type": "object"}}
    return tool


def marker_count(value: Any) -> int:
    """`cache_control` markers anywhere in `value`."""
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") is not None else 0
        return own + sum(marker_count(v) for v in value.values())
    if isinstance(value, list):
        return sum(marker_count(v) for v in value)
    return 0


def chat_problem(request: JSON) -> str | None:
    """What the openai SDK's request types reject or drop in a chat request (None: nothing)."""
    checked = {**request, "stream": False}
    checked.pop("stream_options", None)
    try:
        validated = anthropic_rules._force(_CHAT_PARAMS.validate_python(checked))
    except pydantic.ValidationError as exc:
        return str(exc.errors()[0]["loc"])
    return None if validated == checked else "the request has keys the chat API does not know"
