"""One Messages client stream made of several upstream rounds (the Messages API's events). Pure,
incremental.

Feed each round's upstream bytes to `MessagesStreamMerger.feed_bytes` as they arrive: each call
returns the bytes to send the client now. When a round's upstream stream ends, `end_round` gives
the round (`MessagesRound`, its blocks whole when it called the recall tool: the continuation
needs them): the proxy answers its calls and feeds the next round, or, when not (or when the
rounds stop), sends `finish()`. A cut-off round (no stop reason) or an error event (`failed`)
ends the rounds with the caller's error event instead. The client receives one message:

    message_start   round 0's, as it came; later rounds' withheld (their usage kept)
    content blocks  relayed as they arrive, every round, `index` renumbered across the rounds
                    (from 0, no gaps); a `tool_use` block is held until its round's stop: a
                    round calling the recall tool drops every one of its own (the client's
                    too: the model re-issues them), another releases the client's; a block
                    after a held client `tool_use` is held behind it (the client sees the
                    model's order), released with it, or when the next round starts
    message_delta   one: the round's without recall calls, or `finish()`'s when the rounds
                    stopped with one ("tool_use" if client calls are left, else "end_turn");
                    after several rounds its usage is their sum, every counter (the SDK takes
                    the delta's input counters as the message's)
    message_stop    one, at the end
    ping, others    relayed; an `error` event relayed, and `failed` set

Round 0's events go out as they came while nothing in them changes (a lone round's stream is
the upstream's byte for byte, its `tool_use` blocks only held until its stop).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from proxy.recall.messages_rounds import TOOL_USE, MessagesRound, split_uses
from proxy.recall.rounds import sum_usage
from proxy.sse import SSEDecoder, SSEvent, sse_event
from proxy.types import JSON

__all__ = ["MessagesStreamMerger"]

_TEXTS = MappingProxyType(
    {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"}
)
"""Delta type → the block's key its string fragments add up to."""


@dataclass(slots=True)
class _Block:
    """One content block as its events build it."""

    start: JSON
    client: int | None = None
    """Its index in the client's stream; None while held (a `tool_use` block)."""
    held: list[tuple[bytes, JSON]] = field(default_factory=list)
    pieces: dict[str, list[str]] = field(default_factory=dict)
    citations: list[Any] = field(default_factory=list)

    def take(self, delta: Any) -> None:
        if not isinstance(delta, dict):
            return
        kind = delta.get("type")
        key = _TEXTS.get(kind) if isinstance(kind, str) else None
        if key == "signature" and isinstance(delta.get(key), str):
            self.pieces[key] = [delta[key]]  # a whole signature, as the SDK takes it
        elif key is not None and isinstance(delta.get(key), str):
            self.pieces.setdefault(key, []).append(delta[key])
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self.pieces.setdefault("input", []).append(delta["partial_json"])
        elif kind == "citations_delta" and "citation" in delta:
            self.citations.append(delta["citation"])

    def whole(self) -> JSON:
        """The block as a message holds it (a `tool_use` input parsed, `{}` when none came)."""
        out = dict(self.start)
        for key, pieces in self.pieces.items():
            if key != "input":
                out[key] = str(out.get(key) or "") + "".join(pieces)
                continue
            # unreadable: as it started (the recall answer says what is wrong with its arguments)
            with contextlib.suppress(orjson.JSONDecodeError):
                out["input"] = orjson.loads("".join(pieces) or "{}")
        if self.citations:
            out["citations"] = [*(out.get("citations") or []), *self.citations]
        return out


@dataclass(slots=True)
class _Round:
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: JSON | None = None
    delta: JSON | None = None
    """The round's `message_delta`, held."""
    delta_raw: bytes = b""
    decoder: SSEDecoder = field(default_factory=SSEDecoder)

    def holds_client_use(self, *, tool_name: str) -> bool:
        """Whether a client `tool_use` block of the round is held (later blocks wait for it)."""
        return any(
            b.client is None
            and b.start.get("type") == TOOL_USE
            and b.start.get("name") != tool_name
            for b in self.blocks.values()
        )

    def uses(self, *, tool_name: str) -> tuple[list[JSON], list[JSON]]:
        starts = [block.start for _, block in sorted(self.blocks.items())]
        return split_uses(starts, tool_name=tool_name)

    @property
    def stop_reason(self) -> str | None:
        delta = self.delta.get("delta") if self.delta is not None else None
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        return reason if isinstance(reason, str) else None


