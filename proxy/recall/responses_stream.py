"""One Responses client stream made of several upstream rounds (the Responses API's events).
Pure, incremental.

Feed each round's upstream bytes to `ResponsesStreamMerger.feed_bytes` as they arrive: each call
returns the bytes to send the client now. When a round's upstream stream ends, `end_round` gives
the round (`ResponsesRound`, its items whole): the proxy answers its recall calls and feeds the
next round, or, when not (or when the rounds stop), sends `finish()`. A round that never ended
(no terminal event) or a `response.failed` / `error` event (`failed`) ends the rounds with the
caller's error event instead. The client receives one response:

    response.created, .in_progress   round 0's, the recall tool left out of its `tools`; later
                                     rounds' withheld
    item events                      relayed as they arrive, every round, `output_index`
                                     renumbered across the rounds (from 0, no gaps)
    held items                       a `function_call` is held until its round ends: a recall
                                     call is dropped at once, the client's are released by the
                                     last round only (earlier: the model re-issues them); an
                                     item after a held call is held behind it (the model's
                                     order), released when its round ends
    reasoning                        held until the next item of its round starts: dropped with
                                     a recall call (the API refuses a reasoning item sent back
                                     without its item), released before anything else shown,
                                     decided with the call it precedes (`shown_items`)
    response.completed               one, at the end: the rounds' Responses combined
                                     (`combine_responses`: usage summed, no recall tool)
    others                           relayed; `response.failed` and `error` set `failed`

Every event the client gets is numbered anew (`sequence_number` 0, 1, 2 …); an event whose
numbers do not change goes out as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from proxy.recall.responses_rounds import (
    REASONING,
    ResponsesRound,
    combine_responses,
    is_call,
    response_round,
    shown_items,
    without_recall_tool,
)
from proxy.sse import SSEDecoder, SSEvent, sse_event
from proxy.types import JSON

__all__ = ["ResponsesStreamMerger"]

STARTS = frozenset({"response.created", "response.in_progress", "response.queued"})
ENDS = frozenset({"response.completed", "response.incomplete"})
FAILS = frozenset({"response.failed", "error"})


@dataclass(slots=True)
class _Item:
    """One output item of a round as its events bring it."""

    item: JSON
    client: int | None = None
    """Its `output_index` in the client's stream; None while held."""
    dropped: bool = False
    held: list[JSON] = field(default_factory=list)


@dataclass(slots=True)
class _Round:
    items: dict[int, _Item] = field(default_factory=dict)
    """Upstream `output_index` → the item, in the order they started."""
    ended: JSON | None = None
    """The round's terminal event, held."""
    decoder: SSEDecoder = field(default_factory=SSEDecoder)

    def held(self) -> list[_Item]:
        return [i for i in self.items.values() if i.client is None and not i.dropped]


