"""The compaction contract of the Responses API, the pure part: which request asks for a
compaction, and the one `compaction` item that answers it.

Two ways to ask, both answered with exactly one compaction item made by ctxproxy's own
summarizer (whatever the upstream), its `encrypted_content` a handle
(`proxy.inbound.compaction_handle`) to the stored summary:

    POST /v1/responses/compact     {model, input | previous_response_id, instructions, tools, …}
                                   → a `response.compaction` object whose `output` is
                                   [the compaction item] (`compacted_response`); Codex's first
                                   remote compaction, the Agents SDK's compaction session
    POST /v1/responses with a      a normal Responses request (streamed, as Codex sends it)
      `compaction_trigger` item    whose input ends with `{"type": "compaction_trigger"}`;
      (`is_compaction_request`)    Codex's remote compaction v2 (header
                                   `x-codex-beta-features: remote_compaction_v2`) fails unless
                                   the stream's output is exactly one compaction item and ends
                                   with `response.completed` (`compaction_response`, streamed by
                                   `proxy.inbound.responses_events.replay_response`)

Later requests carry the item; `handles_in` finds ctxproxy's, which the caller opens and expands
to the stored summary (`proxy.inbound.responses_request.responses_to_internal(summaries=…)`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.inbound.compaction_handle import is_handle
from proxy.inbound.responses_request import input_items
from proxy.inbound.responses_response import finished, item_id, response_shell, responses_usage
from proxy.types import JSON

TRIGGER = "compaction_trigger"
CODEX_FEATURES = "x-codex-beta-features"


def is_compaction_request(body: Mapping[str, Any]) -> bool:
    """Whether a `/v1/responses` body asks for a compaction (a `compaction_trigger` item)."""
    return any(isinstance(i, dict) and i.get("type") == TRIGGER for i in input_items(body))


def without_trigger(body: Mapping[str, Any]) -> JSON:
    """`body` without its `compaction_trigger` items: the conversation to summarize."""
    items = [i for i in input_items(body) if not (isinstance(i, dict) and i.get("type") == TRIGGER)]
    return {**body, "input": items}


def handles_in(body: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(input index, handle) of each compaction item of ctxproxy's in the body's input."""
    found: list[tuple[int, str]] = []
    for index, item in enumerate(input_items(body)):
        if isinstance(item, dict) and item.get("type") == "compaction":
            token = item.get("encrypted_content")
            if is_handle(token):
                found.append((index, token))
    return found


def compaction_item(handle: str, *, response_id: str) -> JSON:
    """The one compaction item answering a compaction request."""
    return {"id": item_id(response_id, "cmp", 0), "type": "compaction", "encrypted_content": handle}


def compaction_response(
    request: Mapping[str, Any], *, item: JSON, response_id: str, created_at: int, usage: Any = None
) -> JSON:
    """The Response answering a `compaction_trigger` request: its output is `item` alone.
    `usage`: the summarizer call's (chat-completions usage), if any."""
    shell = response_shell(request, response_id=response_id, created_at=created_at)
    return finished(shell, [item], finish_reason="stop", usage=usage)


def compacted_response(*, item: JSON, response_id: str, created_at: int, usage: Any = None) -> JSON:
    """The answer of `POST /v1/responses/compact`: a `response.compaction` object."""
    return {
        "id": response_id,
        "object": "response.compaction",
        "created_at": created_at,
        "output": [item],
        "usage": responses_usage(usage),
    }
