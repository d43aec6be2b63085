"""Bootstrap stage: caps, markers, missing files, tag order, layering, static stability."""

from __future__ import annotations

import copy

import pytest

from proxy.stages.bootstrap import (
    TOOL_RESULT_NOTICE,
    AssemblyCache,
    BootstrapSettings,
    Sections,
    assemble_system,
    cap_text,
    collect,
    run,
)
from proxy.types import Draft, SessionState, SystemPrompt, WorkspaceView
from tests.factories import draft, system, turn, user

NOTICE = "\n\n" + TOOL_RESULT_NOTICE
PLAIN = BootstrapSettings(tool_result_notice=False)


def view(session: dict[str, str] | None = None, **files: tuple[str, ...]) -> WorkspaceView:
    return WorkspaceView(files=files, session_files=session or {})


def test_assemble_puts_soul_agent_notice_static_and_user_memory_dynamic() -> None:
    v = view(soul=("S\n",), user=("U\n",), agent=("A\n",), memory=("- 2026-11-28: M\n",))
    static, dynamic = assemble_system(v, settings=BootstrapSettings())
    assert static == "<soul>\nS\n</soul>\n\n<agent>\nA\n</agent>" + NOTICE
    assert dynamic == (
        "<user_profile>\nU\n</user_profile>\n\n<memory_index>\n- 2026-11-28: M\n</memory_index>"
    )


@pytest.mark.parametrize(
    ("files", "static", "dynamic"),
    [
        ({"soul": ("S",)}, "<soul>\nS\n</soul>", ""),
        ({"agent": ("A",)}, "<agent>\nA\n</agent>", ""),
        ({"user": ("U",)}, "", "<user_profile>\nU\n</user_profile>"),
        ({"memory": ("M",)}, "", "<memory_index>\nM\n</memory_index>"),
        ({"soul": (" \n",), "memory": ("M",)}, "", "<memory_index>\nM\n</memory_index>"),
        ({"soul": ("S",), "unknown": ("X",)}, "<soul>\nS\n</soul>", ""),
    ],
)
def test_missing_or_blank_files_add_no_section(
    files: dict[str, tuple[str, ...]], static: str, dynamic: str
) -> None:
    assert assemble_system(WorkspaceView(files=files), settings=PLAIN) == (static, dynamic)


@pytest.mark.parametrize(
    ("files", "session", "static", "dynamic"),
    [
        ({"soul": ("managed", "tenant")}, {}, "<soul>\ntenant\n</soul>", ""),
        ({"soul": ("managed", "")}, {}, "<soul>\nmanaged\n</soul>", ""),
        ({"agent": ("m", "t")}, {}, "<agent>\nm\n\nt\n</agent>", ""),
        ({"user": ("m", "t")}, {}, "", "<user_profile>\nt\n</user_profile>"),
        ({"user": ("m", "t")}, {"user": "s"}, "", "<user_profile>\ns\n</user_profile>"),
        ({"memory": ("m", "t")}, {}, "", "<memory_index>\nm\n\nt\n</memory_index>"),
        ({"memory": ("t",)}, {"memory": "s"}, "", "<memory_index>\nt\n\ns\n</memory_index>"),
        (
            {"soul": ("t",), "agent": ("a",)},
            {"soul": "ss", "agent": "sa"},
            "<soul>\nt\n</soul>\n\n<agent>\na\n</agent>",
            "<soul>\nss\n</soul>\n\n<agent>\nsa\n</agent>",
        ),
        (
            {"user": ("u",), "memory": ("m",)},
            {"agent": "sa", "soul": "ss"},
            "",
            "<user_profile>\nu\n</user_profile>\n\n<memory_index>\nm\n</memory_index>"
            "\n\n<soul>\nss\n</soul>\n\n<agent>\nsa\n</agent>",
        ),
    ],
)
def test_layering_replaces_soul_and_user_and_extends_agent_and_memory(
    files: dict[str, tuple[str, ...]], session: dict[str, str], static: str, dynamic: str
) -> None:
    v = WorkspaceView(files=files, session_files=session)
    assert assemble_system(v, settings=PLAIN) == (static, dynamic)


def test_each_layer_is_capped_separately_with_a_visible_marker() -> None:
    settings = BootstrapSettings(max_chars_per_file=4, tool_result_notice=False)
    static, _ = assemble_system(view(agent=("abcdef", "xyz")), settings=settings)
    assert static == "<agent>\nabcd\n[truncated: first 4 of 6 characters shown]\n\nxyz\n</agent>"


