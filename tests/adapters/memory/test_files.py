"""The embedded store's files: replaced whole through a `.tmp` beside them, stale ones swept."""

from __future__ import annotations

import os
from pathlib import Path

from proxy.adapters.memory.files import remove_stale, replace_file


def test_a_file_is_replaced_whole_and_its_folder_made(tmp_path: Path) -> None:
    path = tmp_path / "new" / "ctx-s.json"
    replace_file(path, b"one")
    replace_file(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in path.parent.iterdir()) == ["ctx-s.json"]


def test_only_old_regular_files_matching_the_pattern_are_removed(tmp_path: Path) -> None:
    for name in ("old.md", "new.md", "old.json"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "dir.md").mkdir()
    (tmp_path / "link.md").symlink_to(tmp_path / "old.json")
    for name in ("old.md", "old.json", "dir.md", "link.md"):
        os.utime(tmp_path / name, (100.0, 100.0), follow_symlinks=False)
    remove_stale(tmp_path, "*.md", before=1_000.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.md", "link.md", "new.md", "old.json"]
