"""Whether the outgoing request offers the recall tool (issue 18), and with what. Pure.

The tool is offered when the request carries a cut (`proxy.recall.index.has_cut`), or when its
session was offered it before (the session's `recall_offered` field): the tool list is part of the
cached prefix, so once there it stays, the same bytes at the same place. The rules that withhold it
(`tool_choice: "none"`, a client tool of the same name...) are `proxy.recall.tool.offer_recall`'s;
each is counted, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from proxy.recall.index import has_cut
from proxy.recall.tool import RecallSettings, offer_recall, with_recall_tool
from proxy.types import JSON, SessionState

OFFERED_FIELD = "recall_offered"
"""The session field set once its request was offered the tool."""


class RecallOffer(NamedTuple):
    """What the request was offered: `offered`, else `reason` (empty when recall is off or
    nothing was cut); `cut`: the request carries a cut (not looked for in a session offered the
    tool before: it keeps it anyway)."""

    offered: bool = False
    reason: str = ""
    cut: bool = False


def offered_body(
    body: JSON,
    outgoing: JSON,
    *,
    settings: RecallSettings,
    state: SessionState,
    covers: int,
    looping: bool = True,
) -> tuple[JSON, RecallOffer]:
    """`outgoing` (the prepared body of the client's `body`) with the recall tool at the end of
    its tools when it is offered, and the offer. Nothing is computed when recall is off, nor
    without `looping` (no recall loop around the call would answer the tool)."""
    if not settings.enabled or not looping:
        return outgoing, RecallOffer()
    before = state.int_field(OFFERED_FIELD) == 1
    cut = not before and has_cut(body["messages"], outgoing["messages"], covers=covers)
    offer = offer_recall(body, settings=settings, cut=bool(cut), offered_before=before)
    if not offer.add:
        reason = "" if offer.reason == "nothing_cut" else offer.reason
        return outgoing, RecallOffer(False, reason if cut or before else "", cut)
    return with_recall_tool(outgoing, settings=settings), RecallOffer(True, "", cut)


def prefix_with_tool(
    prefix: JSON, client: Mapping[str, Any], *, settings: RecallSettings, state: SessionState
) -> JSON:
    """A summarizer's `prefix` body (rendered from the request whose `client` keys, tools
    included, it keeps) with the recall tool when the session's requests carry it: the same
    prefix as theirs, so a provider cache serves the summary. As it is otherwise."""
    if not settings.enabled or state.int_field(OFFERED_FIELD) != 1:
        return prefix
    if not offer_recall(client, settings=settings, cut=False, offered_before=True).add:
        return prefix
    return with_recall_tool(prefix, settings=settings)
