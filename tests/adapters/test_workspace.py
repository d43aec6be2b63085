"""FileWorkspace over real temp dirs: layers, mtime-cached re-reads, bounded reads, path safety."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from proxy.adapters.workspace import FileWorkspace
from proxy.ports import WorkspaceSource
from proxy.stages.bootstrap import BootstrapSettings, assemble_system

CANARY = "CANARY-must-never-be-read"
EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "workspaces" / "default"


def write(root: Path, name: str, text: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(managed dir, tenant workspace, a dir outside both holding a canary file)."""
    managed, workspace, outside = tmp_path / "managed", tmp_path / "ws", tmp_path / "outside"
    for d in (managed, workspace, outside):
        d.mkdir()
    write(outside, "secret.md", CANARY)
    write(outside, "MEMORY.md", CANARY)
    return managed, workspace, outside


def source(dirs: tuple[Path, Path, Path], **kw: Any) -> FileWorkspace:
    """A workspace that looks at the disk on every view (unless `recheck_s` is given)."""
    managed, workspace, _ = dirs
    kw.setdefault("recheck_s", 0.0)
    return FileWorkspace(workspaces={"t": workspace}, managed_dir=managed, **kw)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_file_workspace_satisfies_the_port(dirs: tuple[Path, Path, Path]) -> None:
    port: WorkspaceSource = source(dirs)
    assert port.view("t", "s1").files == {}


def test_view_lists_layers_lowest_first_and_only_present_files(
    dirs: tuple[Path, Path, Path],
) -> None:
    managed, workspace, _ = dirs
    write(managed, "soul.md", "managed soul")
    write(managed, "agent.md", "managed rules")
    write(workspace, "soul.md", "tenant soul")
    write(workspace, "memory/MEMORY.md", "- 2026-11-28: fact")
    write(workspace, "notes.md", "not allow-listed")
    v = source(dirs).view("t", "s1")
    assert v.files == {
        "soul": ("managed soul", "tenant soul"),
        "agent": ("managed rules",),
        "memory": ("- 2026-11-28: fact",),
    }
    assert v.session_files == {}
    assert re.fullmatch(r"[0-9a-f]{16}", v.version)


@pytest.mark.parametrize("tenant", ["unknown", "..", "../ws", "/", "t/.."])
def test_unknown_tenant_gets_the_managed_layer_only(
    dirs: tuple[Path, Path, Path], tenant: str
) -> None:
    managed, workspace, _ = dirs
    write(managed, "soul.md", "managed")
    write(workspace, "user.md", "tenant")
    assert source(dirs).view(tenant, "s1").files == {"soul": ("managed",)}


