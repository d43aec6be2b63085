"""Pruning: old tool results cut, sticky decisions, batching, the cache_control boundary."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from proxy.content import content_text, persisted_block
from proxy.stages import budgets as budgets_stage
from proxy.stages import prune
from proxy.stages.budgets import BudgetSettings, apply_budgets
from proxy.stages.prune import (
    COUNTERS,
    PruneSettings,
    decision_key,
    describes,
    has_cache_control,
    prune_tool_results,
    pruned_text,
    replay_decisions,
    select_candidates,
)
from proxy.types import Message, SessionState, StageReport
from tests.factories import assistant, call, draft, exchange, tool, turn, user
from tests.traces import TRACE_FILES

DEFAULTS = PruneSettings()
MARK = "...(truncated, original: {} chars)"


def pruned(
    messages: list[Message],
    decisions: Mapping[str, str] | None = None,
    *,
    now: float = 1_000.0,
    last: float | None = None,
    **settings: Any,
) -> tuple[list[Message], Any]:
    return prune_tool_results(
        messages,
        settings=replace(DEFAULTS, **settings),
        decisions=decisions or {},
        now=now,
        last_request_at=last,
    )


def cut(letter: str, size: int, keep: int = 200) -> str:
    """What pruning makes of a result of `size` times `letter`."""
    return letter * keep + MARK.format(size)


def history(*sizes: int, name: str = "bash") -> list[Message]:
    """One user turn, then one exchange per size (oldest first), result i made of letter i."""
    messages = [user("start")]
    for i, size in enumerate(sizes):
        messages += exchange(f"c{i}", chr(ord("a") + i) * size, name=name)
    return messages


def test_prune_cuts_the_third_newest_755_char_result_and_keeps_the_rest() -> None:
    messages = history(280, 755, 5_000, 9_000)
    out, report = pruned(messages)
    assert out[4]["content"] == "b" * 200 + MARK.format(755)
    assert out[2] is messages[2]  # 280 chars: under max_chars
    assert out[6] is messages[6] and out[8] is messages[8]  # the two newest, whatever their size
    assert report.decisions == {"c1": "b" * 200 + MARK.format(755)}
    assert report.counters == {
        "chars_pruned": 755 - len(out[4]["content"]),
        "pruned": 1,
        "replayed": 0,
        "deferred": 0,
    }


@pytest.mark.parametrize(("size", "cut"), [(300, False), (301, True), (755, True), (40_000, True)])
def test_prune_cuts_only_results_longer_than_max_chars(size: int, cut: bool) -> None:
    out, _ = pruned(history(size, 1, 1))
    assert (out[2]["content"] != "a" * size) is cut


def test_prune_touches_only_tool_messages() -> None:
    messages = [user("u" * 5_000), assistant("a" * 5_000), *history(1_000, 1, 1)]
    out, _ = pruned(messages)
    assert out[0] is messages[0] and out[1] is messages[1]
    assert all(o is m for o, m in zip(out, messages, strict=True) if m["role"] != "tool")


def test_prune_never_shrinks_excluded_tools() -> None:
    messages = history(1_000, 1_000, 1, 1)
    messages[1]["tool_calls"][0]["function"]["name"] = "load_skill"
    out, report = pruned(messages, exclude_tools=("load_skill",))
    assert out[2] is messages[2]
    assert set(report.decisions) == {"c1"}


def test_prune_replays_a_stored_decision_byte_for_byte_whatever_the_settings() -> None:
    messages = history(1_000, 1_000, 1, 1)
    first, report = pruned(messages)
    again, replay = pruned(messages, report.decisions, recent_keep=10, max_chars=100_000)
    assert again == first
    assert replay.decisions == {}
    assert replay.counters["replayed"] == 2
    assert replay.counters["chars_pruned"] == report.counters["chars_pruned"]


def test_prune_replays_even_a_recent_result_cut_with_other_settings() -> None:
    out, report = pruned(history(1_000, 1_000), {"c1": cut("b", 1_000, keep=50)})
    assert out[4]["content"] == cut("b", 1_000, keep=50)
    assert report.counters["replayed"] == 1 and report.decisions == {}


def test_prune_does_not_replay_a_decision_made_for_another_result_with_the_same_id() -> None:
    messages = [*history(1_000, 1, 1), *exchange("c0", "z" * 900), *exchange("c9", "y")]
    _, report = pruned(messages[:7])
    assert report.decisions == {"c0": cut("a", 1_000)}
    later = [*exchange("c10", "x"), *exchange("c11", "x")]
    again, report = pruned(messages + later, {"c0": cut("a", 1_000)})
    assert again[2]["content"] == cut("a", 1_000)
    assert again[8]["content"] == cut("z", 900)
    key = decision_key("c0", "z" * 900)
    assert report.decisions == {key: cut("z", 900)} and key.startswith("c0#")
    replayed, report = pruned(messages, {"c0": cut("a", 1_000), key: cut("z", 900)}, recent_keep=9)
    assert replayed == again[: len(messages)] and report.counters["replayed"] == 2


def test_prune_replays_a_hashed_decision_of_an_id_that_itself_holds_a_hash_sign() -> None:
    messages = [*history(1_000, 1, 1), *exchange("c#0", "z" * 900), *exchange("c9", "y")]
    key = decision_key("c#0", "z" * 900)
    decisions = {"c#0": cut("q", 700), key: cut("z", 900)}
    out, report = pruned(messages, decisions, recent_keep=9)
    assert out[8]["content"] == cut("z", 900) and report.counters["replayed"] == 1


def test_prune_takes_new_decisions_only_in_batches_of_min_savings() -> None:
    messages = history(1_000, 1, 1)
    saving = 1_000 - len("a" * 200 + MARK.format(1_000))
    held, report = pruned(messages, min_savings_chars=saving + 1)
    assert held == messages and report.decisions == {}
    assert report.counters["deferred"] == 1
    more = [*exchange("c3", "d" * 1_000), *exchange("c4", "e"), *exchange("c5", "f")]
    _, report = pruned(messages + more, min_savings_chars=saving + 1)
    assert report.counters["pruned"] == 2 and set(report.decisions) == {"c0", "c3"}
    assert report.counters["chars_pruned"] == 2 * saving


def test_prune_batch_still_replays_old_decisions_while_holding_new_ones() -> None:
    messages = history(1_000, 1_000, 1, 1)
    out, report = pruned(messages, {"c0": cut("a", 1_000)}, min_savings_chars=10_000)
    assert out[2]["content"] == cut("a", 1_000) and out[4] is messages[4]
    assert report.counters["replayed"] == 1 and report.counters["deferred"] == 1


@pytest.mark.parametrize(
    ("last", "taken"), [(None, True), (1_000.0 - 299, False), (1_000.0 - 300, True)]
)
def test_prune_waits_for_a_cold_cache_when_configured(last: float | None, taken: bool) -> None:
    _, report = pruned(history(1_000, 1, 1), now=1_000.0, last=last, when_cache_cold_s=300)
    assert bool(report.decisions) is taken


@pytest.mark.parametrize(("updated_at", "taken"), [("0", True), ("999900", False), ("1", True)])
def test_prune_run_reads_decisions_and_last_request_from_session_state(
    updated_at: str, taken: bool
) -> None:
    state = SessionState(fields={"updated_at": updated_at}, decisions={"c1": cut("b", 1_000, 10)})
    start = draft(history(1_000, 1_000, 1, 1), temperature=0)
    settings = replace(DEFAULTS, when_cache_cold_s=300)
    out, report = prune.run(start, turn(state=state, now=1_000_000.0), settings=settings)
    assert out.body == start.body and isinstance(out.messages, tuple)
    assert out.messages[4]["content"] == cut("b", 1_000, 10)
    assert bool(report.decisions) is taken


def marked(message: Message, *, on_part: bool) -> Message:
    if not on_part:
        return {**message, "cache_control": {"type": "ephemeral"}}
    part = {"type": "text", "text": message["content"], "cache_control": {"type": "ephemeral"}}
    return {**message, "content": [part]}


@pytest.mark.parametrize("on_part", [False, True])
def test_prune_edits_nothing_at_or_before_the_last_cache_control_marker(on_part: bool) -> None:
    messages = history(1_000, 1_000, 1_000, 1, 1)
    messages[4] = marked(messages[4], on_part=on_part)
    out, report = pruned(messages)
    assert out[:5] == messages[:5]
    assert set(report.decisions) == {"c2"}


def test_prune_marker_on_a_user_message_protects_everything_before_it() -> None:
    messages = [*history(1_000, 1_000), marked(user("next"), on_part=True), *history(1, 1)[1:]]
    out, report = pruned(messages)
    assert out == messages and report.decisions == {}


def test_prune_replays_decisions_before_the_marker_since_the_provider_saw_them() -> None:
    messages = history(1_000, 1, 1)
    messages[2] = marked(messages[2], on_part=True)
    out, _ = pruned(messages, {"c0": cut("a", 1_000)})
    assert out[2]["content"] == [
        {"type": "text", "text": cut("a", 1_000), "cache_control": {"type": "ephemeral"}}
    ]


def test_prune_keeps_the_header_of_a_persisted_output_and_cuts_only_its_preview() -> None:
    budgets = BudgetSettings(persist_over_chars=1_000)
    messages, _ = apply_budgets(history(5_000, 1, 1), settings=budgets)
    block = messages[2]["content"]
    out, _ = pruned(messages)
    header = "\n".join(block.split("\n")[:3])
    assert out[2]["content"] == (
        f"{header}\n{'a' * 200}{MARK.format(len(block))}\n</persisted-output>"
    )
    assert "GET /v1/ctx/outputs/" in out[2]["content"]


def test_prune_measures_text_parts_as_text_and_other_content_as_json() -> None:
    messages = history(1, 1, 1)
    messages[2] = tool("c0", [{"type": "text", "text": "x" * 150}] * 2)
    messages[4] = tool("c1", {"rows": ["y" * 100] * 3})
    out, _ = pruned(messages, recent_keep=1)
    assert out[2]["content"] == "x" * 150 + "\n" + "x" * 49 + MARK.format(301)
    assert out[4]["content"].startswith('{"rows":["yyy')
    assert out[4]["content"].endswith(MARK.format(len('{"rows":[]}') + 3 * 102 + 2))


def test_prune_leaves_results_without_a_tool_call_id_alone() -> None:
    messages = history(1_000, 1, 1)
    del messages[2]["tool_call_id"]
    out, _ = pruned(messages)
    assert out[2] is messages[2]


def test_prune_does_nothing_when_disabled() -> None:
    messages = history(1_000, 1, 1)
    out, report = pruned(messages, {"c0": "stored"}, enabled=False)
    assert out == messages and report.decisions == {}


@pytest.mark.parametrize("settings", [DEFAULTS, PruneSettings(keep_chars=290, max_chars=300)])
def test_prune_is_idempotent_and_never_mutates_input(settings: PruneSettings) -> None:
    messages = history(301, 755, 5_000, 1_000, 1_000)
    before = copy.deepcopy(messages)
    once, report = prune_tool_results(
        messages, settings=settings, decisions={}, now=0.0, last_request_at=None
    )
    assert messages == before
    for decisions in ({}, report.decisions):
        twice, again = prune_tool_results(
            once, settings=settings, decisions=decisions, now=0.0, last_request_at=None
        )
        assert twice == once
        assert again.decisions == {} and again.counters["replayed"] == 0


def test_prune_keeps_parallel_results_paired() -> None:
    calls = [call(f"p{i}") for i in range(3)]
    messages = [user("go"), assistant(None, *calls), *(tool(f"p{i}", "z" * 900) for i in range(3))]
    out, report = pruned(messages + history(1, 1)[1:])
    assert [m.get("tool_call_id") for m in out] == [m.get("tool_call_id") for m in messages] + [
        None,
        "c0",
        None,
        "c1",
    ]
    assert set(report.decisions) == {"p0", "p1", "p2"}


TRACES = TRACE_FILES
TIGHT = BudgetSettings(
    persist_over_chars=8_000,
    command_max_chars=3_000,
    error_head_tail_chars=500,
    per_turn_max_chars=12_000,
)


def request_points(messages: list[Message]) -> list[int]:
    """Lengths of the prefixes a client sent: each ends right before an assistant message."""
    ends = [i for i in range(1, len(messages)) if messages[i]["role"] == "assistant"]
    return [*ends, len(messages)]


def assert_paired(messages: list[Message] | tuple[Message, ...]) -> None:
    """Every tool result directly follows (with its siblings) the assistant call it answers."""
    open_ids: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_ids
            open_ids.discard(message["tool_call_id"])
        else:
            open_ids = {c["id"] for c in message.get("tool_calls") or ()}


@pytest.mark.parametrize("budgets", [BudgetSettings(), TIGHT], ids=["default", "tight"])
@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_replayed_sessions_keep_pairing_and_all_other_messages(
    path: Path, budgets: BudgetSettings
) -> None:
    messages = orjson.loads(path.read_bytes())["messages"]
    pristine = copy.deepcopy(messages)
    decisions: dict[str, str] = {}
    previous: tuple[Message, ...] = ()
    for end in request_points(messages):
        start = draft(messages[:end])
        state = SessionState(decisions=dict(decisions))
        after_budgets, _ = budgets_stage.run(start, turn(state=state), settings=budgets)
        out, report = prune.run(after_budgets, turn(state=state), settings=DEFAULTS)
        assert [m["role"] for m in out.messages] == [m["role"] for m in start.messages]
        for new, old in zip(out.messages, start.messages, strict=True):
            assert new is old or new["role"] == "tool"
            assert new.get("tool_call_id") == old.get("tool_call_id")
        assert_paired(out.messages)
        for new, old in zip(out.messages, previous, strict=False):
            assert new == old or new["content"] in report.decisions.values()
        decisions.update(report.decisions)
        previous = out.messages
    assert messages == pristine


SMALL_BUDGETS = BudgetSettings(
    persist_over_chars=3_000,
    preview_bytes=300,
    command_max_chars=1_500,
    error_head_tail_chars=300,
    per_turn_max_chars=5_000,
)


@st.composite
def result_contents(draw: st.DrawFn) -> Any:
    """A tool result: plain, error-like, multi-byte; a string, text parts or other JSON."""
    size = draw(st.sampled_from([0, 40, 280, 301, 755, 1_200, 2_000, 3_500, 6_000]))
    line = draw(st.sampled_from(["x" * 30, "é" * 7, "ok 😀", "word " * 20]))
    text = ((line + "\n") * (size // (len(line) + 1) + 1))[:size]
    if draw(st.booleans()):
        text = (
            draw(st.sampled_from(["Traceback (most recent call last):\n", "Exit code 1\n"])) + text
        )
    form = draw(st.sampled_from(["str", "str", "parts", "marked", "json"]))
    if form == "parts":
        return [{"type": "text", "text": text[: size // 2]}, {"type": "text", "text": text}]
    if form == "marked":
        return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
    return {"stdout": text, "code": 1} if form == "json" else text


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """User turns, each followed by steps of 1-3 parallel tool calls and their results."""
    messages: list[Message] = []
    ids = iter(range(1_000))
    for turn_no in range(draw(st.integers(1, 5))):
        opening = user(f"task {turn_no}")
        messages.append(marked(opening, on_part=True) if draw(st.booleans()) else opening)
        for _ in range(draw(st.integers(0, 3))):
            names = draw(
                st.lists(st.sampled_from(["bash", "read", "skill"]), min_size=1, max_size=3)
            )
            calls = [call(f"call_{next(ids)}", name) for name in names]
            messages.append(assistant(None, *calls))
            messages += [tool(c["id"], draw(result_contents())) for c in calls]
        messages.append(assistant(f"done {turn_no}"))
    return messages


prune_settings = st.builds(
    PruneSettings,
    recent_keep=st.integers(0, 4),
    max_chars=st.sampled_from([100, 300]),
    keep_chars=st.sampled_from([50, 200]),
    min_savings_chars=st.sampled_from([0, 500, 5_000]),
    exclude_tools=st.sampled_from([(), ("skill",)]),
)


@hypothesis_settings(max_examples=150, deadline=None)
@given(messages=histories(), prune_with=prune_settings)
def test_budgets_then_prune_keep_histories_valid_stable_and_idempotent(
    messages: list[Message], prune_with: PruneSettings
) -> None:
    before = copy.deepcopy(messages)
    budgeted, _ = apply_budgets(messages, settings=SMALL_BUDGETS)
    out, report = prune_tool_results(
        budgeted, settings=prune_with, decisions={}, now=0.0, last_request_at=None
    )
    assert messages == before
    assert_paired(out)
    for new, old, mid in zip(out, messages, budgeted, strict=True):
        assert new is old or (new["role"] == "tool" and new["tool_call_id"] == old["tool_call_id"])
        text = content_text(mid["content"]) if mid["role"] == "tool" else ""
        assert len(text) <= SMALL_BUDGETS.persist_over_chars or text.startswith("<persisted-")
    assert apply_budgets(budgeted, settings=SMALL_BUDGETS)[0] == budgeted
    assert_prune_rules(budgeted, out, prune_with)
    for decisions in ({}, report.decisions):
        again, _ = prune_tool_results(
            out, settings=prune_with, decisions=decisions, now=0.0, last_request_at=None
        )
        assert again == out
    replayed, _ = prune_tool_results(
        budgeted,
        settings=PruneSettings(recent_keep=99),
        decisions=report.decisions,
        now=0.0,
        last_request_at=None,
    )
    assert replayed == out


def assert_prune_rules(before: list[Message], after: list[Message], rules: PruneSettings) -> None:
    """Untouched: the newest `recent_keep` results, excluded tools, all up to the last marker."""
    tools = [i for i, m in enumerate(before) if m["role"] == "tool"]
    marks = [i for i, m in enumerate(before) if has_cache_control(m)]
    protected = set(tools[len(tools) - rules.recent_keep :] if rules.recent_keep else [])
    protected |= set(range(marks[-1] + 1 if marks else 0))
    names = {c["id"]: c["function"]["name"] for m in before for c in m.get("tool_calls") or ()}
    for index in tools:
        if index in protected or names[before[index]["tool_call_id"]] in rules.exclude_tools:
            assert after[index] is before[index]
        elif after[index] is not before[index]:
            text = content_text(before[index]["content"])
            assert len(text) > rules.max_chars
            assert content_text(after[index]["content"]).endswith(
                (MARK.format(len(text)), MARK.format(len(text)) + "\n</persisted-output>")
            )


def test_prune_settings_reject_negative_values() -> None:
    with pytest.raises(ValueError):
        PruneSettings(recent_keep=-1)


def test_prune_run_hands_back_the_same_draft_without_tool_results() -> None:
    d = draft([user("hi"), assistant("hello"), user("bye")])
    out, report = prune.run(d, turn(), settings=DEFAULTS)
    _, computed = prune_tool_results(
        d.messages, settings=DEFAULTS, decisions={}, now=1.0, last_request_at=None
    )
    assert out is d
    zero = {"chars_pruned": 0, "pruned": 0, "replayed": 0, "deferred": 0}
    assert report == computed == StageReport("prune", zero)


SMALL = PruneSettings(max_chars=10, keep_chars=4)
EPHEMERAL = {"type": "ephemeral"}


def text_history(*texts: str, name: str = "bash") -> list[Message]:
    """A user turn, then one exchange per text; result i answers call `c<i>`."""
    messages = [user("start")]
    for i, text in enumerate(texts):
        messages += exchange(f"c{i}", text, name=name)
    return messages


def tool_texts(messages: list[Message]) -> dict[int, str]:
    return {i: m["content"] for i, m in enumerate(messages) if m["role"] == "tool"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a" * 10, None),  # not over max_chars
        ("a" * 11, None),  # over it, but "aaaa" + the marker is longer than the text
        ("a" * 100, "aaaa" + MARK.format(100)),
        ("abcdefgh" * 10, "abcd" + MARK.format(80)),
        ("x" * 60 + MARK.format(900), None),  # cut already
    ],
)
def test_pruned_text_keeps_keep_chars_and_the_original_length(
    text: str, expected: str | None
) -> None:
    assert pruned_text(text, settings=SMALL) == expected


def test_pruned_text_of_a_persisted_block_keeps_its_header_and_cuts_only_the_preview() -> None:
    _, block = persisted_block("p" * 5_000, preview_bytes=300)
    header = block.split("\n")[:3]
    cut = pruned_text(block, settings=SMALL)
    assert cut == "\n".join([*header, "pppp" + MARK.format(len(block)), "</persisted-output>"])


def test_pruned_text_of_a_persisted_block_cut_already_is_none() -> None:
    _, block = persisted_block("p" * 5_000, preview_bytes=300)
    cut = pruned_text(block, settings=SMALL)
    assert cut is not None
    assert pruned_text(cut, settings=SMALL) is None


def test_pruned_text_leaves_a_persisted_look_alike_without_a_body_whole() -> None:
    text = '<persisted-output id="x">\nheader two\n' + "p" * 100 + "</persisted-output>"
    assert pruned_text(text, settings=SMALL) is None


@pytest.mark.parametrize(
    ("stored", "text", "expected"),
    [
        ("same", "same", True),
        ("aaaa" + MARK.format(100), "a" * 100, True),
        ("aaaa" + MARK.format(99), "a" * 100, False),  # another length
        ("bbbb" + MARK.format(100), "a" * 100, False),  # another text
        ("aaaa", "a" * 100, False),  # no marker
        ("", "a" * 100, False),
    ],
)
def test_describes_a_text_itself_or_a_cut_of_it_only(
    stored: str, text: str, expected: bool
) -> None:
    assert describes(stored, text) is expected


@pytest.mark.parametrize("call_id", ["c1", "call_ABC", "c#0"])
def test_decision_key_is_the_call_id_and_16_hex_of_the_texts_sha256(call_id: str) -> None:
    text = "z" * 900
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert decision_key(call_id, text) == f"{call_id}#{digest}"
    assert decision_key(call_id, text + "!") != decision_key(call_id, text)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (user("q"), False),
        ({**user("q"), "cache_control": EPHEMERAL}, True),
        (tool("c1", [{"type": "text", "text": "a"}]), False),
        (tool("c1", [{"type": "text", "text": "a"}, {"type": "text", "cache_control": {}}]), True),
        (tool("c1", ["raw", {"type": "text", "text": "a"}]), False),
        (tool("c1", {"cache_control": EPHEMERAL}), False),  # not a part: JSON content
    ],
)
def test_has_cache_control_on_the_message_or_one_of_its_parts(
    message: Message, expected: bool
) -> None:
    assert has_cache_control(message) is expected


def test_replay_puts_a_stored_cut_in_place_and_counts_it() -> None:
    messages = text_history("a" * 100, "b" * 100)
    before = copy.deepcopy(messages)
    out = list(messages)
    stored = "aaaa" + MARK.format(100)
    counts, decided = replay_decisions(out, tool_texts(messages), {"c0": stored})
    assert messages == before
    assert out[2]["content"] == stored and out[4] is messages[4]
    assert decided == {2}
    assert counts == {
        **dict.fromkeys(COUNTERS, 0),
        "replayed": 1,
        "chars_pruned": 100 - len(stored),
    }


def test_replay_of_a_decision_to_keep_a_result_whole_decides_it_without_a_change() -> None:
    messages = text_history("a" * 100)
    out = list(messages)
    counts, decided = replay_decisions(out, tool_texts(messages), {"c0": "a" * 100})
    assert decided == {2} and out[2] is messages[2]
    assert counts == dict.fromkeys(COUNTERS, 0)


def test_replay_skips_a_decision_made_for_another_text_under_the_same_id() -> None:
    messages = text_history("a" * 100)
    out = list(messages)
    counts, decided = replay_decisions(out, tool_texts(messages), {"c0": "zzzz" + MARK.format(100)})
    assert decided == set() and out == messages
    assert counts["replayed"] == 0


def test_replay_finds_a_decision_under_the_hashed_key_of_a_reused_id() -> None:
    messages = text_history("a" * 100)
    out = list(messages)
    decisions = {
        "c0": "qqqq" + MARK.format(7),
        decision_key("c0", "a" * 100): "aaaa" + MARK.format(100),
    }
    counts, decided = replay_decisions(out, tool_texts(messages), decisions)
    assert decided == {2} and out[2]["content"] == "aaaa" + MARK.format(100)
    assert counts["replayed"] == 1


@pytest.mark.parametrize(
    ("settings", "decided", "marked_at", "expected"),
    [
        (SMALL, set(), None, {2, 4, 6}),  # the newest two (8, 10) are kept whole
        (PruneSettings(max_chars=10, keep_chars=4, recent_keep=0), set(), None, {2, 4, 6, 8, 10}),
        (PruneSettings(max_chars=10, keep_chars=4, recent_keep=4), set(), None, {2}),
        (SMALL, {4}, None, {2, 6}),
        (SMALL, set(), 4, {6}),  # a client marker protects all up to it
        (SMALL, set(), 5, {6}),
        (PruneSettings(max_chars=10, keep_chars=4, exclude_tools=("bash",)), set(), None, set()),
        (PruneSettings(max_chars=200, keep_chars=4), set(), None, set()),
    ],
)
def test_select_candidates_skips_decided_recent_excluded_and_marked_results(
    settings: PruneSettings, decided: set[int], marked_at: int | None, expected: set[int]
) -> None:
    messages = text_history(*(letter * 100 for letter in "abcde"))
    if marked_at is not None:
        messages[marked_at] = {**messages[marked_at], "cache_control": EPHEMERAL}
    before = copy.deepcopy(messages)
    found = select_candidates(messages, tool_texts(messages), decided, settings=settings)
    assert messages == before
    assert set(found) == expected
    for index, cut in found.items():
        assert cut == pruned_text(messages[index]["content"], settings=settings)


def test_select_candidates_leaves_out_results_with_nothing_to_cut() -> None:
    messages = text_history("short", "a" * 100, "b", "c")
    found = select_candidates(messages, tool_texts(messages), set(), settings=SMALL)
    assert found == {4: "aaaa" + MARK.format(100)}


def _unused(*_: Any) -> None: ...
