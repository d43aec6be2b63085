"""The recall loop around the upstream call (issue 18): the proxy answers the model's calls to the
recall tool itself and asks again, so the client receives one ordinary answer.

`RecallLoop.rounds` takes the first round's reply, when the request offered the tool, and gives
the reply the client is answered from:

    a stream      the same status and headers, its body every round's stream merged as it
                  arrives (the dialect's merger: nothing is buffered, the first round's bytes
                  go out as they came); an upstream error in a later round ends the stream in
                  band
    a whole body  read when it calls the tool (judged on its bytes first), then the rounds'
                  answers combined; an upstream error in a later round ends the rounds with
                  what they gave

Each round appends the model's recall calls and their answers to the upstream conversation and
asks again, at most `max_rounds` times; the last round cannot call the tool, so it must answer.
The recall index is built at the first call, from the client's messages and the prepared ones;
persisted outputs come from the store, as the caller's tenant (`RecallTally` counts it all).

The wire form is a `Dialect` (`proxy.server.recall_dialects`): chat completions (any upstream
the chat route, the Responses route and a Messages client in front of an OpenAI upstream send
to), or the Messages API (an Anthropic upstream answering a Messages client natively).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Generic, NamedTuple

import orjson

from proxy.engine.prepared import Prepared
from proxy.errors import CtxProxyError
from proxy.ports import UpstreamReply
from proxy.recall.answer import OutputReader, answer_call
from proxy.recall.index import RecallIndex, build_index
from proxy.recall.tool import RecallSettings
from proxy.server.recall_dialects import Dialect, Merger, R
from proxy.types import JSON
from proxy.usage import Usage


class RecallTally(NamedTuple):
    """What the loop did: recall calls answered, upstream rounds sent (1: no recall), the calls
    by (kind, outcome), the last round's usage (the context the upstream holds) and the first
    round's (the client's request as sent: what a provider cache could serve of it)."""

    recalls: int = 0
    rounds: int = 1
    counts: Mapping[tuple[str, str], int] = {}
    last_usage: Usage | None = None
    first_usage: Usage | None = None


_HELD_BYTES = 1 << 20
"""A first round's bytes kept for the merger until a tool call shows; past this, the merger
takes over at once (a long answer's cost is its own)."""


class _FirstRound:
    """The first round while no tool call shows: its whole events go out as they came (`take`),
    the part of an event not yet complete is held; what went out is kept (`sent`) for the merger
    to read when a tool call does show (`engaged`: then `rest` is what it has not seen)."""

    __slots__ = ("engaged", "finished", "held", "rest", "sent", "size", "trigger", "until")

    def __init__(self, *, trigger: bytes, finished: re.Pattern[bytes]) -> None:
        self.trigger, self.until = trigger, finished
        self.sent: list[bytes] = []
        self.held = self.rest = b""
        self.size = 0
        self.engaged = self.finished = False

    def take(self, chunk: bytes) -> bytes:
        """The bytes to send now. `finished`: the round ended without a tool call (what follows
        goes out as it comes). A line end of `\r`, which the merger reads, engages it too."""
        data = self.held + chunk if self.held else chunk
        if self.trigger in data or b"\r" in data or self.size > _HELD_BYTES:
            self.engaged, self.rest, self.held = True, data, b""
            return b""
        end = data.rfind(b"\n\n") + 2
        if end < 2:
            self.held = data
            return b""
        out, self.held = data[:end], data[end:]
        self.sent.append(out)
        self.size += len(out)
        self.finished = self.until.search(out) is not None
        return out


class RecallLoop(Generic[R]):
    """One request's rounds; see the module doc. `body` is the client's (internal form),
    `prepared` its preparation; `dialect` sends and reads the rounds."""

    def __init__(
        self,
        *,
        dialect: Dialect[R],
        body: JSON,
        prepared: Prepared,
        settings: RecallSettings,
        reader: OutputReader,
    ) -> None:
        self._dialect = dialect
        self._body = body
        self._prepared = prepared
        self._settings = settings
        self._reader = reader
        self._index: RecallIndex | None = None
        self._counts: Counter[tuple[str, str]] = Counter()
        self._rounds = 1
        self._last_usage: Usage | None = None
        self._first_usage: Usage | None = None
        self._current: UpstreamReply | None = None
        self._merged: AsyncGenerator[bytes, None] | None = None

    @property
    def tally(self) -> RecallTally:
        recalls = sum(self._counts.values())
        counts = dict(self._counts)
        return RecallTally(recalls, self._rounds, counts, self._last_usage, self._first_usage)

    async def rounds(self, first: UpstreamReply) -> UpstreamReply:
        """The reply to answer the client from (`first` itself when it is an error, or a whole
        body that does not call the tool)."""
        if first.status != 200:
            return first
        self._current = first
        if first.stream is not None:
            self._merged = self._stream(first.stream)
            return first._replace(stream=self._merged, release=self._release)
        return await self._whole(first)

    async def _release(self) -> None:
        if self._merged is not None:
            await self._merged.aclose()
        if self._current is not None:
            await self._current.release()

    async def _stream(self, stream: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        """The client's stream: the first round as it came until a tool call shows, then every
        round through the merger (`_merge`)."""
        dialect = self._dialect
        first = _FirstRound(trigger=dialect.trigger, finished=dialect.finished)
        async for chunk in stream:
            out = first.take(chunk)
            if first.engaged:
                break
            if out:
                yield out
            if first.finished:  # no tool call: the rest as it comes, untouched
                if first.held:
                    yield first.held
                async for rest in stream:
                    yield rest
                return
        else:
            if first.held:
                yield first.held  # a stream cut mid-event: the relay tells the client
            return
        merger = dialect.merger()
        for past in first.sent:
            merger.feed_bytes(past)  # whole events of content, which went out as they came
        out = merger.feed_bytes(first.rest)
        if out:
            yield out
        async for out in self._merge(merger, stream):
            yield out

    async def _merge(
        self, merger: Merger[R], stream: AsyncIterator[bytes]
    ) -> AsyncGenerator[bytes, None]:
        """The rest of the first round, then each next one, merged; `finish()` when they end."""
        outgoing = self._dialect.first_body
        for number in range(self._settings.max_rounds + 1):
            async for chunk in stream:
                out = merger.feed_bytes(chunk)
                if out:
                    yield out
            ended = merger.end_round()
            if ended.usage is not None:
                self._last_usage = self._dialect.usage(ended.usage)
                self._first_usage = self._first_usage or self._last_usage
            if merger.failed or ended.finish_reason is None:
                return  # the relay tells the client the stream did not complete
            if not ended.recall_calls or number == self._settings.max_rounds:
                break
            outgoing = await self._continued(outgoing, ended, number)
            reply = await self._send(outgoing)
            if isinstance(reply, bytes):
                yield reply
                return
            if reply.stream is None:
                await reply.release()
                yield self._dialect.failed(reply.status, reply.body)
                return
            stream = reply.stream
        yield merger.finish()

    async def _whole(self, first: UpstreamReply) -> UpstreamReply:
        raw = first.body or b""
        if self._dialect.trigger not in raw or orjson.dumps(self._settings.tool_name) not in raw:
            return first  # no call of the tool: as it came, never decoded
        try:
            answers: list[JSON] = [orjson.loads(raw)]
        except orjson.JSONDecodeError:
            return first
        outgoing = self._dialect.first_body
        for number in range(self._settings.max_rounds):
            ended = self._dialect.round_of(answers[-1])
            if not ended.recall_calls:
                break
            outgoing = await self._continued(outgoing, ended, number)
            reply = await self._send(outgoing)
            if isinstance(reply, bytes) or reply.status != 200 or reply.body is None:
                break  # the rounds end with what they gave
            try:
                answers.append(orjson.loads(reply.body))
            except orjson.JSONDecodeError:
                break
        usage = self._dialect.usage
        self._first_usage = usage(answers[0].get("usage"))
        self._last_usage = usage(answers[-1].get("usage"))
        return first._replace(body=orjson.dumps(self._dialect.combine(answers)))

    async def _continued(self, outgoing: JSON, ended: R, number: int) -> JSON:
        """The next round's body: the calls answered and appended (no tool call allowed after the
        last allowed round)."""
        answers = await self._answers(ended.recall_calls)
        added = self._dialect.continuation(ended, answers, number)
        last = number + 1 == self._settings.max_rounds
        return self._dialect.next_body(outgoing, added, last=last)

    async def _send(self, outgoing: JSON) -> UpstreamReply | bytes:
        """The next round's reply (a whole body already read and released), or the in-band
        error event of a round that could not be sent."""
        if self._current is not None:
            await self._current.release()
        try:
            reply = await self._dialect.send(outgoing)
        except CtxProxyError as exc:
            self._current = None
            return self._dialect.refused(exc)
        self._current = reply
        self._rounds += 1
        return reply

    async def _answers(self, calls: Sequence[JSON]) -> list[str]:
        """The tool result of each recall call, in order."""
        if self._index is None:
            prepared = self._prepared
            self._index = build_index(
                self._body["messages"],
                prepared.body["messages"],
                covers=prepared.covers,
                tool_name=self._settings.tool_name,
            )
        texts: list[str] = []
        for call in calls:
            found = await answer_call(
                self._dialect.arguments(call),
                self._index,
                settings=self._settings,
                reader=self._reader,
                tenant=self._prepared.turn.tenant,
            )
            self._counts[(found.kind, found.outcome)] += 1
            texts.append(found.text)
        return texts
