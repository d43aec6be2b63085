"""One client stream made of several upstream rounds (chat-completions SSE). Pure, incremental.

Feed the upstream's bytes to `StreamMerger.feed_bytes` as they arrive (or decoded events to
`feed`): each call returns the bytes to send the client now. When a round's upstream stream ends,
`end_round` says whether the model called the recall tool: the proxy answers and feeds the next
round, or, when not (or when the rounds stop), sends `finish()`. A cut-off stream (`pending`, no
finish_reason) or an error event (`failed`) ends the rounds with the caller's error event instead.
The client receives one answer:

    content, reasoning  relayed as they arrive, every round; the role delta of round 0 only
    tool calls          held until the round's finish_reason: a round calling the recall tool
                        drops all its calls (the client's of a mixed answer too: the model
                        re-issues them); otherwise the client's go out indexed from 0
    finish_reason       one: the round's without recall calls, or `finish()`'s when the rounds
                        stopped ("tool_calls" if client calls are left, else "stop")
    usage, [DONE]       held; `finish()` sends one usage chunk, the rounds' sum, when the client
                        asked for usage (`client_wants_usage`), then `[DONE]`
    error event         relayed; `failed` is set

Later rounds go out under round 0's `id`, `model` and `created`. Round 0's chunks go out as they
came while nothing in them changes; `feed_bytes` does not even decode its content chunks (no tool
call, a null finish_reason, a null or no usage: judged on their bytes, however spaced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.recall.held_calls import HeldCalls
from proxy.recall.rounds import HEAD_KEYS, Round, sum_usage
from proxy.sse import SSEDecoder, SSEvent, find_set_key
from proxy.types import JSON

__all__ = ["StreamMerger"]

_DONE = b"data: [DONE]\n\n"
_NOT_PLAIN = (b'"tool_calls"', b"[DONE]", b'"error"')
"""Bytes that may start what `feed` must see (a key cannot occur unescaped in a JSON string)."""
_SET_KEYS = (b'"finish_reason"', b'"usage"')
"""Keys whose value, unless null, `feed` must see (`find_set_key`: however the JSON is spaced)."""


@dataclass(slots=True)
class _RoundState:
    calls: HeldCalls
    said: list[str | bytes] = field(default_factory=list)
    """Content texts, and whole events relayed undecoded (read when a recall round needs its
    content)."""
    decoder: SSEDecoder = field(default_factory=SSEDecoder)
    """`feed_bytes`'s decoder of this round's upstream stream."""
    finish: JSON | None = None
    finish_raw: bytes = b""
    """The finish chunk's bytes when they can go out as they came."""
    usage: JSON | None = None


