"""The markers of every cut name the recall call that reads it back, when the tenant's recall is
on (`recall_tool` set): pruning, the budgets' truncation and persisted block, bootstrap's notice.
Decisions stored before recall still replay byte for byte; the recall index reads every ref."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from proxy.content import (
    find_refs,
    is_persisted,
    output_id,
    persisted_block,
    recall_notice,
)
from proxy.engine.pipeline import with_recall_markers
from proxy.recall.index import build_index, cut_kinds
from proxy.recall.tool import RecallSettings
from proxy.settings import TenantSettings
from proxy.stages.bootstrap import TOOL_RESULT_NOTICE, BootstrapSettings, assemble_system
from proxy.stages.budgets import BudgetSettings, apply_budgets, cut_result_text
from proxy.stages.prune import PruneSettings, describes, prune_tool_results, pruned_text
from proxy.types import Message, WorkspaceView
from tests.factories import exchange, system, user

TOOL = "ctx_recall"
PRUNE = PruneSettings(recall_tool=TOOL)
BUDGETS = BudgetSettings(recall_tool=TOOL)
OLD_MARK = "...(truncated, original: {} chars)"


def prune(messages: list[Message], decisions: dict[str, str] | None = None) -> list[Message]:
    out, _ = prune_tool_results(
        messages, settings=PRUNE, decisions=decisions or {}, now=1.0, last_request_at=None
    )
    return out


def history() -> list[Message]:
    """An old 755-char result (pruned), then two recent ones (kept whole)."""
    return [user("go"), *exchange("call_1", "a" * 755), *exchange("c2", "b"), *exchange("c3", "c")]


def test_a_pruned_result_names_its_tool_call_id() -> None:
    messages = history()
    before = copy.deepcopy(messages)
    out = prune(messages)
    assert out[2]["content"] == (
        "a" * 200 + '...(truncated, original: 755 chars; full text: ctx_recall(ref="call_1"))'
    )
    assert messages == before and find_refs(out[2]["content"], tool_name=TOOL) == ["call_1"]


def test_without_recall_the_marker_is_the_old_one() -> None:
    assert pruned_text("a" * 755, settings=PruneSettings(), ref="call_1") == "a" * 200 + (
        OLD_MARK.format(755)
    )


def test_a_decision_stored_before_recall_replays_byte_for_byte() -> None:
    old = "a" * 200 + OLD_MARK.format(755)
    out = prune(history(), {"call_1": old})
    assert out[2]["content"] == old
    assert describes(old, "a" * 755)


def test_a_new_form_cut_describes_its_text_and_is_never_cut_again() -> None:
    new = prune(history())[2]["content"]
    assert describes(new, "a" * 755) and not describes(new, "a" * 754)
    long_id = "toolu_" + "x" * 900  # the marker's tail is longer than the old 80-char window
    cut = pruned_text("a" * 2_000, settings=PRUNE, ref=long_id)
    assert cut is not None and pruned_text(cut, settings=PRUNE, ref=long_id) is None


def test_a_persisted_block_names_its_output_id_on_its_fetch_line() -> None:
    text = "z" * 60_000
    oid, block = persisted_block(text, preview_bytes=100, tool_name=TOOL)
    fetch = block.split("\n")[1]
    assert fetch == (
        f"Output too large (60000 chars), stored in full: GET /v1/ctx/outputs/{oid}; "
        f'full text: ctx_recall(ref="{oid}")'
    )
    assert is_persisted(block) and is_persisted(persisted_block(text, preview_bytes=100)[1])
    other = block.replace(f'ref="{oid}"', f'ref="{output_id("other")}"')
    assert not is_persisted(other), "a fetch line naming another id is a look-alike"


def test_budgets_persist_and_truncate_with_the_recall_call() -> None:
    big, log = "q" * 60_000, "Traceback (most recent call last):\n" + "e\n" * 8_000
    messages = [user("go"), *exchange("call_big", big), *exchange("call_err", log)]
    out, report = apply_budgets(messages, settings=BUDGETS)
    [oid] = report.outputs
    assert find_refs(out[2]["content"], tool_name=TOOL) == [oid]
    assert find_refs(out[4]["content"], tool_name=TOOL) == ["call_err"]
    assert 'lines truncated; full text: ctx_recall(ref="call_err")]' in out[4]["content"]
    again, _ = apply_budgets(out, settings=BUDGETS)
    assert again == out, "the cut text fits its limit again: the stage is idempotent"


@pytest.mark.parametrize("ref", ["c", "toolu_01" + "A" * 200])
def test_a_truncated_command_output_fits_its_limit_whatever_the_ref(ref: str) -> None:
    settings = replace(BUDGETS, command_max_chars=2_000)
    text = "".join(f"line {n}\n" for n in range(5_000))
    cut = cut_result_text(text, command=True, settings=settings, ref=ref)
    assert len(cut) <= 2_000 and find_refs(cut, tool_name=TOOL) == [ref]
    assert cut_result_text(cut, command=True, settings=settings, ref=ref) == cut


def test_bootstraps_notice_gains_the_recall_line() -> None:
    view = WorkspaceView(files={"soul": ("You are Wren.",)})
    static, _ = assemble_system(view, settings=BootstrapSettings(recall_tool=TOOL))
    assert static.endswith(f"{TOOL_RESULT_NOTICE}\n{recall_notice(tool_name=TOOL)}")
    plain, _ = assemble_system(view, settings=BootstrapSettings())
    assert plain.endswith(TOOL_RESULT_NOTICE) and TOOL not in plain
    off, _ = assemble_system(
        view, settings=BootstrapSettings(recall_tool=TOOL, tool_result_notice=False)
    )
    assert TOOL not in off


def test_the_stack_names_the_tool_in_every_cutting_stage_only_when_recall_is_on() -> None:
    on = with_recall_markers(TenantSettings(recall=RecallSettings(tool_name="fetch_cut")))
    names = {on.prune.recall_tool, on.budgets.recall_tool, on.bootstrap.recall_tool}
    assert names | {on.compact.recall_tool} == {"fetch_cut"}
    off = TenantSettings(recall=RecallSettings(enabled=False))
    assert with_recall_markers(off) is off


def test_the_recall_index_reads_back_every_cut_by_the_ref_its_marker_names() -> None:
    big, log = "q" * 60_000, "Traceback (most recent call last):\n" + "e\n" * 8_000
    messages = [system("s"), user("go"), *exchange("call_big", big), *exchange("call_err", log)]
    messages += [*exchange("call_old", "o" * 900), *exchange("c5", "x"), *exchange("c6", "y")]
    budgeted, _ = apply_budgets(messages, settings=BUDGETS)
    prepared = prune(budgeted)
    assert cut_kinds(messages, prepared, covers=0) == {"result", "output"}
    index = build_index(messages, prepared, covers=0, tool_name=TOOL)
    for message in prepared:
        for ref in find_refs(str(message.get("content")), tool_name=TOOL):
            item = index.resolve(ref).item
            assert item is not None, ref
            original = next(m for m in messages if m.get("tool_call_id") == message["tool_call_id"])
            assert item.text == original["content"]


@pytest.mark.parametrize(
    ("tail", "holds"),
    [
        (")", True),
        ('; full text: ctx_recall(ref="call_1"))', True),
        ('; full text: fetch-cut_2(ref="a \\"quoted\\" id"))', True),
        ('; full text: ctx recall(ref="call_1"))', False),
        ('; full text: ctx_recall(ref=""))', False),
        ('; full text: ctx_recall(ref="call_1")x)', False),
        ("; full text: ctx_recall(ref=call_1))", False),
        ("; full text: ctx_recall(ref=" + '"' + "x" * 1_001 + '"))', False),
    ],
)
def test_a_marker_is_read_in_both_forms_and_nothing_else(tail: str, holds: bool) -> None:
    stored = "a" * 200 + "...(truncated, original: 755 chars" + tail
    assert describes(stored, "a" * 755) is holds
