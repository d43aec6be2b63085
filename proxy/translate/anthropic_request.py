"""A chat-completions request body → an Anthropic Messages request body (pure; input never mutated).

    system / developer messages  → `system` text blocks in order, wherever they stand (hoisted),
                                   `cache_control` kept (string content → one text block)
    user / assistant / tool      → content blocks (`proxy.translate.anthropic_blocks`);
                                   consecutive same-role turns merged; tool results make a user
                                   turn, and lead any user turn (the API requires it)
    first turn not `user`        → a user turn `PLACEHOLDER_TEXT` is inserted first (also when the
                                   request has no turns at all); empty turns are dropped
    tools / tool_choice          → see `proxy.translate.anthropic_tools`
    max_completion_tokens, else max_tokens, else `default_max_tokens` → max_tokens
    stop → stop_sequences; stream as is; user → metadata.user_id
    temperature, top_p, top_k → dropped by default: the SDK's `MessageCreateParams` (anthropic
        2.16) has no sampling fields and newer models reject them. `keep_sampling=True` (for older
        models on a pinned API version) sends them, temperature clamped to the API's [0, 1].
    reasoning_effort → thinking, budget from `REASONING_BUDGETS`; an explicit `thinking` wins.
        With a client token limit the budget is cut to fit below it (no thinking if that leaves
        less than the API's 1,024 minimum); without one, max_tokens = default + budget.
        While thinking is on, sampling parameters are dropped in any case (the API rejects them).

Every other key is dropped, since the Messages API rejects unknown keys; among them `DROPPED_KEYS`
(OpenAI-only: n, penalties, logprobs, seed, response_format, stream_options, metadata, ...).
"""

from __future__ import annotations

from types import MappingProxyType

from proxy.content import SYSTEM_ROLES
from proxy.exact_json import copy_json
from proxy.translate.anthropic_blocks import (
    assistant_blocks,
    content_blocks,
    text_block,
    tool_result_block,
    with_message_cache_control,
)
from proxy.translate.anthropic_tools import tools_request
from proxy.types import JSON, Message

PLACEHOLDER_TEXT = "(continued)"
REASONING_BUDGETS = MappingProxyType(
    {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
)
MIN_THINKING_BUDGET = 1024
PASSTHROUGH_KEYS = ("model", "stream")
DROPPED_KEYS = frozenset(
    {
        "n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
        "seed", "response_format", "stream_options", "store", "modalities", "audio", "prediction",
        "prompt_cache_key", "safety_identifier", "service_tier", "web_search_options", "functions",
        "function_call", "verbosity", "metadata",
    }
)  # fmt: skip


def to_messages_request(
    body: JSON, *, default_max_tokens: int = 4096, keep_sampling: bool = False
) -> JSON:
    """Translate one chat-completions body; see the module docstring for the mapping."""
    out: JSON = {key: copy_json(body[key]) for key in PASSTHROUGH_KEYS if key in body}
    messages = body.get("messages") or []
    system = system_blocks(messages)
    if system:
        out["system"] = system
    out["messages"] = conversation(messages)
    out.update(tools_request(body))
    if body.get("stop"):
        stop = body["stop"]
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("user"):
        out["metadata"] = {"user_id": str(body["user"])}
    out.update(_thinking(body, default_max_tokens=default_max_tokens))
    if keep_sampling and out.get("thinking", {}).get("type", "disabled") == "disabled":
        out.update(_sampling(body))
    return out


def system_blocks(messages: list[Message]) -> list[JSON]:
    """Text blocks of every system/developer message, in order."""
    blocks: list[JSON] = []
    for message in messages:
        if message.get("role") in SYSTEM_ROLES:
            own = content_blocks(message.get("content"))
            blocks += with_message_cache_control(own, message.get("cache_control"))
    return blocks


def conversation(messages: list[Message]) -> list[JSON]:
    """Alternating user/assistant turns, starting with a user turn."""
    turns: list[JSON] = []
    for message in messages:
        role = message.get("role")
        if role in SYSTEM_ROLES:
            continue
        if role == "tool":
            role, blocks = "user", [tool_result_block(message)]
        elif role == "assistant":
            blocks = assistant_blocks(message)
        else:
            role = "user"
            own = content_blocks(message.get("content"))
            blocks = with_message_cache_control(own, message.get("cache_control"))
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": turns[-1]["content"] + blocks}
        else:
            turns.append({"role": role, "content": blocks})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [text_block(PLACEHOLDER_TEXT)]})
    return [_tool_results_first(turn) for turn in turns]


def _tool_results_first(turn: JSON) -> JSON:
    if turn["role"] != "user":
        return turn
    blocks = turn["content"]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    others = [b for b in blocks if b.get("type") != "tool_result"]
    return {"role": "user", "content": results + others}


def _sampling(body: JSON) -> JSON:
    out: JSON = {
        key: body[key] for key in ("top_p", "top_k") if isinstance(body.get(key), int | float)
    }
    temperature = body.get("temperature")
    if isinstance(temperature, int | float):
        out["temperature"] = min(max(float(temperature), 0.0), 1.0)
    return out


def _thinking(body: JSON, *, default_max_tokens: int) -> JSON:
    """`max_tokens`, and `thinking` when asked for (see the module docstring)."""
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(body.get("thinking"), dict):
        thinking = copy_json(body["thinking"])
        return {"max_tokens": limit or default_max_tokens, "thinking": thinking}
    budget = REASONING_BUDGETS.get(str(body.get("reasoning_effort")))
    if budget is None:
        return {"max_tokens": limit or default_max_tokens}
    if not limit:
        return {"max_tokens": default_max_tokens + budget, "thinking": _enabled(budget)}
    budget = min(budget, int(limit) - 1)
    if budget < MIN_THINKING_BUDGET:
        return {"max_tokens": limit}
    return {"max_tokens": limit, "thinking": _enabled(budget)}


def _enabled(budget: int) -> JSON:
    return {"type": "enabled", "budget_tokens": budget}


def diagnostics_param(previous_id: str | None) -> JSON:
    """The request's `diagnostics`: the previous answer's `msg_…` id, or null on a session's
    first request (which opts in with nothing to compare)."""
    previous = previous_id if previous_id and previous_id.startswith("msg_") else None
    return {"previous_message_id": previous}
