"""The embedded store's archive as real files: transcripts appended, snapshots replaced whole."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from proxy.adapters.memory.archive import ArchiveFiles


def in_folder(root: Path) -> ArchiveFiles:
    """Files of tenant `t` under `root/t/sessions`; no folder for any other tenant."""
    return ArchiveFiles(lambda tenant: root / tenant / "sessions" if tenant == "t" else None)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def lines_of(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_append_transcript_writes_one_json_line_per_entry(tmp_path: Path) -> None:
    files = in_folder(tmp_path)
    await files.append_transcript("t", "s1", "1-0", b'[{"role":"user","content":"hi"}]')
    await files.append_transcript("t", "s2", "2-0", b"[]")
    raw = tmp_path / "t" / "sessions" / "raw.jsonl"
    assert raw.read_bytes().endswith(b"}\n") and raw.read_bytes().count(b"\n") == 2
    assert lines_of(raw) == [
        {"session": "s1", "id": "1-0", "messages": [{"role": "user", "content": "hi"}]},
        {"session": "s2", "id": "2-0", "messages": []},
    ]


@pytest.mark.parametrize("session", ['a"b', "s\\1", "é", "a\nb"])
async def test_append_transcript_escapes_the_session_and_id_as_json(
    tmp_path: Path, session: str
) -> None:
    await in_folder(tmp_path).append_transcript("t", session, f"{session}-0", b"[1]")
    assert lines_of(tmp_path / "t" / "sessions" / "raw.jsonl") == [
        {"session": session, "id": f"{session}-0", "messages": [1]}
    ]


async def test_append_transcript_keeps_what_the_file_already_holds(tmp_path: Path) -> None:
    folder = tmp_path / "t" / "sessions"
    folder.mkdir(parents=True)
    (folder / "raw.jsonl").write_bytes(b'{"old":1}\n')
    await in_folder(tmp_path).append_transcript("t", "s1", "1-0", b"[]")
    assert lines_of(folder / "raw.jsonl") == [
        {"old": 1},
        {"session": "s1", "id": "1-0", "messages": []},
    ]


async def test_write_snapshot_replaces_the_sessions_file_whole(tmp_path: Path) -> None:
    files = in_folder(tmp_path)
    await files.write_snapshot("t", "s1", b'[{"role":"user","content":"a long first snapshot"}]')
    await files.write_snapshot("t", "s1", b"[]")
    await files.write_snapshot("t", "s2", b"[2]")
    folder = tmp_path / "t" / "sessions"
    assert (folder / "ctx-s1.json").read_bytes() == b"[]"
    assert (folder / "ctx-s2.json").read_bytes() == b"[2]"
    assert files_under(folder) == ["ctx-s1.json", "ctx-s2.json"]


async def test_a_tenant_without_a_folder_gets_no_files(tmp_path: Path) -> None:
    files = in_folder(tmp_path)
    await files.append_transcript("other", "s1", "1-0", b"[]")
    await files.write_snapshot("other", "s1", b"[]")
    assert files_under(tmp_path) == []


async def test_raw_jsonl_rolls_over_to_raw_jsonl_1_past_its_limit(tmp_path: Path) -> None:
    files = ArchiveFiles(lambda tenant: tmp_path, raw_max_bytes=250)
    history = orjson.dumps([{"role": "user", "content": "x" * 50}])  # a line of 120 bytes
    for index in range(5):
        await files.append_transcript("t", "s1", f"{index}-0", history)
    current, previous = tmp_path / "raw.jsonl", tmp_path / "raw.jsonl.1"
    assert [line["id"] for line in lines_of(current)] == ["4-0"]
    assert [line["id"] for line in lines_of(previous)] == ["2-0", "3-0"]
    assert current.stat().st_size <= 250 and previous.stat().st_size <= 250


async def test_a_snapshot_write_removes_snapshots_older_than_the_ttl_and_nothing_else(
    tmp_path: Path,
) -> None:
    files = ArchiveFiles(lambda tenant: tmp_path, snapshot_ttl_s=3600)
    stale, fresh = tmp_path / "ctx-old.json", tmp_path / "ctx-recent.json"
    layer, other = tmp_path / "ctx-dir.json", tmp_path / "notes.json"
    for path in (stale, fresh, other):
        path.write_bytes(b"[]")
    layer.mkdir()  # a session layer that happens to match the pattern
    long_ago = time.time() - 7200
    for path in (stale, other, layer):
        os.utime(path, (long_ago, long_ago))
    await files.write_snapshot("t", "new", b"[1]")
    assert files_under(tmp_path) == ["ctx-new.json", "ctx-recent.json", "notes.json"]
    assert layer.is_dir()


async def test_without_a_snapshot_ttl_no_snapshot_is_removed(tmp_path: Path) -> None:
    files = ArchiveFiles(lambda tenant: tmp_path)
    stale = tmp_path / "ctx-old.json"
    stale.write_bytes(b"[]")
    os.utime(stale, (0, 0))
    await files.write_snapshot("t", "new", b"[1]")
    assert stale.exists()
