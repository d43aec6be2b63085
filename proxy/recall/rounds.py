"""The rounds of one answer: each round's outcome, usage summed, non-streamed rounds combined.

`round_of` reads one non-streamed upstream completion as a `Round` (the stream merger builds its
own); `combine_completions` makes the client's one answer of all rounds' completions; `sum_usage`
adds up usage objects (the client is told the sum; the session records the last round's prompt,
the context the upstream holds). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from proxy.recall.tool import split_calls
from proxy.types import JSON

__all__ = ["HEAD_KEYS", "Round", "combine_completions", "round_of", "sum_usage"]

HEAD_KEYS = ("id", "model", "created")
"""What every part of the client's answer takes from the first round."""


class Round(NamedTuple):
    """One upstream round as it ended."""

    recall_calls: tuple[JSON, ...]
    client_calls: tuple[JSON, ...]
    content: str
    """What the round said (a streamed round: only when it called the recall tool)."""
    finish_reason: str | None
    """None: no finish_reason came (a stream cut off)."""
    usage: JSON | None


def sum_usage(usages: Sequence[Mapping[str, Any]]) -> JSON | None:
    """Usage objects added up: numbers summed key by key, nested objects (token details)
    likewise, anything else as the last one says. None for no usage at all."""
    if not usages:
        return None
    total: JSON = {}
    for usage in usages:
        _add(total, usage)
    return total


def _is_count(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _add(total: JSON, usage: Mapping[str, Any]) -> None:
    for key, value in usage.items():
        if _is_count(value):
            current = total.get(key)
            total[key] = (current if _is_count(current) else 0) + value
        elif isinstance(value, Mapping):
            inner = total.get(key)
            if not isinstance(inner, dict):
                inner = total[key] = {}
            _add(inner, value)
        elif value is not None or key not in total:
            total[key] = value


def _message(completion: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = completion.get("choices")
    if isinstance(choices, list) and len(choices) == 1 and isinstance(choices[0], dict):
        message = choices[0].get("message")
        return message if isinstance(message, dict) else {}
    return {}


def round_of(completion: Mapping[str, Any], *, tool_name: str) -> Round:
    """A non-streamed completion as a round: its calls split, its content, finish and usage."""
    message = _message(completion)
    calls = message.get("tool_calls")
    recall, client = split_calls(calls if isinstance(calls, list) else (), tool_name=tool_name)
    choices = completion.get("choices") or [{}]
    reason = choices[0].get("finish_reason") if isinstance(choices[0], dict) else None
    content = message.get("content")
    usage = completion.get("usage")
    return Round(
        tuple(recall),
        tuple(client),
        content if isinstance(content, str) else "",
        reason if isinstance(reason, str) else None,
        usage if isinstance(usage, dict) else None,
    )


def combine_completions(completions: Sequence[JSON], *, tool_name: str) -> JSON:
    """The client's answer of the rounds' completions, without a trace of the recall tool: the
    last completion under the first one's id/model/created, its content preceded by what the
    earlier rounds said, its recall calls dropped (finish_reason "stop" when no call is left),
    usage summed. One completion with no recall call comes back as it is."""
    last = completions[-1]
    message = _message(last)
    calls = message.get("tool_calls")
    recall, client = split_calls(calls if isinstance(calls, list) else (), tool_name=tool_name)
    if len(completions) == 1 and not recall:
        return last
    out: JSON = {**last, **{k: completions[0][k] for k in HEAD_KEYS if k in completions[0]}}
    said = [round_of(c, tool_name=tool_name).content for c in completions]
    if message:
        new: JSON = dict(message)
        if any(said):
            new["content"] = "".join(said)
        if client:
            new["tool_calls"] = client
        else:
            new.pop("tool_calls", None)
        choice = dict(last["choices"][0])
        if recall and not client and choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
        out["choices"] = [{**choice, "message": new}]
    usage = sum_usage([c["usage"] for c in completions if isinstance(c.get("usage"), dict)])
    if usage is not None:
        out["usage"] = usage
    return out
