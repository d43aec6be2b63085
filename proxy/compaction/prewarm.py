"""The request that warms a provider's prompt cache after a background compaction. Pure.

After a background compaction (async mode) the new summary is stored, and the session's next
request is the first to carry the new prefix: it pays the cache write (1.25x input on Anthropic)
where it would have read (0.1x). A prewarm sends that prefix once, right away, asking for one
output token, so the next request reads it. It does not make the session cheaper: the prewarm
pays the write plus one output token and the next request pays a read on top (about 0.1x the
prefix more in money); it makes the next request's first token come sooner, and only when that
request comes within the cache's lifetime (else both pay a write). After a sync compaction, or
the compact-and-retry of an overflow, the request that compacted carries the new prefix itself
and writes the cache: a prewarm would only pay a second write, so there is none.

    prewarm_skip     why a finished background compaction gets no prewarm ("" when it gets one)
    client_request   the session's last client body, rebuilt from the compaction's job
    prewarm_body     the prepared body turned into the one-token request
    messages_prewarm the rendered Messages body turned into the one-token request
"""

from __future__ import annotations

from proxy.compaction.job import CompactionJob
from proxy.types import JSON

WARMABLE_STYLES = ("anthropic", "openai")
"""The `cache_style`s of upstreams with a prompt cache to warm."""

LEFT_OUT = ("stream", "stream_options", "max_tokens", "n")
"""Keys of the prepared body the prewarm does not send: it is answered whole, once, and its
output is capped by `max_completion_tokens` (which the Anthropic translation reads first)."""


def prewarm_skip(job: CompactionJob, *, cache_style: str, api: str, kind: str) -> str:
    """Why a done background compaction of `job` is not followed by a prewarm, or "" when it
    is: `no_cache` (the upstream caches no prompt), `responses_api` (the upstream is spoken
    to through `/responses`: the prewarm would warm the chat request's bytes, not the ones
    the session sends), `no_body` (the job holds no client body to rebuild), `credential`
    (the session's requests go with a credential the job does not hold: warming with another
    would warm another organisation's cache), `thinking` (see `asks_thinking`)."""
    if cache_style not in WARMABLE_STYLES:
        return "no_cache"
    if api == "responses":
        return "responses_api"
    if job.client_body is None:
        return "no_body"
    if not job.sending.same_key:
        return "credential"
    if job.sending.thinking or asks_thinking(job.client_body, kind=kind):
        return "thinking"
    return ""


def asks_thinking(body: JSON, *, kind: str) -> bool:
    """Whether the session's requests ask an Anthropic model to think: a `thinking` object
    other than disabled, or (to a `kind = "anthropic"` upstream, whose translation maps it)
    a `reasoning_effort`. Such a request gets no prewarm: its `max_tokens` must exceed the
    thinking budget (1,024 at least), so one token is refused, and the thinking parameters
    are part of what the cache keys messages on, so a prewarm without them warms a prefix
    the next request does not read; a valid one would pay for up to the budget in output."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") != "disabled":
        return True
    return kind == "anthropic" and body.get("reasoning_effort") not in (None, "none")


def client_request(job: CompactionJob) -> JSON:
    """The client's body the compaction was started by: its keys, its system messages and its
    history (the next request starts with exactly these). Copies nothing of the job."""
    return {**(job.client_body or {}), "messages": [*job.client_system, *job.client_history]}


def prewarm_body(prepared: JSON) -> JSON:
    """`prepared` (the engine's outgoing body for `client_request`) as a one-token request:
    not streamed, `max_completion_tokens` 1 (OpenAI chat's field; the Anthropic translation
    sends it as `max_tokens`), every other key as prepared — tools, `prompt_cache_key`,
    cache markers — so that the prefix is the same bytes the next request sends."""
    body = {key: value for key, value in prepared.items() if key not in LEFT_OUT}
    body["max_completion_tokens"] = 1
    return body


def messages_prewarm(rendered: JSON) -> JSON:
    """A Messages body rendered as the route renders it, as a one-token request: not
    streamed, `max_tokens` 1, every other key as rendered."""
    body = {key: value for key, value in rendered.items() if key != "stream"}
    body["max_tokens"] = 1
    return body
