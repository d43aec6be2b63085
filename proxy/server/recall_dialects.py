"""The wire forms the recall loop (`proxy.server.recall_loop`) runs its rounds in, behind one
`Dialect`:

    ChatDialect      chat completions: the chat route, the Responses route in front of a chat
                     or Anthropic upstream (its `Sender`), a Messages client in front of an
                     OpenAI upstream; the rounds are `proxy.recall.rounds` / `stream`'s
    MessagesDialect  the Messages API, an Anthropic upstream answering a Messages client
                     natively; the rounds are `proxy.recall.messages_rounds` / `_stream`'s
    ResponsesDialect the Responses API, a Responses upstream (`api = "responses"`) answering
                     a Responses client natively; the rounds are `proxy.recall.responses_rounds`
                     / `responses_stream`'s

A dialect knows how a tool call shows in a stream (`trigger`) and how a round ends
(`finished`), reads, continues and combines rounds, sends one, and writes the in-band error that
ends a stream whose later round failed, in its API's shape.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import orjson

from proxy.errors import CtxProxyError
from proxy.inbound.messages_errors import messages_error, messages_error_for
from proxy.inbound.messages_usage import usage_of_message
from proxy.inbound.responses_usage import usage_of_response
from proxy.ports import Upstream, UpstreamReply
from proxy.recall.messages_rounds import (
    MessagesRound,
    combine_messages,
    message_round,
    next_messages_body,
    recall_turns,
)
from proxy.recall.messages_stream import MessagesStreamMerger
from proxy.recall.responses_rounds import (
    ResponsesRound,
    combine_responses,
    next_responses_body,
    recall_items,
    response_round,
)
from proxy.recall.responses_stream import ResponsesStreamMerger
from proxy.recall.rounds import Round, combine_completions, round_of
from proxy.recall.stream import StreamMerger
from proxy.recall.tool import RecallSettings, continuation, next_round_body
from proxy.server.body import with_usage_requested
from proxy.server.relay import upstream_error
from proxy.sse import error_event, sse_event
from proxy.types import JSON
from proxy.usage import Usage, usage_from


class Ended(Protocol):
    """What the loop reads of a round as it ended (`Round`, `MessagesRound`)."""

    @property
    def recall_calls(self) -> tuple[JSON, ...]: ...

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def usage(self) -> JSON | None: ...


R = TypeVar("R", bound=Ended)
R_co = TypeVar("R_co", bound=Ended, covariant=True)


class Merger(Protocol[R_co]):
    """Several rounds' streams → one client stream (`StreamMerger`, `MessagesStreamMerger`)."""

    @property
    def failed(self) -> bool: ...

    def feed_bytes(self, chunk: bytes) -> bytes: ...

    def end_round(self) -> R_co: ...

    def finish(self) -> bytes: ...


class Dialect(Protocol[R]):
    """One wire form of the rounds; see the module doc."""

    @property
    def trigger(self) -> bytes:
        """Bytes in a stream's events (or a whole answer) that may start a tool call."""
        ...

    @property
    def finished(self) -> re.Pattern[bytes]:
        """Matches an event that ends a round (seen before a tool call: none comes)."""
        ...

    @property
    def first_body(self) -> JSON:
        """What was sent in the first round."""
        ...

    def merger(self) -> Merger[R]: ...

    def round_of(self, answer: JSON) -> R: ...

    def combine(self, answers: list[JSON]) -> JSON: ...

    def continuation(self, ended: R, answers: list[str], number: int) -> list[JSON]: ...

    def next_body(self, outgoing: JSON, added: list[JSON], *, last: bool) -> JSON: ...

    def arguments(self, call: JSON) -> object:
        """A recall call's arguments, the JSON text the model wrote."""
        ...

    def usage(self, usage: Any) -> Usage | None: ...

    async def send(self, body: JSON) -> UpstreamReply: ...

    def failed(self, status: int, body: bytes | None) -> bytes:
        """The in-band error event ending a stream whose later round the upstream refused."""
        ...

    def refused(self, error: CtxProxyError) -> bytes:
        """The in-band error event of a later round that could not be sent."""
        ...


_FINISH_REASON = re.compile(rb'"finish_reason"\s*:\s*"')
_MESSAGE_DELTA = re.compile(rb'"type"\s*:\s*"message_delta"')
_RESPONSE_ENDED = re.compile(rb'"type"\s*:\s*"response\.(?:completed|incomplete|failed)"')