def test_default_caps_are_2000_chars_and_200_memory_lines() -> None:
    memory = "\n".join(f"- {i}" for i in range(250))
    static, dynamic = assemble_system(view(soul=("x" * 2500,), memory=(memory,)), settings=PLAIN)
    marker = "[truncated: first 2000 of 2500 characters shown]"
    assert static == "<soul>\n" + "x" * 2000 + "\n" + marker + "\n</soul>"
    kept = "\n".join(f"- {i}" for i in range(200))
    marker = "[truncated: first 200 of 250 lines shown]"
    assert dynamic == "<memory_index>\n" + kept + "\n" + marker + "\n</memory_index>"


def test_static_part_is_byte_identical_when_user_memory_or_session_change() -> None:
    base = {"soul": ("S",), "agent": ("m", "t")}
    first = WorkspaceView(files={**base, "user": ("Maya",), "memory": ("- a",)})
    second = WorkspaceView(
        files={**base, "user": ("Maya, now in Porto",), "memory": ("- a", "- b")},
        session_files={"user": "other", "soul": "session soul", "agent": "session rule"},
    )
    static1, dynamic1 = assemble_system(first, settings=BootstrapSettings())
    static2, dynamic2 = assemble_system(second, settings=BootstrapSettings())
    assert static1.encode() == static2.encode()
    assert dynamic1 != dynamic2


def test_notice_is_the_last_static_paragraph_when_enabled_and_absent_otherwise() -> None:
    v = view(user=("U",))
    assert assemble_system(v, settings=BootstrapSettings()) == (
        TOOL_RESULT_NOTICE,
        "<user_profile>\nU\n</user_profile>",
    )
    assert assemble_system(v, settings=PLAIN)[0] == ""


def test_empty_view_assembles_nothing_not_even_the_notice() -> None:
    assert assemble_system(WorkspaceView(), settings=BootstrapSettings()) == ("", "")


def _client_draft() -> Draft:
    return draft([system("client rules"), user("hi")], temperature=0)


def test_run_sets_static_and_dynamic_and_keeps_everything_else() -> None:
    d = _client_draft()
    before = copy.deepcopy(d)
    t = turn(workspace=view(soul=("S",), user=("U",)))
    out, report = run(d, t, settings=BootstrapSettings())
    assert d == before
    assert out.system == SystemPrompt(
        static="<soul>\nS\n</soul>" + NOTICE,
        client=({"role": "system", "content": "client rules"},),
        dynamic="<user_profile>\nU\n</user_profile>",
    )
    assert out.body is d.body and out.messages is d.messages
    assert report.stage == "bootstrap"
    assert dict(report.counters) == {
        "static_chars": len(out.system.static),
        "dynamic_chars": len(out.system.dynamic),
        "sections": 2,
        "truncations": 0,
    }


def test_run_counts_truncations() -> None:
    t = turn(workspace=view(soul=("abcdef",), memory=("a\nb\nc",)))
    settings = BootstrapSettings(max_chars_per_file=3, memory_max_lines=2)
    _, report = run(_client_draft(), t, settings=settings)
    assert report.counters["truncations"] == 2


@pytest.mark.parametrize(
    ("settings", "workspace"),
    [
        (BootstrapSettings(enabled=False), view(soul=("S",))),
        (BootstrapSettings(), WorkspaceView()),
        (BootstrapSettings(), view(soul=("",), user=(" \n",))),
    ],
)
def test_run_returns_the_draft_unchanged_when_disabled_or_empty(
    settings: BootstrapSettings, workspace: WorkspaceView
) -> None:
    d = _client_draft()
    before = copy.deepcopy(d)
    out, report = run(d, turn(workspace=workspace), settings=settings)
    assert out is d
    assert d == before
    assert report.stage == "bootstrap" and not report.counters and not report.skipped


@pytest.mark.parametrize("kw", [{"max_chars_per_file": 0}, {"memory_max_lines": 0}])
def test_settings_reject_non_positive_caps(kw: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=f"{next(iter(kw))} must be at least 1"):
        BootstrapSettings(**kw)  # type: ignore[arg-type]


def test_cache_gives_what_assembly_gives_and_reuses_it_for_the_same_view() -> None:
    cache = AssemblyCache()
    v = view(soul=("S",), user=("U",))
    first, _ = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
    again, report = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
    uncached, expected = run(_client_draft(), turn(workspace=v), settings=PLAIN)
    assert first.system == again.system == uncached.system
    assert again.system.static is first.system.static  # not assembled again
    assert report == expected


