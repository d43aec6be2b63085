"""Which workspace paths may be opened, over real temp dirs: confinement, session ids and layers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proxy.adapters.workspace_paths import (
    OPEN_FLAGS,
    find_session_root,
    resolve_below,
    resolve_inside,
    valid_session,
)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """(a workspace, a dir outside it holding a secret)."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("secret", encoding="utf-8")
    return workspace, outside


@pytest.mark.parametrize(
    "name",
    ["/etc/passwd", "../outside/secret.md", "memory/../../outside/secret.md", "", ".", "a\0"],
)
def test_resolve_inside_refuses_names_that_escape(dirs: tuple[Path, Path], name: str) -> None:
    workspace, _ = dirs
    assert resolve_inside(workspace, name) is None


def test_resolve_inside_accepts_a_plain_relative_name(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    assert resolve_inside(workspace, "memory/MEMORY.md") == workspace.resolve() / "memory/MEMORY.md"


def test_resolve_inside_follows_symlinks_and_refuses_those_leading_outside(
    dirs: tuple[Path, Path],
) -> None:
    workspace, outside = dirs
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    (workspace / "notes").mkdir()
    (workspace / "in").symlink_to(workspace / "notes", target_is_directory=True)
    assert resolve_inside(workspace, "out/secret.md") is None
    assert resolve_inside(workspace, "in/a.md") == workspace.resolve() / "notes" / "a.md"


def test_resolve_inside_resolves_a_symlinked_root_first(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    linked = workspace.parent / "ws-link"
    linked.symlink_to(workspace, target_is_directory=True)
    assert resolve_inside(linked, "soul.md") == workspace.resolve() / "soul.md"


@pytest.mark.parametrize("name", ["a//b", "a/./b", "a/", "/a", "a/../a", "a/b\0c", "..", "./a"])
def test_resolve_below_refuses_empty_dot_and_dotdot_components_and_nul(
    dirs: tuple[Path, Path], name: str
) -> None:
    workspace, _ = dirs
    (workspace / "a").mkdir()
    assert resolve_below(os.path.realpath(workspace), name) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("soul.md", "soul.md"),
        ("missing/deeper/file.md", "missing/deeper/file.md"),
        ("real/file.md", "real/file.md"),
        ("link/file.md", "real/file.md"),
        ("real/self/file.md", "real/file.md"),
        ("a file", "a file"),
    ],
)
def test_resolve_below_gives_the_path_under_the_base_with_links_followed(
    dirs: tuple[Path, Path], name: str, expected: str
) -> None:
    workspace, _ = dirs
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to("real", target_is_directory=True)
    (workspace / "real" / "self").symlink_to(".", target_is_directory=True)
    base = os.path.realpath(workspace)
    assert resolve_below(base, name) == os.path.join(base, expected)


@pytest.mark.parametrize("target", ["../outside/secret.md", "..", "."])
def test_resolve_below_refuses_a_symlink_to_outside_or_to_the_base_itself(
    dirs: tuple[Path, Path], target: str
) -> None:
    workspace, _ = dirs
    (workspace / "link").symlink_to(target)
    assert resolve_below(os.path.realpath(workspace), "link") is None


def test_resolve_below_refuses_a_sibling_sharing_the_bases_name_as_prefix(
    dirs: tuple[Path, Path],
) -> None:
    workspace, _ = dirs
    sibling = workspace.parent / (workspace.name + "-evil")
    sibling.mkdir()
    (workspace / "link").symlink_to(sibling, target_is_directory=True)
    assert resolve_below(os.path.realpath(workspace), "link/soul.md") is None


@pytest.mark.parametrize(
    ("session", "valid"),
    [
        ("s1", True),
        ("A-z_0.9:x", True),
        ("x" * 128, True),
        ("...", True),
        (".", False),
        ("..", False),
        ("", False),
        ("x" * 129, False),
        ("a/b", False),
        ("a b", False),
        ("é", False),
        ("a\0b", False),
        ("s1\n", False),
    ],
)
def test_valid_session_allows_at_most_128_safe_characters_but_not_dot_or_dotdot(
    session: str, valid: bool
) -> None:
    assert valid_session(session) is valid


def test_find_session_root_is_the_sessions_directory_inside_the_workspace(
    dirs: tuple[Path, Path],
) -> None:
    workspace, _ = dirs
    (workspace / "sessions" / "s1").mkdir(parents=True)
    assert find_session_root(workspace, "s1") == workspace.resolve() / "sessions" / "s1"


@pytest.mark.parametrize("session", ["s2", "file", "out", "..", "."])
def test_find_session_root_is_none_unless_a_directory_inside_the_workspace(
    dirs: tuple[Path, Path], session: str
) -> None:
    workspace, outside = dirs
    sessions = workspace / "sessions"
    sessions.mkdir()
    (sessions / "file").write_text("not a directory", encoding="utf-8")
    (sessions / "out").symlink_to(outside, target_is_directory=True)
    assert find_session_root(workspace, session) is None


def test_find_session_root_follows_a_symlink_that_stays_inside(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    (workspace / "kept" / "s1").mkdir(parents=True)
    (workspace / "sessions").mkdir()
    (workspace / "sessions" / "s1").symlink_to(workspace / "kept" / "s1", target_is_directory=True)
    assert find_session_root(workspace, "s1") == workspace.resolve() / "kept" / "s1"


def test_find_session_root_without_a_workspace_is_none() -> None:
    assert find_session_root(None, "s1") is None


def test_open_flags_refuse_a_final_symlink(dirs: tuple[Path, Path]) -> None:
    workspace, outside = dirs
    (workspace / "soul.md").symlink_to(outside / "secret.md")
    with pytest.raises(OSError):
        os.open(workspace / "soul.md", OPEN_FLAGS)


def test_open_flags_never_block_on_a_fifo(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    os.mkfifo(workspace / "soul.md")
    fd = os.open(workspace / "soul.md", OPEN_FLAGS)  # no writer: a blocking open would hang
    os.close(fd)
    assert OPEN_FLAGS & os.O_ACCMODE == os.O_RDONLY


def test_find_session_root_refuses_an_id_that_is_not_one_safe_component(
    dirs: tuple[Path, Path],
) -> None:
    workspace, _ = dirs
    (workspace / "sessions" / "a" / "b").mkdir(parents=True)
    assert find_session_root(workspace, "a") is not None
    assert find_session_root(workspace, "a/b") is None
