"""The recall rounds in the Messages API's form (an Anthropic upstream answering a Messages
client natively). Pure.

`message_round` reads one upstream `message` as a `MessagesRound` (the stream merger builds its
own); `recall_turns` is what the next round appends: the assistant turn (its blocks as they came:
thinking with its signature, text, the recall `tool_use` blocks; the client's own `tool_use`
blocks of a mixed answer dropped, as the chat loop drops them: the model re-issues what it still
needs) and a user turn of `tool_result` blocks, one per recall call; `next_messages_body` the
next round's request; `combine_messages` the client's one answer of all rounds' messages.

The last round keeps the tool definitions (the API refuses a history holding `tool_use` blocks
of tools it does not define) and sets `tool_choice` to `none`, so it must answer; a client's
`tool_choice` naming one of its own tools is kept (that forbids the recall tool as well).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from proxy.recall.rounds import sum_usage
from proxy.types import JSON

__all__ = [
    "MessagesRound",
    "combine_messages",
    "message_round",
    "next_messages_body",
    "recall_turns",
    "split_uses",
]

HEAD_KEYS = ("id", "type", "role", "model")
"""What the client's answer takes from the first round."""
TOOL_USE = "tool_use"


class MessagesRound(NamedTuple):
    """One upstream round as it ended (the fields the loop reads are the chat `Round`'s)."""

    recall_calls: tuple[JSON, ...]
    """The round's `tool_use` blocks of the recall tool."""
    client_calls: tuple[JSON, ...]
    content: tuple[JSON, ...]
    """Every block of the round, whole (a streamed round: as its deltas built it)."""
    finish_reason: str | None
    """The round's `stop_reason`; None: none came (a stream cut off)."""
    usage: JSON | None


def split_uses(blocks: Iterable[Any], *, tool_name: str) -> tuple[list[JSON], list[JSON]]:
    """(the recall tool's `tool_use` blocks, the client's), in order."""
    recall: list[JSON] = []
    client: list[JSON] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == TOOL_USE:
            (recall if block.get("name") == tool_name else client).append(block)
    return recall, client


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def message_round(message: Mapping[str, Any], *, tool_name: str) -> MessagesRound:
    """A JSON answer as a round."""
    blocks = _blocks(message)
    recall, client = split_uses(blocks, tool_name=tool_name)
    reason, usage = message.get("stop_reason"), message.get("usage")
    return MessagesRound(
        tuple(recall),
        tuple(client),
        tuple(b for b in blocks if isinstance(b, dict)),
        reason if isinstance(reason, str) else None,
        usage if isinstance(usage, dict) else None,
    )


def recall_turns(
    content: Sequence[JSON], answers: Sequence[str], *, tool_name: str, round_index: int
) -> list[JSON]:
    """The turns the next round appends: the assistant's (see the module doc; empty text blocks
    left out, which the API refuses) and the user's `tool_result` blocks, one per recall call in
    `content`, `answers` in their order. A call without an id gets `toolu_recall_<round>_<i>`,
    in both turns."""
    kept: list[JSON] = []
    results: list[JSON] = []
    for block in content:
        if block.get("type") == TOOL_USE:
            if block.get("name") != tool_name:
                continue  # the client's: re-issued by the model when it still needs it
            if len(results) == len(answers):
                raise ValueError("one answer per recall call")
            use_id = str(block.get("id") or f"toolu_recall_{round_index}_{len(results)}")
            kept.append({**block, "id": use_id})
            answer = answers[len(results)]
            results.append({"type": "tool_result", "tool_use_id": use_id, "content": answer})
        elif not (block.get("type") == "text" and not block.get("text")):
            kept.append(block)
    if len(results) != len(answers):
        raise ValueError("one answer per recall call")
    return [{"role": "assistant", "content": kept}, {"role": "user", "content": results}]


def next_messages_body(body: JSON, added: Sequence[JSON], *, last: bool, tool_name: str) -> JSON:
    """The next round's Messages request: `body`'s messages then `added` (the previous round's
    prefix stays cached); the last round with `tool_choice` `none` (see the module doc)."""
    out = {**body, "messages": [*body["messages"], *added]}
    if not last:
        return out
    choice = body.get("tool_choice")
    if (
        isinstance(choice, dict)
        and choice.get("type") == "tool"
        and choice.get("name") != tool_name
    ):
        return out
    out["tool_choice"] = {"type": "none"}
    return out


def combine_messages(messages: Sequence[JSON], *, tool_name: str) -> JSON:
    """The client's answer of the rounds' messages, without a trace of the recall tool: the last
    message under the first one's id and model, its content every round's blocks in order less
    the recall tool's `tool_use` blocks (and, in earlier rounds, the client's: the model
    re-issued them), `stop_reason` `end_turn` when the last round's calls were all the proxy's,
    usage summed. One message with no recall call comes back as it is."""
    last = messages[-1]
    recall, client = split_uses(_blocks(last), tool_name=tool_name)
    if len(messages) == 1 and not recall:
        return last
    out: JSON = {**last, **{k: messages[0][k] for k in HEAD_KEYS if k in messages[0]}}
    content: list[Any] = []
    for number, message in enumerate(messages):
        final = number == len(messages) - 1
        for block in _blocks(message):
            use = isinstance(block, dict) and block.get("type") == TOOL_USE
            if not use or (final and block.get("name") != tool_name):
                content.append(block)
    out["content"] = content
    if recall and not client and last.get("stop_reason") == TOOL_USE:
        out["stop_reason"] = "end_turn"
    usage = sum_usage([m["usage"] for m in messages if isinstance(m.get("usage"), dict)])
    if usage is not None:
        out["usage"] = usage
    return out
