"""Why a request's provider-cache reads fell: the facts `proxy.cost.misses` classifies, read from
the session's state (the previous request's) and from this request, and written back. Pure.

Recorded per answered request, in the session's fields:
    cache_at, cache_prompt_tokens,      when it was sent (the engine's clock) and the usage it
    cache_read_tokens,                  reported: prompt, cache reads, cache writes
    cache_written_tokens
    client_chain, client_messages       the chained hash (`proxy.history`) of the client's own
                                        history, salted with its system prompt and tools, and
                                        its length: does the next history extend this one?
    bootstrap_digest                    a digest of the system messages sent (ctxproxy's
                                        bootstrap with the client's own): did it change?
    summary_covers                      which summary the request carried (its `covers`)
    answer_id                           the answer's id: the `previous_message_id` of the next
                                        request's provider diagnostics (where asked)
and, on a miss, `last_miss_cause`, `last_miss_at`, `last_miss_read` (tokens read),
`last_miss_expected` (what the previous request left in the cache) and `last_miss_provider`
(the provider's own reason, "" when it gave none). A provider reason on a request ctxproxy does
not count as a miss is recorded too (`last_miss_provider`, `last_miss_at`). A request without
usage (an error, a cut stream) records nothing: the previous one stays the reference.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from proxy.content import SYSTEM_ROLES
from proxy.cost.misses import MissCause, RequestFacts, cache_left, classify_miss
from proxy.engine.prepared import Prepared
from proxy.history import chained, history_salt, message_digest
from proxy.types import SessionState
from proxy.usage import Usage

Fields = dict[str, str | int | float]


class Miss(NamedTuple):
    """The fields to record, and the cause when the request was a miss (None otherwise)."""

    fields: Fields
    cause: MissCause | None = None


def cache_miss(prepared: Prepared, usage: Usage | None, *, cache_ttl_s: float) -> Miss:
    """This request's cache facts and, against the previous request's, its miss's cause.
    `cache_ttl_s`: how long the provider keeps what the previous request cached."""
    if usage is None:
        return Miss({})
    turn = prepared.turn
    state = turn.state
    before = state.int_field("client_messages", -1)
    chain, earlier = client_chain(prepared, upto=before)
    fields: Fields = {
        "cache_at": turn.now,
        "cache_prompt_tokens": usage.prompt_tokens,
        "cache_read_tokens": usage.cached_tokens,
        "cache_written_tokens": usage.cache_creation_tokens,
        "client_chain": chain,
        "client_messages": len(turn.client.messages),
        "bootstrap_digest": bootstrap_digest(prepared),
        "summary_covers": prepared.covers,
    }
    if usage.answer_id:
        fields["answer_id"] = usage.answer_id
    if usage.provider_miss:
        fields.update(last_miss_provider=usage.provider_miss, last_miss_at=turn.now)
    previous = previous_facts(state)
    if previous is None:
        return Miss(fields)
    current = RequestFacts(
        at=turn.now,
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        written_tokens=usage.cache_creation_tokens,
        extends_previous=earlier is not None and earlier == state.fields.get("client_chain"),
        bootstrap_changed=fields["bootstrap_digest"] != state.fields.get("bootstrap_digest"),
        compacted=prepared.covers != state.int_field("summary_covers"),
        pruned=prepared.tally.stages.get("prune", {}).get("pruned", 0) > 0,
    )
    automatic = turn.cache_style == "openai"
    cause = classify_miss(previous, current, cache_ttl_s=cache_ttl_s, automatic=automatic)
    if cause is not None:
        fields.update(
            last_miss_cause=cause,
            last_miss_at=turn.now,
            last_miss_read=usage.cached_tokens,
            last_miss_expected=cache_left(previous, automatic=automatic),
            last_miss_provider=usage.provider_miss,
        )
    return Miss(fields, cause)


def previous_facts(state: SessionState) -> RequestFacts | None:
    """The previous answered request's facts, or None when the session has none recorded."""
    if "cache_at" not in state.fields:
        return None
    return RequestFacts(
        at=state.float_field("cache_at"),
        prompt_tokens=state.int_field("cache_prompt_tokens"),
        cached_tokens=state.int_field("cache_read_tokens"),
        written_tokens=state.int_field("cache_written_tokens"),
    )


def client_chain(prepared: Prepared, *, upto: int) -> tuple[str, str | None]:
    """(the hash of the client's whole history, the hash of its first `upto` messages or None
    when it has fewer), both salted with the tenant, the client's system prompt and its tools."""
    turn = prepared.turn
    tools = message_digest(turn.client.body.get("tools") or [])
    salt = history_salt(turn.tenant, turn.client.system.client) + hashlib.sha256(tools).hexdigest()
    hashes = [salt, *chained(salt, map(message_digest, turn.client.messages))]
    return hashes[-1], hashes[upto] if 0 <= upto < len(hashes) else None


def bootstrap_digest(prepared: Prepared) -> str:
    """A digest of the leading system messages of the body sent."""
    digest = hashlib.sha256()
    for message in prepared.body.get("messages") or ():
        if message.get("role") not in SYSTEM_ROLES:
            break
        digest.update(message_digest(message))
    return digest.hexdigest()[:32]
