"""The fake OpenAI upstream's `/v1/responses`: a Response for a scripted `Reply` (its text as
one message, its tool calls as `function_call` items), or the API's event sequence for it;
`previous_response_id` resolved from the responses it served (unknown: the API's 400)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

JSON = dict[str, Any]
_ids = itertools.count(1)


async def responses_answer(
    request: web.Request,
    body: JSON,
    reply: Any,
    served: dict[str, JSON],
    *,
    usage: Callable[[JSON, Any], JSON],
) -> web.StreamResponse:
    if reply.status != 200:
        error = reply.error or {
            "message": "scripted error",
            "type": "server_error",
            "param": None,
            "code": None,
        }
        return web.json_response({"error": error}, status=reply.status, headers=reply.headers)
    previous = body.get("previous_response_id")
    if previous is not None and previous not in served:
        error = {
            "message": f"Previous response with id '{previous}' not found.",
            "type": "invalid_request_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        }
        return web.json_response({"error": error}, status=400)
    response = _response(body, reply, usage)
    served[response["id"]] = response
    if not body.get("stream"):
        return web.json_response(response, headers=reply.headers)
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", **reply.headers})
    await stream.prepare(request)
    for name, payload in _events(response):
        await stream.write(
            b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
        )
    await stream.write_eof()
    return stream


def _response(body: JSON, reply: Any, usage: Callable[[JSON, Any], JSON]) -> JSON:
    ident = f"resp_fake{next(_ids)}"
    output: list[JSON] = []
    reasoning = getattr(reply, "reasoning", None)
    if reasoning is not None:  # a reasoning model's item, before the one it belongs to
        output.append({"type": "reasoning", "id": f"rs_{ident}", "summary": [],
                       "encrypted_content": reasoning})  # fmt: skip
    if reply.tool_calls:
        for call in reply.tool_calls:
            output.append(
                {
                    "id": f"fc_{call['id']}",
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                    "status": "completed",
                }
            )
    else:
        part = {"type": "output_text", "text": reply.content, "annotations": []}
        output.append(
            {
                "id": f"msg_{ident}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    chat = usage({"messages": [body.get("instructions"), body.get("input")]}, reply)
    return {
        "id": ident,
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": body.get("model", "fake"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "metadata": body.get("metadata") or {},
        "previous_response_id": body.get("previous_response_id"),
        "usage": {
            "input_tokens": chat["prompt_tokens"],
            "input_tokens_details": {
                "cached_tokens": chat["prompt_tokens_details"]["cached_tokens"],
                "cache_write_tokens": 0,
            },
            "output_tokens": chat["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": chat["total_tokens"],
        },
    }


def response_events(response: JSON) -> bytes:
    """A Response's whole event stream, as this fake streams it."""
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
        for name, payload in _events(response)
    )


def _events(response: JSON) -> list[tuple[str, JSON]]:
    events: list[tuple[str, JSON]] = []
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    events += [
        ("response.created", {"response": start}),
        ("response.in_progress", {"response": start}),
    ]
    for index, item in enumerate(response["output"]):
        where = {"output_index": index}
        if item["type"] == "reasoning":
            events.append(("response.output_item.added", {**where, "item": item}))
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                (
                    "response.output_item.added",
                    {**where, "item": {**item, "content": [], "status": "in_progress"}},
                )
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            at = {**where, "item_id": item["id"], "content_index": 0}
            events.append(("response.content_part.added", {**at, "part": part}))
            for n in range(0, len(text), 5):
                events.append(
                    ("response.output_text.delta", {**at, "delta": text[n : n + 5], "logprobs": []})
                )
            events.append(("response.output_text.done", {**at, "text": text, "logprobs": []}))
            events.append(("response.content_part.done", {**at, "part": item["content"][0]}))
        else:
            events.append(
                (
                    "response.output_item.added",
                    {**where, "item": {**item, "arguments": "", "status": "in_progress"}},
                )
            )
            at = {**where, "item_id": item["id"]}
            events.append(
                ("response.function_call_arguments.delta", {**at, "delta": item["arguments"]})
            )
            events.append(
                (
                    "response.function_call_arguments.done",
                    {**at, "arguments": item["arguments"], "name": item["name"]},
                )
            )
        events.append(("response.output_item.done", {**where, "item": item}))
    events.append(("response.completed", {"response": response}))
    return [
        (name, {"type": name, "sequence_number": n, **payload})
        for n, (name, payload) in enumerate(events)
    ]