@dataclass(frozen=True, slots=True)
class ChatDialect:
    """Chat completions, sent through `upstream` (a stream asks for its usage)."""

    upstream: Upstream
    first_body: JSON
    settings: RecallSettings
    headers: Mapping[str, str]
    api_key: str | None
    trigger: bytes = b'"tool_calls"'
    finished: re.Pattern[bytes] = _FINISH_REASON

    def merger(self) -> StreamMerger:
        return StreamMerger(tool_name=self.settings.tool_name, client_wants_usage=True)

    def round_of(self, answer: JSON) -> Round:
        return round_of(answer, tool_name=self.settings.tool_name)

    def combine(self, answers: list[JSON]) -> JSON:
        return combine_completions(answers, tool_name=self.settings.tool_name)

    def continuation(self, ended: Round, answers: list[str], number: int) -> list[JSON]:
        return continuation(ended.content, ended.recall_calls, answers, round_index=number)

    def next_body(self, outgoing: JSON, added: list[JSON], *, last: bool) -> JSON:
        return next_round_body(outgoing, added, last=last, settings=self.settings)

    def arguments(self, call: JSON) -> object:
        function = call.get("function")
        return function.get("arguments") if isinstance(function, dict) else None

    def usage(self, usage: Any) -> Usage | None:
        return usage_from({"usage": usage})

    async def send(self, body: JSON) -> UpstreamReply:
        asked, _ = with_usage_requested(body)
        return await self.upstream.send_chat(asked, headers=self.headers, api_key=self.api_key)

    def failed(self, status: int, body: bytes | None) -> bytes:
        return error_event(upstream_error(status, body))

    def refused(self, error: CtxProxyError) -> bytes:
        return error_event(error.to_body())


@dataclass(frozen=True, slots=True)
class MessagesDialect:
    """The Messages API, sent by `send` (the Anthropic upstream, with the client's headers)."""

    send_messages: Callable[[JSON], Awaitable[UpstreamReply]]
    first_body: JSON
    tool_name: str
    trigger: bytes = b'"tool_use"'
    finished: re.Pattern[bytes] = _MESSAGE_DELTA

    def merger(self) -> MessagesStreamMerger:
        return MessagesStreamMerger(tool_name=self.tool_name)

    def round_of(self, answer: JSON) -> MessagesRound:
        return message_round(answer, tool_name=self.tool_name)

    def combine(self, answers: list[JSON]) -> JSON:
        return combine_messages(answers, tool_name=self.tool_name)

    def continuation(self, ended: MessagesRound, answers: list[str], number: int) -> list[JSON]:
        return recall_turns(ended.content, answers, tool_name=self.tool_name, round_index=number)

    def next_body(self, outgoing: JSON, added: list[JSON], *, last: bool) -> JSON:
        return next_messages_body(outgoing, added, last=last, tool_name=self.tool_name)

    def arguments(self, call: JSON) -> object:
        return orjson.dumps(call.get("input", {})).decode()

    def usage(self, usage: Any) -> Usage | None:
        return usage_of_message({"usage": usage})

    async def send(self, body: JSON) -> UpstreamReply:
        return await self.send_messages(body)

    def failed(self, status: int, body: bytes | None) -> bytes:
        """The upstream's own error event when it sent an Anthropic error, else a generic one."""
        try:
            found = orjson.loads(body or b"")
        except orjson.JSONDecodeError:
            found = None
        if isinstance(found, dict) and isinstance(found.get("error"), dict):
            return sse_event("error", found)
        return sse_event("error", messages_error(status, f"The upstream answered {status}.")[1])

    def refused(self, error: CtxProxyError) -> bytes:
        return sse_event("error", messages_error_for(error)[1])


@dataclass(frozen=True, slots=True)
class ResponsesDialect:
    """The Responses API, sent by `send_responses` (the Responses upstream, with the client's
    headers). Its `trigger` is in every event and every Response: they all echo the tools, the
    recall tool's definition among them, which the merger and `combine` leave out."""

    send_responses: Callable[[JSON], Awaitable[UpstreamReply]]
    first_body: JSON
    tool_name: str
    trigger: bytes = b'"type"'
    finished: re.Pattern[bytes] = _RESPONSE_ENDED

    def merger(self) -> ResponsesStreamMerger:
        return ResponsesStreamMerger(tool_name=self.tool_name)

    def round_of(self, answer: JSON) -> ResponsesRound:
        return response_round(answer, tool_name=self.tool_name)

    def combine(self, answers: list[JSON]) -> JSON:
        return combine_responses(answers, tool_name=self.tool_name)

    def continuation(self, ended: ResponsesRound, answers: list[str], number: int) -> list[JSON]:
        return recall_items(ended.content, answers, tool_name=self.tool_name, round_index=number)

    def next_body(self, outgoing: JSON, added: list[JSON], *, last: bool) -> JSON:
        return next_responses_body(outgoing, added, last=last, tool_name=self.tool_name)

    def arguments(self, call: JSON) -> object:
        return call.get("arguments")

    def usage(self, usage: Any) -> Usage | None:
        return usage_of_response({"usage": usage})

    async def send(self, body: JSON) -> UpstreamReply:
        return await self.send_responses(body)

    def failed(self, status: int, body: bytes | None) -> bytes:
        return responses_error_event(upstream_error(status, body), code=str(status))

    def refused(self, error: CtxProxyError) -> bytes:
        return responses_error_event(error.to_body(), code="server_error")


def responses_error_event(body: Mapping[str, Any], *, code: str) -> bytes:
    """The Responses stream's `error` event for an OpenAI-shaped error `body`."""
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    event = {
        "type": "error",
        "code": str(error.get("code") or code),
        "message": str(error.get("message") or "The request failed."),
        "param": error.get("param"),
        "sequence_number": 0,
    }
    return sse_event("error", event)