class MessagesStreamMerger:
    """The merger of one client stream; see the module doc."""

    def __init__(self, *, tool_name: str) -> None:
        self.tool_name = tool_name
        self.rounds = 0
        """Rounds ended so far."""
        self.failed = False
        self.usages: list[JSON] = []
        """The usage of each ended round that reported one."""
        self._round = _Round()
        self._last: _Round | None = None
        self._next = 0
        """The client's next block index."""
        self._started = self._finished = self._stopped = self._stale = False

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet complete (a round cut off mid-event leaves some)."""
        return self._round.decoder.pending

    def feed_bytes(self, chunk: bytes) -> bytes:
        """The bytes to send the client for this read of the upstream's stream."""
        out = bytearray(self._next_round() if self._stale else b"")
        for event in self._round.decoder.feed(chunk):
            out += self.feed(event)
        return bytes(out)

    def feed(self, event: SSEvent) -> bytes:
        """The bytes to send the client for one upstream event (maybe none)."""
        if event.is_comment_only or not event.data:
            return event.raw
        if self._stale:
            return self._next_round() + self.feed(event)
        try:
            payload = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            return event.raw
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind == "error":
            self.failed = True
        elif kind == "message_start":
            return self._message_start(event.raw, payload)
        elif kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            return self._block_event(event.raw, payload)
        elif kind == "message_delta":
            return self._message_delta(event.raw, payload)
        elif kind == "message_stop":
            return self._message_stop(event.raw)
        return event.raw

    def _message_start(self, raw: bytes, payload: JSON) -> bytes:
        message = payload.get("message")
        usage = message.get("usage") if isinstance(message, dict) else None
        self._round.usage = dict(usage) if isinstance(usage, dict) else {}
        if self._started:
            return b""  # a later round's: the client has one message
        self._started = True
        return raw

    def _block_event(self, raw: bytes, payload: JSON) -> bytes:
        index = payload.get("index")
        if not isinstance(index, int):
            return raw
        blocks = self._round.blocks
        if payload["type"] == "content_block_start":
            start = payload.get("content_block")
            waits = self._round.holds_client_use(tool_name=self.tool_name)
            blocks[index] = _Block(dict(start) if isinstance(start, dict) else {})
            if blocks[index].start.get("type") != TOOL_USE and not waits:
                blocks[index].client, self._next = self._next, self._next + 1
        block = blocks.get(index)
        if block is None:
            return raw  # a block that never started: nothing to renumber it by
        if payload["type"] == "content_block_delta":
            block.take(payload.get("delta"))
        if block.client is None:
            block.held.append((raw, payload))
            return b""
        return _indexed(raw, payload, block.client)

    def _message_delta(self, raw: bytes, payload: JSON) -> bytes:
        state = self._round
        state.delta, state.delta_raw = payload, raw
        usage = payload.get("usage")
        if isinstance(usage, dict):
            known = {k: v for k, v in usage.items() if v is not None}
            state.usage = {**(state.usage or {}), **known}
        if state.uses(tool_name=self.tool_name)[0]:
            return b""  # the round called the tool: the caller asks again, or finishes
        return self._release(state, state.stop_reason, usages=[*self.usages, state.usage])

    def _message_stop(self, raw: bytes) -> bytes:
        if not self._finished or self._stopped:
            return b""
        self._stopped = True
        return raw

    def _next_round(self) -> bytes:
        """A new round starts: the blocks the last one held behind a client `tool_use` go out
        (a round that called the recall tool: its `tool_use` blocks dropped)."""
        last, self._round, self._stale = self._round, _Round(), False
        return self._held_blocks(last, uses=False)

    def _held_blocks(self, state: _Round, *, uses: bool) -> bytes:
        """The round's held blocks in order, indexed on: its client `tool_use` blocks when
        `uses`, the others always; never the recall tool's."""
        out = bytearray()
        for _, block in sorted(state.blocks.items()):
            if block.client is not None or block.start.get("name") == self.tool_name:
                continue
            if block.start.get("type") == TOOL_USE and not uses:
                continue
            block.client, self._next = self._next, self._next + 1
            for raw, payload in block.held:
                out += _indexed(raw, payload, block.client)
        return bytes(out)

    def _release(self, state: _Round, reason: str | None, *, usages: list[Any]) -> bytes:
        """The round's held blocks (indexed on), then the one `message_delta`."""
        self._finished = True
        out = bytearray(self._held_blocks(state, uses=True))
        assert state.delta is not None
        if not self.rounds and reason == state.stop_reason:
            return bytes(out + state.delta_raw)  # a lone round's, as it came
        summed = sum_usage([u for u in usages if isinstance(u, dict)])
        delta = {**_object(state.delta.get("delta")), "stop_reason": reason}
        changed = {**state.delta, "delta": delta}
        if summed is not None:
            changed["usage"] = summed
        return bytes(out + _event(changed))

    def end_round(self) -> MessagesRound:
        """The round whose upstream stream just ended; the next one fed starts a new round."""
        state = self._round
        recall, client = state.uses(tool_name=self.tool_name)
        content = tuple(b.whole() for _, b in sorted(state.blocks.items())) if recall else ()
        if content:
            recall, client = split_uses(content, tool_name=self.tool_name)
        if state.usage is not None:
            self.usages.append(state.usage)
        self.rounds += 1
        self._stale, self._last = True, state
        return MessagesRound(tuple(recall), tuple(client), content, state.stop_reason, state.usage)

    def finish(self) -> bytes:
        """The end of the client's stream: when the rounds stopped while the model still called
        the tool, the last round's client `tool_use` blocks and a `message_delta`; then
        `message_stop`, once."""
        out = b""
        last = self._last
        if not self._finished and last is not None and last.delta is not None:
            client = last.uses(tool_name=self.tool_name)[1]
            out = self._release(last, TOOL_USE if client else "end_turn", usages=self.usages)
        if self._finished and not self._stopped:
            self._stopped = True
            out += _event({"type": "message_stop"})
        return out


def _indexed(raw: bytes, payload: JSON, index: int) -> bytes:
    """A content block event at the client's `index`: as it came when that is its own."""
    if payload.get("index") == index:
        return raw
    return _event({**payload, "index": index})


def _event(payload: JSON) -> bytes:
    """One event of the stream, named by its type."""
    return sse_event(str(payload.get("type", "")), payload)


def _object(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}
