"""The recall loop's wire forms: a later round's in-band error in each API's own shape, and a
call's arguments as the model wrote them."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.errors import UpstreamUnreachable
from proxy.ports import UpstreamReply
from proxy.recall.tool import RecallSettings
from proxy.server.recall_dialects import ChatDialect, MessagesDialect
from proxy.sse import SSEDecoder
from proxy.types import JSON


async def never(body: JSON) -> UpstreamReply:
    raise AssertionError("not sent")


class NoUpstream:
    async def send_chat(self, body: JSON, **_: Any) -> UpstreamReply:
        raise AssertionError("not sent")


MESSAGES = MessagesDialect(never, {"messages": []}, "ctx_recall")
CHAT = ChatDialect(NoUpstream(), {"messages": []}, RecallSettings(), {}, None)


def one_event(data: bytes) -> tuple[str, Any]:
    [event] = SSEDecoder().feed(data)
    return event.event, orjson.loads(event.data)


def test_a_messages_rounds_errors_are_anthropics_error_events() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert one_event(MESSAGES.failed(529, orjson.dumps(overloaded))) == ("error", overloaded)
    generic = {"type": "api_error", "message": "The upstream answered 502."}
    assert one_event(MESSAGES.failed(502, b"<html>bad gateway</html>")) == (
        "error", {"type": "error", "error": generic})  # fmt: skip
    name, refused = one_event(MESSAGES.refused(UpstreamUnreachable("no route to the upstream")))
    assert name == "error" and refused["error"]["message"] == "no route to the upstream"
    assert refused["type"] == "error" and refused["error"]["type"] == "api_error"


def test_a_chat_rounds_errors_are_openai_shaped_data_events() -> None:
    name, failed = one_event(CHAT.failed(503, b""))
    assert name == "" and failed["error"]["code"] == "503"
    _, refused = one_event(CHAT.refused(UpstreamUnreachable("no route to the upstream")))
    assert refused["error"]["message"] == "no route to the upstream"


def test_a_calls_arguments_are_the_json_text_the_model_wrote() -> None:
    use = {"type": "tool_use", "id": "t", "name": "ctx_recall", "input": {"ref": "call_1"}}
    assert MESSAGES.arguments(use) == '{"ref":"call_1"}'
    call = {"id": "c", "function": {"name": "ctx_recall", "arguments": '{"query": "x"}'}}
    assert CHAT.arguments(call) == '{"query": "x"}' and CHAT.arguments({}) is None


def test_a_rounds_end_is_seen_however_its_json_is_spaced() -> None:
    for spaced in (b'"finish_reason":"stop"', b'"finish_reason" : "stop"', b'"finish_reason":\t"'):
        assert CHAT.finished.search(b'data: {"choices":[{' + spaced + b"}]}\n\n"), spaced
    assert not CHAT.finished.search(b'data: {"choices":[{"finish_reason" : null}]}\n\n')
    for spaced in (b'"type":"message_delta"', b'"type" :  "message_delta"'):
        assert MESSAGES.finished.search(b"event: message_delta\ndata: {" + spaced + b"}\n\n")
