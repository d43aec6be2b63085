"""Anthropic breakpoints: which of L, S and C are placed, and the minimum cacheable prefix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.stages.breakpoints import min_cacheable_tokens, place_breakpoints
from proxy.stages.cache import CacheSettings
from proxy.types import JSON, SystemPrompt
from tests.factories import assistant, call, system, turn, user

EPHEMERAL = {"type": "ephemeral"}


def part(text: str, marker: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": text, **({"cache_control": marker} if marker else {})}


def merged_body(static: str, client: str, *history: Any) -> JSON:
    """A body whose first message is the rendered system message (static part, client part)."""
    head = {"role": "system", "content": [part(static), part(client)]}
    return {"model": "claude-sonnet-4-5", "messages": [head, *history]}


def place(body: JSON, static: str, client: str, **settings: Any) -> tuple[JSON, int]:
    prompt = SystemPrompt(static=static, client=(system(client),))
    cfg = CacheSettings(**settings)
    return place_breakpoints(body, prompt, 1, turn(model=body["model"]), cfg, client_marked=True)


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-sonnet-4-5-20250929", 1024),
        ("anthropic/claude-opus-4.6", 4096),
        ("claude-haiku-4-5", 4096),
        ("claude-3-5-haiku-latest", 2048),
        ("claude-3-haiku-20240307", 2048),
        ("claude-opus-4-1", 1024),
        ("some-other-model", 1024),
    ],
)
def test_minimum_cacheable_tokens_by_model_family(model: str, tokens: int) -> None:
    assert min_cacheable_tokens(model, settings=CacheSettings()) == tokens
    assert min_cacheable_tokens(model, settings=CacheSettings(min_cacheable_tokens=7)) == 7


def test_placement_marks_last_message_static_and_client_parts_on_a_copy() -> None:
    body = merged_body("S", "client", user("hi"), assistant("q"))
    before = copy.deepcopy(body)
    out, added = place(body, "S", "client", min_cacheable_tokens=0)
    assert body == before
    assert added == 3
    assert out["messages"][0]["content"] == [part("S", EPHEMERAL), part("client", EPHEMERAL)]
    assert out["messages"][1] == user("hi")
    assert out["messages"][2] == {"role": "assistant", "content": [part("q", EPHEMERAL)]}


def test_placement_skips_a_breakpoint_whose_own_prefix_is_under_the_minimum() -> None:
    # a 1-token minimum is 4 chars: the static part alone (1 char) is too short, the static and
    # client parts together (7 chars) and the whole history are not
    body = merged_body("S", "client", user("q"))
    out, added = place(body, "S", "client", min_cacheable_tokens=1)
    assert added == 2
    assert out["messages"][0]["content"] == [part("S"), part("client", EPHEMERAL)]
    assert out["messages"][1]["content"] == [part("q", EPHEMERAL)]


def test_placement_puts_the_last_breakpoint_on_the_last_message_with_content() -> None:
    body = merged_body("S", "client", user("q"), assistant(None, call("c1")))
    out, _ = place(body, "S", "client", min_cacheable_tokens=0)
    assert out["messages"][1]["content"] == [part("q", EPHEMERAL)]
    assert out["messages"][2] == assistant(None, call("c1"))


def test_placement_fills_only_the_slots_the_clients_markers_leave() -> None:
    history = [{"role": "user", "content": [part(str(i), EPHEMERAL) for i in range(3)]}, user("q")]
    body = merged_body("S", "client", *history)
    out, added = place(body, "S", "client", min_cacheable_tokens=0)
    assert added == 1  # L only: S and C come after it in priority
    assert out["messages"][0]["content"] == [part("S"), part("client")]
    assert out["messages"][1] == history[0]
    assert out["messages"][2]["content"] == [part("q", EPHEMERAL)]