class ResponsesStreamMerger:
    """The merger of one client stream; see the module doc."""

    def __init__(self, *, tool_name: str) -> None:
        self.tool_name = tool_name
        self.rounds = 0
        """Rounds ended so far."""
        self.failed = False
        self.responses: list[JSON] = []
        """Each ended round's Response, its output as the round's events built it."""
        self._round = _Round()
        self._last: _Round | None = None
        self._seq = self._next = 0
        self._finished = self._stale = False

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
        if not isinstance(payload, dict):
            return event.raw
        kind = payload.get("type")
        if kind in STARTS:
            if self.rounds:
                return b""  # a later round's: the client has one response
            response = payload.get("response")
            shown = self._shown(response) if isinstance(response, dict) else response
            if shown is response:
                return self._emit(payload, event.raw)
            return self._emit({**payload, "response": shown}, b"")
        if isinstance(payload.get("output_index"), int):
            return self._item_event(payload, event.raw)
        if kind in ENDS:
            return self._ended(payload)
        if kind in FAILS:
            self.failed = True
        return self._emit(payload, event.raw)

    def _shown(self, response: JSON) -> JSON:
        return without_recall_tool(response, tool_name=self.tool_name)

    def _item_event(self, payload: JSON, raw: bytes) -> bytes:
        index = payload["output_index"]
        out = b""
        if payload.get("type") == "response.output_item.added":
            item = payload.get("item")
            self._round.items[index] = _Item(dict(item) if isinstance(item, dict) else {})
            out = self._admit(self._round.items[index])
        found = self._round.items.get(index)
        if found is None:
            return self._emit(payload, raw)  # an item that never started: left as it is
        if payload.get("type") == "response.output_item.done":
            item = payload.get("item")
            found.item = dict(item) if isinstance(item, dict) else found.item
        if found.dropped:
            return out
        if found.client is None:
            found.held.append(payload)
            return out
        same = found.client == index
        return out + self._emit({**payload, "output_index": found.client}, raw if same else b"")

    def _admit(self, new: _Item) -> bytes:
        """Whether a starting item goes out, is held or dropped (see the module doc); the held
        reasoning it releases."""
        held = [item for item in self._round.held() if item is not new]
        if is_call(new.item, tool_name=self.tool_name, recall=True):
            new.dropped = True
            for item in reversed(held):
                if item.item.get("type") != REASONING:
                    break
                item.dropped = True  # its item was the recall call
            return b""
        if new.item.get("type") in ("function_call", REASONING):
            return b""
        if any(item.item.get("type") != REASONING for item in held):
            return b""  # behind a held call
        out = self._release(held)
        new.client, self._next = self._next, self._next + 1
        return out

    def _release(self, items: list[_Item]) -> bytes:
        """`items` indexed on, their held events sent."""
        out = bytearray()
        for item in items:
            item.client, self._next = self._next, self._next + 1
            for payload in item.held:
                out += self._emit({**payload, "output_index": item.client}, b"")
            item.held.clear()
        return bytes(out)

    def _settle(self, state: _Round, *, last: bool) -> bytes:
        """A round's held items shown (`shown_items`) released in order, the others dropped."""
        order = list(state.items.values())
        stand_ins = [{**i.item, "_n": n} for n, i in enumerate(order)]
        shown = {s["_n"] for s in shown_items(stand_ins, tool_name=self.tool_name, last=last)}
        release = [i for n, i in enumerate(order) if n in shown and i.client is None]
        for n, item in enumerate(order):
            item.dropped = item.dropped or n not in shown
        return self._release(release)

    def _ended(self, payload: JSON) -> bytes:
        state = self._round
        state.ended = payload
        name = self.tool_name
        if any(is_call(i.item, tool_name=name, recall=True) for i in state.items.values()):
            return b""  # the round called the tool: the caller asks again, or finishes
        return self._final(state)

    def _final(self, state: _Round) -> bytes:
        """The last round's held items, then the one terminal event."""
        out = self._settle(state, last=True)
        self._finished = True
        assert state.ended is not None
        rounds = [*self.responses, self._response(state)]
        combined = combine_responses(rounds, tool_name=self.tool_name)
        return out + self._emit({**state.ended, "response": combined}, b"")

    def _response(self, state: _Round) -> JSON:
        assert state.ended is not None
        response = state.ended.get("response")
        items = [i.item for i in state.items.values()]
        return {**(response if isinstance(response, dict) else {}), "output": items}

    def end_round(self) -> ResponsesRound:
        """The round whose upstream stream just ended; the next one fed starts a new round."""
        state = self._round
        self.rounds += 1
        self._stale, self._last = True, state
        if state.ended is None:
            items = tuple(i.item for i in state.items.values())
            return ResponsesRound((), (), items, None, None)
        response = self._response(state)
        if not self._finished:
            self.responses.append(response)
        return response_round(response, tool_name=self.tool_name)

    def _next_round(self) -> bytes:
        """A new round starts: the last one's held items it shows go out."""
        last, self._round, self._stale = self._round, _Round(), False
        return self._settle(last, last=False)

    def finish(self) -> bytes:
        """The end of the client's stream: when the rounds stopped while the model still called
        the tool, the last round's items and the terminal event of the rounds combined."""
        last = self._last
        if self._finished or last is None or last.ended is None:
            return b""
        self._stale = False
        self.responses.pop()  # `_final` adds it back
        return self._final(last)

    def _emit(self, payload: JSON, raw: bytes) -> bytes:
        """One event for the client, numbered next (`raw` when nothing changes)."""
        number, self._seq = self._seq, self._seq + 1
        if raw and payload.get("sequence_number") == number:
            return raw
        return _event({**payload, "sequence_number": number})


def _event(payload: JSON) -> bytes:
    """One event of the stream, named by its type."""
    return sse_event(str(payload.get("type", "")), payload)
