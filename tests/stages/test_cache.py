"""Cache layout: system assembly per cache_style, breakpoints, TTL order, minimum lengths."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from proxy.content import find_body_markers, find_cache_markers
from proxy.server.body import scanned
from proxy.stages.cache import (
    CacheSettings,
    min_cacheable_tokens,
    place_breakpoints,
    render_request,
    render_with_markers,
)
from proxy.stages.marker import Ttl
from proxy.types import JSON, Draft, Message, SystemPrompt
from tests.factories import assistant, call, draft, system, tool, turn, user

LONG = "x" * 8000  # 2,000 estimated tokens: over the 1,024 minimum of most models
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
ANY_LENGTH = CacheSettings(min_cacheable_tokens=0)


def with_system(d: Draft, *, static: str = "", dynamic: str = "") -> Draft:
    return d._replace(system=d.system._replace(static=static, dynamic=dynamic))


def user_parts(parts: list[dict[str, Any]]) -> Message:
    return {"role": "user", "content": parts}


def marked(text: str, marker: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": marker or EPHEMERAL}


def render(d: Draft, style: str = "anthropic", cfg: CacheSettings = ANY_LENGTH, **kw: Any) -> Any:
    body, report = render_request(d, turn(cache_style=style, **kw), settings=cfg)
    return body, report


def markers_of(body: Any) -> list[Any]:
    out = []
    for path in find_cache_markers(body):
        node = body
        for key in path:
            node = node[key]
        out.append(node)
    return out


# --- openai / none -------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["openai", "none"])
def test_plain_styles_join_static_client_dynamic_into_one_system_string(style: str) -> None:
    d = with_system(draft([system("a"), system("b"), user("hi")]), static="S", dynamic="D")
    body, report = render(d, style)
    assert body["messages"] == [{"role": "system", "content": "S\n\na\n\nb\n\nD"}, user("hi")]
    assert report.counters["breakpoints"] == 0


def test_plain_style_keeps_client_parts_as_sent_when_the_client_used_parts() -> None:
    part = {"type": "text", "text": "rules", "x-extra": 1}
    d = with_system(draft([{"role": "developer", "content": [part]}, user("hi")]), static="S")
    body, _ = render(d, "openai")
    assert body["messages"][0] == {
        "role": "developer",
        "content": [{"type": "text", "text": "S"}, part],
    }


@pytest.mark.parametrize("style", ["openai", "none", "anthropic"])
def test_without_static_or_dynamic_client_system_messages_pass_through(style: str) -> None:
    sent = [system("one"), {"role": "developer", "content": "two", "name": "n"}, user("hi")]
    body, _ = render(draft(copy.deepcopy(sent)), style, CacheSettings())
    assert body["messages"] == sent


def test_body_keys_are_kept_and_messages_replaced() -> None:
    d = draft([user("hi")], temperature=0.2, x_vendor={"a": 1})
    body, _ = render(d, "openai")
    assert body == {
        "model": "gpt-4o",
        "temperature": 0.2,
        "x_vendor": {"a": 1},
        "messages": [user("hi")],
    }


def test_prompt_cache_key_is_per_session_and_only_when_configured() -> None:
    d = draft([user("hi")])
    on = CacheSettings(send_prompt_cache_key=True)
    key = render(d, "openai", on, tenant="acme", session="s1")[0]["prompt_cache_key"]
    assert key == render(d, "openai", on, tenant="acme", session="s1")[0]["prompt_cache_key"]
    assert key.startswith("ctxproxy-") and len(key) == len("ctxproxy-") + 32
    assert "acme" not in key and "s1" not in key
    other = render(d, "openai", on, tenant="acme", session="s2")[0]["prompt_cache_key"]
    assert other != key
    assert render(d, "openai", on, tenant="bee", session="s1")[0]["prompt_cache_key"] != key
    assert "prompt_cache_key" not in render(d, "openai", CacheSettings())[0]
    assert "prompt_cache_key" not in render(d, "none", on)[0]
    own = draft([user("hi")], prompt_cache_key="mine")
    assert render(own, "openai", on)[0]["prompt_cache_key"] == "mine"


# --- anthropic ------------------------------------------------------------------------------


def test_anthropic_marks_static_client_part_and_last_message() -> None:
    d = with_system(
        draft([system("client"), user("hi"), assistant("yo"), user("q")]), static="S", dynamic="D"
    )
    body, report = render(d)
    assert body["messages"][0] == {
        "role": "system",
        "content": [marked("S"), marked("client"), {"type": "text", "text": "D"}],
    }
    assert body["messages"][1:3] == [user("hi"), assistant("yo")]
    assert body["messages"][3] == {"role": "user", "content": [marked("q")]}
    assert report.counters == {"breakpoints": 3, "breakpoints_added": 3, "static_chars": 1}


def test_anthropic_one_hour_ttl_is_written_on_our_markers() -> None:
    d = with_system(draft([user("q")]), static="S")
    body, _ = render(d, cfg=CacheSettings(ttl="1h", min_cacheable_tokens=0))
    assert markers_of(body) == [marked("S", HOUR), marked("q", HOUR)]


def test_anthropic_marks_last_client_system_message_when_nothing_is_added() -> None:
    body, _ = render(draft([system("a"), system("b"), user("q")]))
    assert body["messages"][:2] == [system("a"), {"role": "system", "content": [marked("b")]}]


def test_last_message_breakpoint_skips_messages_without_content() -> None:
    d = draft([user("q"), tool("c1", "out"), assistant(None, call("c2"))])
    body, _ = render(d)
    assert body["messages"][1] == {**tool("c1", "out"), "cache_control": EPHEMERAL}
    assert body["messages"][2] == assistant(None, call("c2"))


def test_last_tool_result_is_marked_at_message_level_unless_the_client_marked_a_part() -> None:
    body, _ = render(draft([user("q"), tool("c1", [{"type": "text", "text": "out"}])]))
    assert body["messages"][1]["cache_control"] == EPHEMERAL
    assert body["messages"][1]["content"] == [{"type": "text", "text": "out"}]
    sent = tool("c1", [marked("out"), {"type": "text", "text": "more"}])
    body, report = render(draft([user("q"), sent]))
    assert body["messages"][1] == sent
    assert report.counters["breakpoints_added"] == 0


def test_client_markers_are_kept_and_counted_ours_drop_client_part_first() -> None:
    history = [user_parts([marked("a")]), assistant("b"), user_parts([marked("c")]), user("q")]
    d = with_system(draft([system("client"), *history]), static="S")
    body, report = render(d)
    assert markers_of(body) == [marked("S"), marked("a"), marked("c"), marked("q")]
    assert report.counters["breakpoints_added"] == 2


def test_with_three_client_markers_only_the_last_message_is_marked() -> None:
    history = [user_parts([marked("a"), marked("b"), marked("c")]), user("q")]
    body, _ = render(with_system(draft([system("client"), *history]), static="S"))
    assert markers_of(body) == [marked("a"), marked("b"), marked("c"), marked("q")]


@pytest.mark.parametrize("count", [4, 5])
def test_client_at_or_over_the_limit_gets_no_marker_of_ours(count: int) -> None:
    sent = [user_parts([marked(str(i)) for i in range(count)]), user("q")]
    body, report = render(with_system(draft(copy.deepcopy(sent)), static="S"))
    assert body["messages"][1:] == sent
    assert report.counters["breakpoints"] == count
    assert report.counters["breakpoints_added"] == 0


def test_client_marker_on_the_last_message_is_not_doubled() -> None:
    sent = user_parts([{"type": "text", "text": "q"}, marked("end")])
    body, report = render(draft([copy.deepcopy(sent)]))
    assert body["messages"] == [sent]
    assert report.counters["breakpoints_added"] == 0


def test_message_level_client_marker_moves_onto_its_last_part_when_merged() -> None:
    sent = {"role": "system", "content": "client", "cache_control": EPHEMERAL}
    body, _ = render(with_system(draft([sent, user("q")]), static="S"), "openai")
    assert body["messages"][0]["content"] == [{"type": "text", "text": "S"}, marked("client")]


def test_one_hour_markers_stay_before_a_client_five_minute_marker() -> None:
    history = [user_parts([marked("early")]), assistant("b"), user("q")]
    d = with_system(draft(history), static="S")
    body, _ = render(d, cfg=CacheSettings(ttl="1h", min_cacheable_tokens=0))
    assert markers_of(body) == [marked("S", HOUR), marked("early"), marked("q")]


def test_five_minute_markers_become_one_hour_before_a_client_one_hour_marker() -> None:
    history = [user_parts([marked("late", HOUR)]), user("q")]
    body, _ = render(with_system(draft(history), static="S"))
    assert markers_of(body) == [marked("S", HOUR), marked("late", HOUR), marked("q")]


def test_a_marker_that_fits_no_ttl_is_dropped() -> None:
    # a client 5m marker before and a client 1h marker (top level: the last block) after
    d = draft([user_parts([marked("a")]), user("q")], cache_control=HOUR)
    body, report = render(d)
    assert body["messages"][1] == user("q")
    assert report.counters == {"breakpoints": 2, "breakpoints_added": 0, "static_chars": 0}


def test_no_marker_on_a_prefix_below_the_minimum_cacheable_length() -> None:
    d = with_system(draft([user("q")]), static="short")
    body, report = render(d, cfg=CacheSettings(), model="claude-sonnet-4-5")
    assert report.counters["breakpoints"] == 0
    assert body["messages"][1] == user("q")


def test_long_static_prefix_is_marked_and_short_tail_counts_the_whole_prefix() -> None:
    d = with_system(draft([user("q")]), static=LONG)
    body, _ = render(d, cfg=CacheSettings(), model="claude-sonnet-4-5")
    assert markers_of(body) == [marked(LONG), marked("q")]
    _, report = render(d, cfg=CacheSettings(), model="claude-haiku-4-5")  # 4,096 minimum
    assert report.counters["breakpoints"] == 0


def test_settings_reject_unknown_ttl_and_negative_minimum() -> None:
    with pytest.raises(ValueError, match="ttl"):
        CacheSettings(ttl="10m")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_cacheable"):
        CacheSettings(min_cacheable_tokens=-1)


# --- properties -----------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["openai", "anthropic", "none"])
def test_static_prefix_is_byte_identical_across_100_renders(style: str) -> None:
    base = draft([system("client rules"), user("hi")])
    firsts = set()
    for i in range(100):
        d = with_system(base, static=LONG, dynamic=f"<memory_index>fact {i}</memory_index>")
        body, _ = render(d, style, CacheSettings())
        content = body["messages"][0]["content"]
        firsts.add(repr(content[0]) if isinstance(content, list) else content[: len(LONG)])
    assert len(firsts) == 1


texts = st.text(alphabet="abc xyz", min_size=0, max_size=12)
ttls = st.sampled_from([None, "5m", "1h"])


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Client histories with text, parallel tool calls and client markers on some parts."""
    out: list[Message] = []
    for _ in range(draw(st.integers(0, 3))):
        out.append(system(draw(texts)))
    for n in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "tools":
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            out.append(assistant(None, *(call(i) for i in ids)))
            out += [tool(i, draw(texts)) for i in ids]
            continue
        if draw(st.booleans()):
            parts = []
            for _ in range(draw(st.integers(1, 3))):
                part: dict[str, Any] = {"type": "text", "text": draw(texts)}
                ttl = draw(ttls)
                if draw(st.booleans()):
                    part["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
                parts.append(part)
            out.append({"role": kind, "content": parts})
        else:
            out.append({"role": kind, "content": draw(texts)})
    return out


@settings(max_examples=200, deadline=None)
@given(
    histories(),
    texts,
    texts,
    st.sampled_from(["openai", "anthropic", "none"]),
    st.sampled_from(["5m", "1h"]),
)
def test_rendering_bounds_markers_keeps_the_clients_and_mutates_nothing(
    messages: list[Message], static: str, dynamic: str, style: str, ttl: Ttl
) -> None:
    d = with_system(draft(messages), static=static, dynamic=dynamic)
    before = copy.deepcopy(d)
    cfg = CacheSettings(ttl=ttl, min_cacheable_tokens=0)
    body, report = render(d, style, cfg)
    assert d == before
    client = markers_of({"messages": messages})
    found = markers_of(body)
    assert report.counters["breakpoints"] == len(found)
    if len(client) <= 4:
        assert len(found) <= 4
    if style != "anthropic":
        assert report.counters["breakpoints_added"] == 0
    assert all(any(m is c for m in found) for c in client)
    order = [m["cache_control"].get("ttl", "5m") for m in found]
    client_order = [m["cache_control"].get("ttl", "5m") for m in client]
    if client_order == sorted(client_order, key=lambda t: t != "1h"):
        assert order == sorted(order, key=lambda t: t != "1h")
    assert render(d, style, cfg)[0] == body


_JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_MARKER = st.sampled_from([None, {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])
_KEYS = st.sampled_from(["cache_control", "type", "text", "name", "x"])
_JSON_VALUES = st.recursive(
    _JSON_LEAVES | _MARKER,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=25,
)


_TOP_KEYS = st.sampled_from(["messages", "tools", "cache_control", "meta"])


@settings(max_examples=300)
@given(st.dictionaries(_TOP_KEYS, _JSON_VALUES))
def test_body_markers_are_the_walks_markers(body: dict[str, Any]) -> None:
    assert find_body_markers(body) == find_cache_markers(body)


def test_body_markers_walk_what_is_not_plain_json() -> None:
    body = {"tools": [{1: "a", "cache_control": EPHEMERAL}], "extra": ({"cache_control": HOUR},)}
    assert find_body_markers(body) == find_cache_markers(body) == [("tools", 0)]


@settings(max_examples=200, deadline=None)
@given(histories(), texts, st.sampled_from(["openai", "anthropic", "none"]))
def test_an_unmarked_draft_renders_the_same_without_the_marker_search(
    messages: list[Message], static: str, style: str
) -> None:
    d = with_system(draft(messages), static=static)
    marked = scanned({"messages": messages}).marked
    assume(not marked)
    t = turn(cache_style=style)
    searched = render_with_markers(d, t, settings=ANY_LENGTH)
    assert render_with_markers(d, t, settings=ANY_LENGTH, client_marked=False) == searched


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
