"""A chat upstream's SSE → the Responses API event stream, incrementally (pure).

Feed the upstream's bytes as they arrive (`feed`, read by `proxy.inbound.chat_stream`); each call
returns the bytes to send, maybe none (events written by
`proxy.inbound.responses_events.EventWriter`, numbered from 0):

    first chunk            → `response.created`, `response.in_progress` (the request echoed)
    delta.content          → a `message` item: `response.output_item.added`,
                             `response.content_part.added`, then `response.output_text.delta`s
                             (delta.refusal: a `refusal` part, `response.refusal.delta`s)
    delta.tool_calls       → the message item is finished; a `function_call` item per call
                             index (`response.output_item.added`), then
                             `response.function_call_arguments.delta`s as the fragments come;
                             a custom tool's call: a `custom_tool_call`, its input sent whole at
                             the end (it is the `input` argument of the function standing for it)
    usage, finish_reason   → remembered (they come in the last chunks)
    [DONE], or `finish()`  → every open item finished (`….done` events, `output_item.done`), then
      after a finish_reason  `response.completed` (`response.incomplete` when the answer was
                             cut by length or a filter) with the whole response and its usage
    an in-band error, or   → `response.failed` with the error; the stream is over
      `finish()` before any finish_reason (the upstream stopped short), or `fail()`

Tool-call items stay open until the end, so an upstream interleaving the fragments of parallel
calls is followed. After the end `done` is true, `response` holds the final Response (None when
it failed) and further input gives nothing. Ids and the echo are those of
`proxy.inbound.responses_response`, so the stream and the JSON answer agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from proxy.inbound.chat_stream import ChatStreamReader
from proxy.inbound.responses_errors import failure_code
from proxy.inbound.responses_events import EventWriter, in_progress
from proxy.inbound.responses_items import custom_input
from proxy.inbound.responses_response import (
    custom_names,
    finished,
    item_id,
    message_item,
    response_shell,
)
from proxy.inbound.usage_report import scaled_chat_usage
from proxy.types import JSON

PART_FIELDS = MappingProxyType({"output_text": "text", "refusal": "refusal"})
PART_KINDS = MappingProxyType({"content": "output_text", "refusal": "refusal"})
"""A chat delta's text field → the kind of content part it streams into."""


class ResponsesStreamTranslator(ChatStreamReader):
    """One streamed answer; one instance per request."""

    TEXT_KEYS = ("content", "refusal")

    def __init__(
        self,
        *,
        request: Mapping[str, Any],
        response_id: str,
        created_at: int,
        scale: float | None = None,
    ) -> None:
        """`scale`: report the input tokens scaled by it (`proxy.inbound.usage_report`); the
        `usage` property stays the upstream's own."""
        super().__init__()
        self.request = request
        self._scale = scale
        self.response_id = response_id
        self.created_at = created_at
        self.response: JSON | None = None
        self._writer = EventWriter()
        self._shell: JSON | None = None
        self._output: list[JSON] = []
        self._message: int | None = None
        """Output index of the open message item."""
        self._tools: dict[int, int] = {}
        """Chat tool call index → output index of its item."""
        self._inputs: dict[int, str] = {}
        """Output index of a custom tool's call → its arguments so far."""
        self._custom = custom_names(request)

    def fail(self, message: str, code: str = "server_error") -> bytes:
        """`response.failed` ending the stream (an idle gap, a lost connection, an error)."""
        if self.done:
            return b""
        out = self._start_once({})
        self.done = True
        assert self._shell is not None
        failed = {
            **self._shell,
            "status": "failed",
            "error": {"code": code, "message": message},
            "output": self._output,
        }
        return out + self._writer.event("response.failed", response=failed)

    def _error_code(self, error: JSON) -> str:
        return failure_code(error)

    def _start(self, payload: JSON) -> bytes:
        model = str(payload.get("model") or "") or None
        self._shell = response_shell(
            self.request, response_id=self.response_id, created_at=self.created_at, model=model
        )
        return self._writer.lifecycle(self._shell)

    def _text_delta(self, key: str, text: str) -> bytes:
        kind, out = PART_KINDS[key], b""
        if self._message is None:
            self._message = len(self._output)
            ident = item_id(self.response_id, "msg", self._message)
            self._output.append(message_item(ident, [], "in_progress"))
            out += self._added(self._message)
        item = self._output[self._message]
        content: list[JSON] = item["content"]
        number = next((n for n, p in enumerate(content) if p["type"] == kind), None)
        if number is None:
            number = len(content)
            part: JSON = {"type": kind, PART_FIELDS[kind]: ""}
            if kind == "output_text":
                part["annotations"] = []
            content.append(part)
            out += self._writer.open_part(item, self._message, number, part)
        content[number][PART_FIELDS[kind]] += text
        return out + self._writer.part_delta(item, self._message, number, kind, text)

    def _tool_delta(self, call: JSON) -> bytes:
        out = self._close_message()
        number = call.get("index", 0)
        function = call.get("function") or {}
        if number not in self._tools:
            index = len(self._output)
            name = str(function.get("name") or "")
            call_id = str(
                call.get("id") or f"call_{self.response_id.removeprefix('resp_')}_{index}"
            )
            if name in self._custom:
                ident = item_id(self.response_id, "ctc", index)
                item = {
                    "id": ident,
                    "type": "custom_tool_call",
                    "call_id": call_id,
                    "name": name,
                    "input": "",
                }
                self._inputs[index] = ""
            else:
                ident = item_id(self.response_id, "fc", index)
                item = {
                    "id": ident,
                    "type": "function_call",
                    "call_id": call_id,
                    "name": name,
                    "arguments": "",
                    "status": "in_progress",
                }
            self._output.append(item)
            self._tools[number] = index
            out += self._added(index)
        index = self._tools[number]
        item = self._output[index]
        if function.get("name") and not item["name"]:
            item["name"] = str(function["name"])
        fragment = function.get("arguments")
        if isinstance(fragment, str) and fragment:
            if index in self._inputs:
                self._inputs[index] += fragment
            else:
                item["arguments"] += fragment
                out += self._writer.argument_delta(item, index, fragment)
        return out

    def _added(self, index: int) -> bytes:
        item = in_progress(self._output[index])
        return self._writer.event("response.output_item.added", output_index=index, item=item)

    def _close_message(self) -> bytes:
        if self._message is None:
            return b""
        index, self._message = self._message, None
        item = self._output[index]
        out = [self._writer.close_part(item, index, n, p) for n, p in enumerate(item["content"])]
        item["status"] = (
            "incomplete" if str(self._finish) in ("length", "content_filter") else "completed"
        )
        out.append(self._writer.event("response.output_item.done", output_index=index, item=item))
        return b"".join(out)

    def _close(self) -> bytes:
        if self.done:
            return b""
        out = [self._start_once({}), self._close_message()]
        for index in sorted(self._tools.values()):
            item = self._output[index]
            if index in self._inputs:
                item["input"] = custom_input(self._inputs[index])
                out.append(self._writer.argument_delta(item, index, item["input"]))
            else:
                item["status"] = "completed"
            out.append(self._writer.close_arguments(item, index))
            out.append(
                self._writer.event("response.output_item.done", output_index=index, item=item)
            )
        self.done = True
        assert self._shell is not None
        usage = self._usage
        if self._scale is not None:
            usage = scaled_chat_usage(usage, self._scale)
        self.response = finished(self._shell, self._output, finish_reason=self._finish, usage=usage)
        out.append(self._writer.finish(self.response))
        return b"".join(out)
