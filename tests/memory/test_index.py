"""Learned facts after the workspace's memory index: newest last, within the cap, no repeats."""

from __future__ import annotations

from proxy.memory.index import export_markdown, facts_to_show, merge_index

WORKSPACE = "# Memory index\n\n- 2026-11-02: Main client is HFA.\n- 2026-11-09: Uses Fedora."
FACTS = ("- 2026-12-01: Sync moves to Wednesdays.", "- 2026-12-02: Main client is HFA!")


def test_facts_follow_the_workspace_and_repeat_nothing_it_says() -> None:
    assert merge_index(WORKSPACE, FACTS, max_lines=200) == (
        WORKSPACE + "\n- 2026-12-01: Sync moves to Wednesdays."
    )


def test_facts_fill_the_room_the_workspace_leaves_newest_kept() -> None:
    facts = tuple(f"- 2026-12-0{i}: fact {i}" for i in range(1, 6))
    shown = facts_to_show(WORKSPACE, facts, max_lines=6)  # the workspace holds 4 lines
    assert shown == facts[-2:]
    assert facts_to_show(WORKSPACE, facts, max_lines=4) == ()


def test_without_a_workspace_the_facts_alone_make_the_index() -> None:
    assert merge_index("", FACTS, max_lines=1) == FACTS[1]


def test_export_is_one_line_per_fact_ready_to_append() -> None:
    assert export_markdown(FACTS) == FACTS[0] + "\n" + FACTS[1] + "\n"
    assert export_markdown(()) == ""
