"""`proxy.engine.miss`: the cache facts a request records, and its miss's cause against the
previous request's facts (read back from the session's state as the store returns them)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from proxy.engine.miss import cache_miss
from proxy.engine.pipeline import draft_from_body
from proxy.engine.prepared import Prepared, tally
from proxy.types import CacheStyle, SessionState, StageReport, Turn
from proxy.usage import Usage

SYSTEM = {"role": "system", "content": "Client rules."}
HISTORY = [
    {"role": "user", "content": "first"},
    {"role": "assistant", "content": "one"},
    {"role": "user", "content": "second"},
]
BOOT = {"role": "system", "content": "ctxproxy bootstrap v1"}


def prepared(
    history: list[dict[str, Any]],
    *,
    state: Mapping[str, str | int | float] | None = None,
    now: float = 100.0,
    boot: dict[str, Any] = BOOT,
    covers: int = 0,
    pruned: int = 0,
    style: CacheStyle = "anthropic",
    tools: list[dict[str, Any]] | None = None,
) -> Prepared:
    body: dict[str, Any] = {"model": "m", "messages": [SYSTEM, *history]}
    if tools is not None:
        body["tools"] = tools
    fields = MappingProxyType({k: str(v) for k, v in (state or {}).items()})  # as Redis has them
    turn = Turn(
        "t", "s", "m", now=now, state=SessionState(fields=fields), cache_style=style,
        client=draft_from_body(body),
    )  # fmt: skip
    reports = (StageReport("prune", MappingProxyType({"pruned": pruned})),)
    return Prepared(
        turn=turn,
        body={"messages": [boot, SYSTEM, *history]},
        reports=reports,
        lineage="",
        threshold=0,
        covers=covers,
        tally=tally(reports),
    )


FIRST_USAGE = Usage(5000, 10, cached_tokens=0, cache_creation_tokens=5000)


def after_first(**kw: Any) -> Mapping[str, str | int | float]:
    return cache_miss(prepared(HISTORY, **kw), FIRST_USAGE, cache_ttl_s=300.0).fields


def test_the_first_request_records_its_facts_and_is_no_miss() -> None:
    miss = cache_miss(prepared(HISTORY), FIRST_USAGE, cache_ttl_s=300.0)
    assert miss.cause is None
    assert miss.fields["cache_written_tokens"] == 5000 and miss.fields["client_messages"] == 3


def test_an_extended_history_that_reads_what_was_left_is_no_miss() -> None:
    longer = [*HISTORY, {"role": "assistant", "content": "two"}, {"role": "user", "content": "3"}]
    usage = Usage(5200, 10, cached_tokens=5000, cache_creation_tokens=200)
    miss = cache_miss(prepared(longer, state=after_first()), usage, cache_ttl_s=300.0)
    assert miss.cause is None and "last_miss_cause" not in miss.fields


FELL = Usage(5200, 10, cached_tokens=1000, cache_creation_tokens=4200)


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"now": 500.0}, "ttl"),  # idle 400 s > 300 s: whatever else changed
        ({"history": [HISTORY[0], {"role": "user", "content": "edited"}]}, "client"),
        ({"tools": [{"type": "function", "function": {"name": "new"}}]}, "client"),
        ({"boot": {"role": "system", "content": "ctxproxy bootstrap v2"}}, "bootstrap"),
        ({"covers": 2}, "compaction"),
        ({"pruned": 3}, "prune"),
        ({}, "unknown"),
    ],
)
def test_each_cause_of_a_miss(change: dict[str, Any], cause: str) -> None:
    history = change.pop("history", [*HISTORY, {"role": "assistant", "content": "two"}])
    current = prepared(history, state=after_first(), **change)
    miss = cache_miss(current, FELL, cache_ttl_s=300.0)
    assert miss.cause == cause
    assert miss.fields["last_miss_cause"] == cause
    assert (miss.fields["last_miss_read"], miss.fields["last_miss_expected"]) == (1000, 5000)


def test_openai_style_expects_the_whole_prompt_in_its_steps() -> None:
    state = after_first(style="openai")
    usage = Usage(5200, 10, cached_tokens=4992)  # 1,024 + 31 steps of 128: all of 5,000
    assert (
        cache_miss(prepared(HISTORY, state=state, style="openai"), usage, cache_ttl_s=600).cause
        is None
    )
    usage = Usage(5200, 10, cached_tokens=4864)
    assert (
        cache_miss(prepared(HISTORY, state=state, style="openai"), usage, cache_ttl_s=600).cause
        == "unknown"
    )


def test_a_request_without_usage_records_nothing() -> None:
    assert cache_miss(prepared(HISTORY, state=after_first()), None, cache_ttl_s=300.0).fields == {}