def test_cache_shows_a_changed_workspace_file() -> None:
    cache = AssemblyCache()
    run(_client_draft(), turn(workspace=view(soul=("old",))), settings=PLAIN, cache=cache)
    out, _ = run(_client_draft(), turn(workspace=view(soul=("new",))), settings=PLAIN, cache=cache)
    assert out.system.static == "<soul>\nnew\n</soul>"


def test_cache_does_not_share_an_assembly_between_settings() -> None:
    cache = AssemblyCache()
    v = view(soul=("abcdef",))
    short, _ = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
    capped = BootstrapSettings(tool_result_notice=False, max_chars_per_file=3)
    cut, report = run(_client_draft(), turn(workspace=v), settings=capped, cache=cache)
    assert short.system.static == "<soul>\nabcdef\n</soul>"
    assert cut.system.static.startswith("<soul>\nabc\n[truncated")
    assert report.counters["truncations"] == 1


def test_cache_stays_correct_past_its_size() -> None:
    cache = AssemblyCache(size=2)
    views = [view(soul=(f"S{i}",)) for i in range(4)]
    for v in [*views, *views]:
        out, _ = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
        assert out.system.static == f"<soul>\n{v.files['soul'][0]}\n</soul>"


def test_cached_report_counters_cannot_be_changed_by_a_reader() -> None:
    cache = AssemblyCache()
    v = view(soul=("S",))
    _, report = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
    with pytest.raises(TypeError):
        report.counters["sections"] = 99  # type: ignore[index]
    _, again = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
    assert again.counters["sections"] == 1


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


LEARNED = ("- 2026-12-01: Sync moves to Wednesdays.", "- 2026-12-02: Rides on Saturdays.")


def test_learned_facts_follow_the_memory_files_newest_last() -> None:
    v = view(soul=("S",), memory=("- 2026-11-28: M",))
    static, dynamic = assemble_system(v, settings=PLAIN, facts=LEARNED)
    assert static == "<soul>\nS\n</soul>"
    assert dynamic == "<memory_index>\n- 2026-11-28: M\n" + "\n".join(LEARNED) + "\n</memory_index>"


def test_learned_facts_change_only_the_dynamic_part_byte_for_byte() -> None:
    v = view(soul=("S",), agent=("A",), user=("U",), memory=("- 2026-11-28: M",))
    before = assemble_system(v, settings=BootstrapSettings())
    after = assemble_system(v, settings=BootstrapSettings(), facts=LEARNED)
    assert after[0].encode() == before[0].encode()
    assert after[1] != before[1] and after[1].startswith(before[1].removesuffix("</memory_index>"))


def test_learned_facts_alone_make_a_memory_index() -> None:
    assert assemble_system(WorkspaceView(), settings=PLAIN, facts=LEARNED) == (
        "",
        "<memory_index>\n" + "\n".join(LEARNED) + "\n</memory_index>",
    )


def test_learned_facts_fit_in_memory_max_lines_and_repeat_no_workspace_line() -> None:
    settings = BootstrapSettings(tool_result_notice=False, memory_max_lines=3)
    v = view(memory=("# index\n- 2026-11-28: Rides on saturdays",))
    facts = ("- 2026-12-01: one", "- 2026-12-02: two", "- 2026-12-03: Rides on Saturdays.")
    _, dynamic = assemble_system(v, settings=settings, facts=facts)
    assert dynamic == "<memory_index>\n# index\n- 2026-11-28: Rides on saturdays\n" \
        "- 2026-12-02: two\n</memory_index>"  # fmt: skip


def test_run_reads_the_learned_facts_from_the_turns_state() -> None:
    state = SessionState(memory=LEARNED)
    out, _ = run(_client_draft(), turn(state=state, workspace=view(soul=("S",))), settings=PLAIN)
    assert out.system.dynamic.endswith(LEARNED[-1] + "\n</memory_index>")


def test_cache_assembles_again_for_other_facts_and_not_for_the_same() -> None:
    cache = AssemblyCache()
    v = view(soul=("S",))
    first, _ = run(_client_draft(), turn(workspace=v), settings=PLAIN, cache=cache)
    with_facts = turn(workspace=v, state=SessionState(memory=LEARNED))
    second, _ = run(_client_draft(), with_facts, settings=PLAIN, cache=cache)
    assert "<memory_index>" not in first.system.dynamic
    assert second.system.dynamic.endswith(LEARNED[-1] + "\n</memory_index>")
    equal = turn(workspace=v, state=SessionState(memory=tuple(list(LEARNED))))
    third, _ = run(_client_draft(), equal, settings=PLAIN, cache=cache)
    assert third.system.dynamic is second.system.dynamic  # equal facts: not assembled again
    assert third.system.static.encode() == first.system.static.encode()
