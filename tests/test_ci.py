"""CI runs on any machine: no tracked file names a path of one machine's layout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MACHINE_PATHS = ("/" + "work/", "/" + "shared/traces")  # split: this file names no path itself
"""Absolute folders of the machines this was built on; `../shared/traces` (relative) is fine."""
DATA = ("benchmarks/data/", "tests/test_ci.py")
"""Recorded sessions (anonymised as they were) and this file, which names the patterns."""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files")
def test_no_tracked_file_names_an_absolute_path_of_one_machine() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    offenders = []
    for name in listed.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or name.startswith(DATA) or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for line_number, line in enumerate(text.splitlines(), 1):
            relative = line.replace("../shared/traces", "")
            if any(pattern in relative for pattern in MACHINE_PATHS):
                offenders.append(f"{name}:{line_number}")
    assert offenders == []