def test_session_layer_is_read_from_its_own_directory(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    write(workspace, "user.md", "tenant user")
    write(workspace, "sessions/s1/user.md", "session user")
    write(workspace, "sessions/s1/memory/MEMORY.md", "- session fact")
    ws = source(dirs)
    assert ws.view("t", "s1").session_files == {
        "user": "session user",
        "memory": "- session fact",
    }
    assert ws.view("t", "s2").session_files == {}
    assert ws.view("t", "s1").files == {"user": ("tenant user",)}


@pytest.mark.parametrize("session", ["", ".", "..", "../ws", "a/b", "/tmp", "x" * 129, "a\0b"])
def test_invalid_session_ids_get_no_session_layer(
    dirs: tuple[Path, Path, Path], session: str
) -> None:
    _, workspace, _ = dirs
    write(workspace, "user.md", "tenant user")
    write(workspace, "sessions/user.md", "sessions dir itself")
    assert source(dirs).view("t", session).session_files == {}


def test_unchanged_files_are_not_reopened(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    write(workspace, "soul.md", "soul")
    write(workspace, "user.md", "user")
    ws = source(dirs)
    first = ws.view("t", "s1")
    assert ws.reads == 2
    assert ws.view("t", "s1") == first
    assert ws.reads == 2


def test_a_changed_file_is_reread_and_only_that_one(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    write(workspace, "soul.md", "soul")
    user = write(workspace, "user.md", "Maya")
    ws = source(dirs)
    before = ws.view("t", "s1")
    user.write_text("Mayb", encoding="utf-8")  # same size: the mtime tells
    bump_mtime(user)
    after = ws.view("t", "s1")
    assert ws.reads == 3
    assert after.files["user"] == ("Mayb",)
    assert after.version != before.version


def test_a_file_replaced_by_rename_with_equal_stamp_is_reread(
    dirs: tuple[Path, Path, Path],
) -> None:
    _, workspace, _ = dirs
    user = write(workspace, "user.md", "old!")
    ws = source(dirs)
    ws.view("t", "s1")
    fresh = write(workspace, "user.tmp", "new!")
    st = user.stat()
    os.utime(fresh, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(fresh, user)
    assert ws.view("t", "s1").files == {"user": ("new!",)}


def test_a_changed_file_is_seen_within_one_second(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    user = write(workspace, "user.md", "Maya")
    clock = Clock()
    ws = source(dirs, recheck_s=1.0, clock=clock)
    assert ws.view("t", "s1").files == {"user": ("Maya",)}
    user.write_text("Mayb", encoding="utf-8")
    bump_mtime(user)
    clock.now += 0.9
    assert ws.view("t", "s1").files == {"user": ("Maya",)}  # not looked at again yet
    assert ws.reads == 1
    clock.now += 0.1
    assert ws.view("t", "s1").files == {"user": ("Mayb",)}
    assert ws.reads == 2


def test_views_are_kept_per_session_and_the_cache_is_bounded(
    dirs: tuple[Path, Path, Path],
) -> None:
    _, workspace, _ = dirs
    write(workspace, "sessions/s1/user.md", "one")
    clock = Clock()
    ws = source(dirs, recheck_s=1.0, clock=clock, max_cached_files=1)
    assert ws.view("t", "s1").session_files == {"user": "one"}
    write(workspace, "sessions/s2/user.md", "two")
    assert ws.view("t", "s2").session_files == {"user": "two"}  # its own view, built now
    (workspace / "sessions" / "s1" / "user.md").unlink()
    assert ws.view("t", "s1").session_files == {}  # s2's view pushed s1's out of the cache
    clock.now += 1.0
    assert ws.view("t", "s2").session_files == {"user": "two"}


def test_created_and_deleted_files_are_noticed(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    soul = write(workspace, "soul.md", "soul")
    ws = source(dirs)
    assert ws.view("t", "s1").files == {"soul": ("soul",)}
    soul.unlink()
    write(workspace, "agent.md", "rules")
    assert ws.view("t", "s1").files == {"agent": ("rules",)}


def test_version_depends_on_content_only(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    soul = write(workspace, "soul.md", "soul")
    version = source(dirs).view("t", "s1").version
    bump_mtime(soul)
    assert source(dirs).view("t", "s1").version == version
    assert source(dirs).view("t", "other").version == version


def test_a_small_cache_still_returns_current_content(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    for name in ("soul.md", "user.md", "agent.md"):
        write(workspace, name, name)
    ws = source(dirs, max_cached_files=1)
    for _ in range(2):
        assert ws.view("t", "s1").files == {
            "soul": ("soul.md",),
            "user": ("user.md",),
            "agent": ("agent.md",),
        }


@pytest.mark.parametrize(
    ("raw", "max_bytes", "expected"),
    [
        (b"0123456789abcdef", 10, "0123456789"),
        (b"\xff\xfeok", 100, "\ufffd\ufffdok"),
        ("éé".encode(), 3, "é\ufffd"),
        (b"\xef\xbb\xbfwith bom", 100, "with bom"),
    ],
)
def test_reads_are_bounded_and_decoded_with_replacement(
    dirs: tuple[Path, Path, Path], raw: bytes, max_bytes: int, expected: str
) -> None:
    _, workspace, _ = dirs
    write(workspace, "soul.md", raw)
    assert source(dirs, max_file_bytes=max_bytes).view("t", "s1").files == {"soul": (expected,)}


def test_symlinks_leading_outside_are_never_opened(dirs: tuple[Path, Path, Path]) -> None:
    managed, workspace, outside = dirs
    (workspace / "soul.md").symlink_to(outside / "secret.md")
    (workspace / "memory").symlink_to(outside, target_is_directory=True)
    (managed / "agent.md").symlink_to(Path("..") / "outside" / "secret.md")
    (workspace / "sessions").mkdir()
    (workspace / "sessions" / "s1").symlink_to(outside, target_is_directory=True)
    write(outside, "user.md", CANARY)
    ws = source(dirs)
    v = ws.view("t", "s1")
    assert v.files == {} and v.session_files == {}
    assert ws.reads == 0


def test_symlinks_inside_the_workspace_are_followed(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    write(workspace, "profiles/maya.md", "Maya")
    (workspace / "user.md").symlink_to(Path("profiles") / "maya.md")
    linked_root = workspace.parent / "ws-link"
    linked_root.symlink_to(workspace, target_is_directory=True)
    ws = FileWorkspace(workspaces={"t": linked_root})
    assert ws.view("t", "s1").files == {"user": ("Maya",)}


def test_special_files_and_directories_are_absent(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    os.mkfifo(workspace / "soul.md")
    (workspace / "user.md").mkdir()
    write(workspace, "agent.md", "rules")
    assert source(dirs).view("t", "s1").files == {"agent": ("rules",)}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_files_are_absent(dirs: tuple[Path, Path, Path]) -> None:
    _, workspace, _ = dirs
    write(workspace, "soul.md", "soul").chmod(0)
    assert source(dirs).view("t", "s1").files == {}


def test_a_missing_workspace_directory_gives_an_empty_view(tmp_path: Path) -> None:
    ws = FileWorkspace(workspaces={"t": tmp_path / "nope"}, managed_dir=tmp_path / "gone")
    assert ws.view("t", "s1") == FileWorkspace(workspaces={}).view("t", "s1")
    assert ws.view("t", "s1").files == {} and ws.reads == 0


def test_example_workspace_is_complete_and_within_the_caps() -> None:
    v = FileWorkspace(workspaces={"default": EXAMPLE}).view("default", "s1")
    assert set(v.files) == {"soul", "user", "agent", "memory"}
    assert all(len(text) < 2000 for (text,) in v.files.values())
    assert "Maya" in v.files["user"][0]
    facts = [line for line in v.files["memory"][0].splitlines() if line.startswith("- ")]
    assert facts and all(re.match(r"- \d{4}-\d{2}-\d{2}: \S", line) for line in facts)
    static, dynamic = assemble_system(v, settings=BootstrapSettings())
    assert "[truncated" not in static + dynamic
    assert static.startswith("<soul>\n") and dynamic.startswith("<user_profile>\n")


def test_a_recheck_with_unchanged_files_returns_the_same_view_object(
    dirs: tuple[Path, Path, Path],
) -> None:
    _, workspace, _ = dirs
    user = write(workspace, "user.md", "Maya")
    write(workspace, "sessions/s1/soul.md", "local")
    clock = Clock()
    ws = source(dirs, recheck_s=1.0, clock=clock)
    first = ws.view("t", "s1")
    clock.now += 1.0
    bump_mtime(user)  # looked at again and re-read, but the content is the same
    assert ws.view("t", "s1") is first
    assert ws.reads == 3
    user.write_text("Mayb", encoding="utf-8")
    bump_mtime(user)
    clock.now += 1.0
    changed = ws.view("t", "s1")
    assert changed is not first
    assert changed.files == {"user": ("Mayb",)}
    assert ws.view("t", "s1") is changed
