"""Bootstrap's sections from a workspace view: per-file caps, order, static or dynamic, cuts."""

from __future__ import annotations

import copy

import pytest

from proxy.stages.bootstrap import BootstrapSettings
from proxy.stages.bootstrap_sections import Sections, cap_text, collect
from proxy.types import WorkspaceView

PLAIN = BootstrapSettings(tool_result_notice=False)


@pytest.mark.parametrize(
    ("text", "max_chars", "max_lines", "expected", "cuts"),
    [
        ("hello", 5, None, "hello", 0),
        ("  hello\n\n", 5, None, "hello", 0),
        ("hello!", 5, None, "hello\n[truncated: first 5 of 6 characters shown]", 1),
        ("a\nb\nc", 100, 3, "a\nb\nc", 0),
        ("a\nb\nc\nd", 100, 2, "a\nb\n[truncated: first 2 of 4 lines shown]", 1),
        (
            "aaaa\nbbbb\ncccc",
            6,
            2,
            "aaaa\nb\n[truncated: first 2 of 3 lines shown]\n"
            "[truncated: first 6 of 9 characters shown]",
            2,
        ),
    ],
)
def test_cap_text_cuts_lines_then_chars_with_a_marker_per_cut(
    text: str, max_chars: int, max_lines: int | None, expected: str, cuts: int
) -> None:
    assert cap_text(text, max_chars=max_chars, max_lines=max_lines) == (expected, cuts)


def test_collect_gives_nothing_for_an_empty_or_blank_view() -> None:
    empty = Sections(static=(), dynamic=(), cuts=0)
    assert collect(WorkspaceView(), PLAIN) == empty
    blank = WorkspaceView(files={"soul": (" ",), "memory": ("\n",)}, session_files={"user": ""})
    assert collect(blank, PLAIN) == empty


def test_collect_orders_sections_and_puts_the_session_layers_soul_and_agent_in_dynamic() -> None:
    view = WorkspaceView(
        files={"memory": ("M",), "agent": ("A",), "user": ("U",), "soul": ("S",)},
        session_files={"agent": "sa", "soul": "ss", "memory": "sm"},
    )
    before = copy.deepcopy(view)
    assert collect(view, PLAIN) == Sections(
        static=("<soul>\nS\n</soul>", "<agent>\nA\n</agent>"),
        dynamic=(
            "<user_profile>\nU\n</user_profile>",
            "<memory_index>\nM\n\nsm\n</memory_index>",
            "<soul>\nss\n</soul>",
            "<agent>\nsa\n</agent>",
        ),
        cuts=0,
    )
    assert view == before


@pytest.mark.parametrize(
    ("files", "cuts"),
    [
        ({"soul": ("abcdef",)}, 1),
        ({"agent": ("abcdef", "ghijkl")}, 2),  # each layer is capped on its own
        ({"soul": ("abcdef", "xyz")}, 0),  # a replaced layer is not cut
        ({"memory": ("a\nb\nc",)}, 1),  # two lines of one char: only the line cap
        ({"memory": ("aaaa\nbbbb\ncccc",)}, 2),
        ({"agent": ("a\nb\nc",)}, 0),  # the line cap is the memory index's only
    ],
)
def test_collect_counts_every_cut_of_every_file(
    files: dict[str, tuple[str, ...]], cuts: int
) -> None:
    settings = BootstrapSettings(max_chars_per_file=5, memory_max_lines=2)
    assert collect(WorkspaceView(files=files), settings).cuts == cuts