class StreamMerger:
    """The merger of one client stream; see the module doc."""

    def __init__(self, *, tool_name: str, client_wants_usage: bool) -> None:
        self.tool_name = tool_name
        self.client_wants_usage = client_wants_usage
        self.rounds = 0
        """Rounds ended so far."""
        self.failed = False
        self.usages: list[JSON] = []
        """The usage of each round that reported one."""
        self._head: dict[str, Any] | None = None
        self._usage_chunk: JSON | None = None
        self._saw_done = False
        self._finished = False
        self._round = _RoundState(HeldCalls(tool_name=tool_name))
        self._stale = False
        """The round ended: the next event starts a new one."""

    @property
    def usage(self) -> JSON | None:
        """The rounds' usage summed (what the client is told)."""
        return sum_usage(self.usages)

    @property
    def pending(self) -> bytes:
        """Bytes `feed_bytes` holds of an event not yet complete: a stream cut off mid-event
        leaves some (the caller ends the client stream with an error then)."""
        return self._round.decoder.pending

    def feed_bytes(self, chunk: bytes) -> bytes:
        """`feed` for raw upstream bytes, decoded here: the bytes to send the client now. In
        round 0, leading whole events with no tool call, finish_reason, usage object, `[DONE]`
        or error go out as they came without being decoded (most of a stream's bytes)."""
        if self._stale:
            self._next_round()
        state = self._round
        plain = self._plain_events(chunk)
        if plain == len(chunk):  # the usual read: whole content events
            state.said.append(chunk)
            return chunk
        out = bytearray(chunk[:plain])
        if plain:
            state.said.append(chunk[:plain])
        for event in state.decoder.feed(chunk[plain:] if plain else chunk):
            out += self.feed(event)
        return bytes(out)

    def _next_round(self) -> None:
        self._round, self._stale = _RoundState(HeldCalls(tool_name=self.tool_name)), False

    def _plain_events(self, chunk: bytes) -> int:
        """How many leading bytes of `chunk` are whole plain events (see `feed_bytes`): with `\n`
        line ends and nothing held back, an event ends at each blank line."""
        if self.rounds or self._head is None or not self._round.decoder.idle or b"\r" in chunk:
            return 0
        cut = len(chunk)
        for marker in _NOT_PLAIN:
            at = chunk.find(marker, 0, cut)
            if at >= 0:
                cut = at
        for key in _SET_KEYS:
            at = find_set_key(chunk, key, 0, cut)
            if at >= 0:
                cut = at
        end = chunk.rfind(b"\n\n", 0, cut)
        return end + 2 if end >= 0 else 0

    def feed(self, event: SSEvent) -> bytes:
        """The bytes to send the client for one upstream event (maybe none)."""
        data = event.data
        if event.is_comment_only or not data:
            return event.raw
        if self._stale:
            self._next_round()
        if data == "[DONE]":
            self._saw_done = True
            return b""
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return event.raw
        if not isinstance(payload, dict):
            return event.raw
        if "error" in payload:
            self.failed = True
            return event.raw
        if self._head is None:
            self._head = {key: payload[key] for key in HEAD_KEYS if key in payload}
        return self._chunk(event.raw, payload)

    def _chunk(self, raw: bytes, payload: JSON) -> bytes:
        state = self._round
        usage = payload.get("usage")
        if isinstance(usage, dict):
            state.usage, self._usage_chunk = usage, payload
        choices = payload.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return b"" if not choices else self._encode(payload)  # usage chunk: held
        choice = choices[0]
        delta = _object(choice.get("delta"))
        calls = delta.get("tool_calls")
        calls = calls if isinstance(calls, list) else []
        rest = {k: v for k, v in delta.items() if k != "tool_calls"}
        reason = choice.get("finish_reason")
        if calls:
            alone = len(delta) == 1 and reason is None and not isinstance(usage, dict)
            only = _rechoice(payload, delta={"tool_calls": calls}, finish_reason=None)
            state.calls.take(only, calls, raw=raw if alone else b"")
        if isinstance(rest.get("content"), str):
            state.said.append(rest["content"])
        out = b""
        if not self.rounds and not calls and reason is None and not isinstance(usage, dict):
            out = raw  # round 0's role delta, or content in an unusual shape
        elif _says(rest, role=not self.rounds):
            if self.rounds:
                rest.pop("role", None)
            out = self._encode(_rechoice(payload, delta=rest, finish_reason=None))
        if reason is not None:
            state.finish = _rechoice(payload, delta={})
            plain = not calls and not _says(rest, role=True) and not isinstance(usage, dict)
            state.finish_raw = raw if plain and not self.rounds else b""
            if not state.calls.recall:
                out += self._release(str(reason))
        return out

    def _release(self, reason: str) -> bytes:
        """The round's client calls (indexed from 0), then its finish chunk with `reason`."""
        state = self._round
        assert state.finish is not None
        self._finished = True
        out = state.calls.release(self._encode, as_they_came=not self.rounds)
        if state.finish_raw and reason == state.finish["choices"][0].get("finish_reason"):
            return out + state.finish_raw
        return out + self._encode(_rechoice(state.finish, finish_reason=reason))

    def end_round(self) -> Round:
        """The round whose upstream stream just ended (its `content` only when it called the
        tool: the continuation needs it). When the next round is fed, this one's held calls are
        dropped; `finish()` still sends them if no round follows."""
        state = self._round
        recall, client = state.calls.split()
        reason = None if state.finish is None else state.finish["choices"][0].get("finish_reason")
        ended = Round(
            recall_calls=recall,
            client_calls=client,
            content=_content(state.said) if recall else "",
            finish_reason=reason if isinstance(reason, str) else None,
            usage=state.usage,
        )
        if state.usage is not None:
            self.usages.append(state.usage)
        self.rounds += 1
        self._stale = True
        return ended

    def finish(self) -> bytes:
        """The end of the client stream: the last round's held calls and finish when the rounds
        stopped while the model still called the tool, one usage chunk (the sum) when the client
        asked for usage, `[DONE]` when the upstream sent one."""
        out = bytearray()
        if not self._finished and self._round.finish is not None:
            out += self._release("tool_calls" if self._round.calls.client else "stop")
        usage = self.usage
        if self.client_wants_usage and usage is not None and self._usage_chunk is not None:
            choices = self._usage_chunk.get("choices")
            chunk = {**self._usage_chunk, "choices": [] if choices else choices, "usage": usage}
            out += self._encode(chunk, keep_usage=True)
        if self._saw_done:
            out += _DONE
        return bytes(out)

    def _encode(self, payload: JSON, *, keep_usage: bool = False) -> bytes:
        """`payload` as one event under round 0's id/model/created; a usage object in it is
        nulled (it goes out summed, once) unless `keep_usage`."""
        out = dict(payload)
        if self._head:
            out.update((k, v) for k, v in self._head.items() if k in out)
        if not keep_usage and isinstance(out.get("usage"), dict):
            out["usage"] = None
        return b"data: " + orjson.dumps(out) + b"\n\n"


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rechoice(payload: JSON, **changes: Any) -> JSON:
    """`payload` (a chunk of one choice) with `changes` to its choice."""
    return {**payload, "choices": [{**payload["choices"][0], **changes}]}


def _says(delta: Mapping[str, Any], *, role: bool) -> bool:
    """Whether a delta carries something for the client (content, reasoning, a refusal…); its
    role counts only when `role` (round 0's role delta)."""
    return any(role if key == "role" else value not in (None, "") for key, value in delta.items())


def _content(said: list[str | bytes]) -> str:
    """A round's content: texts as they are, whole events relayed undecoded read now."""
    parts: list[str] = []
    for item in said:
        if isinstance(item, str):
            parts.append(item)
            continue
        for event in SSEDecoder().feed(item):
            try:
                content = orjson.loads(event.data)["choices"][0]["delta"]["content"]
            except (orjson.JSONDecodeError, LookupError, TypeError):
                continue  # a comment, or a chunk with no content
            if isinstance(content, str):
                parts.append(content)
    return "".join(parts)
