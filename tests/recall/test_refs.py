"""The ref scheme and the recall text that markers carry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.recall.refs import (
    find_refs,
    is_output_id,
    parse_turns,
    recall_call,
    recall_clause,
    recall_notice,
    summary_line,
    turns_ref,
)


def test_markers_name_the_literal_call_with_the_configured_tool_name() -> None:
    assert recall_call("call_1", tool_name="ctx_recall") == 'ctx_recall(ref="call_1")'
    assert recall_call("x", tool_name="mine", offset=40) == 'mine(ref="x", offset=40)'
    assert recall_clause("call_1", tool_name="ctx_recall") == (
        'full text: ctx_recall(ref="call_1")'
    )


def test_summary_line_names_the_span_it_stands_for() -> None:
    assert summary_line(0, 41, tool_name="ctx_recall") == (
        '[Messages 0-41 are summarized above; full text: ctx_recall(ref="turns:0-41")]'
    )


def test_notice_is_one_line_naming_both_ways_to_recall() -> None:
    notice = recall_notice(tool_name="recall_it")
    assert "\n" not in notice
    assert 'recall_it(ref="REF")' in notice
    assert 'recall_it(query="words")' in notice


@pytest.mark.parametrize(
    ("ref", "span"),
    [
        ("turns:0-41", (0, 41)),
        ("turns:3-3", (3, 3)),
        ("turns:5-4", None),
        ("turns:-1-4", None),
        ("turns:0-1x", None),
        ("call_1", None),
        ("turns:" + "9" * 10 + "-1", None),
    ],
)
def test_parse_turns_reads_only_well_formed_spans(ref: str, span: tuple[int, int] | None) -> None:
    assert parse_turns(ref) == span


def test_turns_ref_refuses_a_backwards_span() -> None:
    assert turns_ref(2, 2) == "turns:2-2"
    with pytest.raises(ValueError):
        turns_ref(3, 2)


def test_output_ids_are_32_lowercase_hex() -> None:
    assert is_output_id("0123456789abcdef" * 2)
    assert not is_output_id("0123456789ABCDEF" * 2)
    assert not is_output_id("0123456789abcdef")


def test_find_refs_reads_every_marker_once_in_order_and_skips_malformed_ones() -> None:
    text = (
        'a ctx_recall(ref="call_2") b ctx_recall(ref="call_1") '
        'ctx_recall(ref="call_2") ctx_recall(ref=call_3) ctx_recall(ref="") other(ref="x")'
    )
    assert find_refs(text, tool_name="ctx_recall") == ["call_2", "call_1"]


@given(st.text(min_size=1, max_size=200), st.text(max_size=50), st.text(max_size=50))
def test_find_refs_reads_back_any_ref_a_marker_names(ref: str, before: str, after: str) -> None:
    marker = recall_call(ref, tool_name="ctx_recall")
    assert ref in find_refs(before + marker + after, tool_name="ctx_recall")
