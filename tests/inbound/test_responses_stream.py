"""A chat upstream's SSE → the Responses event stream: every event valid for the openai SDK's
event union, and the SDK's own stream accumulator (`ResponseStreamState`) rebuilds the Response
the JSON translation gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from proxy.inbound.chat_stream import CUT_SHORT
from proxy.inbound.responses_response import chat_response_to_response, response_id_for
from proxy.inbound.responses_stream import ResponsesStreamTranslator
from tests.inbound.responses_builders import EVENTS, events_of, valid_response
from tests.inbound.test_messages_stream import TOOL_ANSWER, TOOL_STREAM, USAGE, call, chunk

JSON = dict[str, Any]
RID = response_id_for("req-7")
REQUEST: JSON = {
    "model": "gpt-5-codex",
    "input": "hi",
    "tools": [
        {"type": "function", "name": "Read", "parameters": {"type": "object"}},
        {"type": "function", "name": "Bash", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
    ],
}


def translator() -> ResponsesStreamTranslator:
    return ResponsesStreamTranslator(request=REQUEST, response_id=RID, created_at=1_700_000_001)


def translate(chunks: list[bytes], *, split: int = 0) -> tuple[bytes, ResponsesStreamTranslator]:
    """The client's bytes for upstream `chunks` (re-cut every `split` bytes when given)."""
    whole = b"".join(chunks)
    pieces = [whole[i : i + split] for i in range(0, len(whole), split)] if split else chunks
    t = translator()
    return b"".join(t.feed(piece) for piece in pieces) + t.finish(), t


def accumulated(events: list[JSON]) -> JSON:
    """The Response the SDK's own stream machinery builds from `events`."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for payload in events:
        for handled in state.handle_event(EVENTS.validate_python(payload)):
            if handled.type in ("response.completed", "response.incomplete"):
                final = handled.response
    assert final is not None
    dumped: JSON = final.model_dump(mode="json", exclude_none=True)
    return dumped


def without_parsed(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: without_parsed(v)
            for k, v in value.items()
            if k not in ("parsed", "parsed_arguments")
        }
    if isinstance(value, list):
        return [without_parsed(v) for v in value]
    return value


def test_text_and_two_calls_stream_as_the_api_does_and_accumulate_to_the_json_answer() -> None:
    stream, t = translate(TOOL_STREAM)
    events = events_of(stream)
    kinds = [e["type"] for e in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.function_call_arguments.delta") == 3
    assert kinds.count("response.output_item.done") == 3
    final = events[-1]["response"]
    valid_response(final)
    assert final["usage"]["input_tokens"] == USAGE["prompt_tokens"]
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 800
    expected = chat_response_to_response(
        TOOL_ANSWER, request=REQUEST, response_id=RID, created_at=1_700_000_001
    )
    assert final == expected
    assert without_parsed(accumulated(events)) == valid_and_dumped(expected)
    assert t.done and t.response == expected
    assert t.usage is not None and t.usage.cached_tokens == 800


def valid_and_dumped(response: JSON) -> JSON:
    from openai.types.responses import Response

    dumped: JSON = Response.model_validate(response).model_dump(mode="json", exclude_none=True)
    return dumped


@given(st.integers(1, 40))
def test_the_same_events_whatever_the_upstream_chunking(split: int) -> None:
    assert translate(TOOL_STREAM, split=split)[0] == translate(TOOL_STREAM)[0]


def test_interleaved_parallel_call_fragments_go_to_their_own_items() -> None:
    chunks = [
        chunk({"tool_calls": [call(0, "call_a", "Read", '{"a":')]}),
        chunk({"tool_calls": [call(1, "call_b", "Bash", '{"b":')]}),
        chunk({"tool_calls": [call(0, args="1}")]}),
        chunk({"tool_calls": [call(1, args="2}")]}),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    events = events_of(translate(chunks)[0])
    final = events[-1]["response"]
    assert [i["arguments"] for i in final["output"]] == ['{"a":1}', '{"b":2}']
    assert [i["arguments"] for i in accumulated(events)["output"]] == ['{"a":1}', '{"b":2}']


def test_a_custom_tools_call_streams_its_input_whole_at_the_end() -> None:
    chunks = [
        chunk({"tool_calls": [call(0, "call_p", "apply_patch", '{"input":')]}),
        chunk({"tool_calls": [call(0, args=' "*** Begin Patch"}')]}),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    events = events_of(translate(chunks)[0])
    deltas = [e for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert [d["delta"] for d in deltas] == ["*** Begin Patch"]
    item = events[-1]["response"]["output"][0]
    assert item["type"] == "custom_tool_call" and item["input"] == "*** Begin Patch"
    assert accumulated(events)["output"][0]["input"] == "*** Begin Patch"


def test_a_length_cut_ends_with_response_incomplete() -> None:
    chunks = [chunk({"content": "Once"}), chunk({}, "length"), b"data: [DONE]\n\n"]
    events = events_of(translate(chunks)[0])
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert accumulated(events)["status"] == "incomplete"


def test_a_stream_cut_short_or_an_in_band_error_fails_the_response() -> None:
    cut, t = translate([chunk({"content": "Once"})])
    events = events_of(cut)
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"] == {"code": "server_error", "message": CUT_SHORT}
    assert t.response is None and t.feed(chunk({"content": "more"})) == b""
    error = b'data: {"error": {"message": "too long", "code": "context_length_exceeded"}}\n\n'
    events = [e for e in events_of(translate([error])[0])]
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    assert events[-1]["response"]["error"]["code"] == "context_length_exceeded"


def test_nothing_before_the_finish_reason_is_an_end_and_done_is_idempotent() -> None:
    t = translator()
    t.feed(chunk({"content": "Hi"}))
    assert t.feed(b"data: [DONE]\n\n") == b""  # no finish_reason yet: not an end
    t.feed(chunk({}, "stop"))
    end = t.feed(b"data: [DONE]\n\n")
    assert b"response.completed" in end
    assert t.finish() == b"" and t.fail("x") == b""


def test_an_empty_finish_reason_is_no_finish_reason() -> None:
    t = translator()
    start = t.feed(chunk({"content": "Hi"}))
    empty = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": ""}]}\n\n'
    assert t.feed(empty + b"data: [DONE]\n\n") == b""
    events = events_of(start + t.finish())
    assert events[-1]["response"]["error"] == {"code": "server_error", "message": CUT_SHORT}
