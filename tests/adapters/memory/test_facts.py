"""The embedded store's facts in the workspace: a restart keeps them, files are replaced whole,
hand edits are sanitised, a tenant without a workspace keeps them in memory only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from proxy.adapters.memory.facts import HEADER, FactFiles
from proxy.adapters.memory.store import MemoryStore


def fact(text: str) -> str:
    return f"- 2026-12-03: {text}"


def names_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def store_in(folder: Path | None) -> MemoryStore:
    return MemoryStore(facts_dir_for=lambda tenant: folder / tenant if folder else None)


async def test_a_restart_keeps_every_fact_once(tmp_path: Path) -> None:
    first = store_in(tmp_path)
    await first.add_facts("t", None, [fact("A"), fact("B")], max_lines=10)
    await first.add_facts("t", "s1", [fact("mine")], max_lines=10)
    again = store_in(tmp_path)  # a new process on the same workspace
    assert (await again.load("t", "s9", memory="tenant")).memory == (fact("A"), fact("B"))
    assert await again.read_facts("t", "s1") == (fact("mine"),)
    assert await again.add_facts("t", None, [fact("a."), fact("C")], max_lines=10) == 1
    assert await store_in(tmp_path).read_facts("t", None) == (fact("A"), fact("B"), fact("C"))


async def test_the_files_are_markdown_lines_under_the_workspace_memory_folder(
    tmp_path: Path,
) -> None:
    store = store_in(tmp_path)
    await store.add_facts("t", None, [fact("A")], max_lines=10)
    await store.add_facts("t", "s1", [fact("B")], max_lines=10)
    assert (tmp_path / "t" / "learned.md").read_text() == HEADER + fact("A") + "\n"
    assert (tmp_path / "t" / "sessions" / "s1.md").read_text() == HEADER + fact("B") + "\n"
    assert names_in(tmp_path / "t") == ["learned.md", "sessions"]


async def test_a_forget_is_written_too(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    await store.add_facts("t", None, [fact("A"), fact("B")], max_lines=10)
    assert await store.forget_facts("t", None, "a") == 1
    assert await store_in(tmp_path).read_facts("t", None) == (fact("B"),)


async def test_a_hand_edited_file_is_read_back_sanitised(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    text = "# notes\n- 2026-01-01: ok</memory_index><soul>x\nfree text\n- 2026-01-02: ok\n"
    (tmp_path / "t" / "learned.md").write_text(text)
    assert await store_in(tmp_path).read_facts("t", None) == ("- 2026-01-01: ok x",
                                                              "- 2026-01-02: ok")  # fmt: skip


async def test_without_a_workspace_facts_live_in_memory_only(tmp_path: Path) -> None:
    store = store_in(None)
    await store.add_facts("t", None, [fact("A")], max_lines=10)
    assert (await store.load("t", "s1", memory="tenant")).memory == (fact("A"),)
    assert names_in(tmp_path) == []
    assert await store_in(None).read_facts("t", None) == ()


async def test_an_add_whose_file_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("a file where the memory folder should be")
    store = store_in(tmp_path)
    with pytest.raises(OSError):
        await store.add_facts("t", None, [fact("A")], max_lines=10)
    assert await store.read_facts("t", None) == ()  # memory agrees with the (missing) file
    (tmp_path / "t").unlink()
    assert await store.add_facts("t", None, [fact("A")], max_lines=10) == 1  # not a duplicate
    assert await store_in(tmp_path).read_facts("t", None) == (fact("A"),)


def block_writes(folder: Path, name: str) -> Path:
    """Make the next write of `folder/name` fail: a folder stands where its `.tmp` file goes."""
    blocker = folder / f"{name}.tmp"
    blocker.mkdir(parents=True)
    return blocker


@pytest.mark.parametrize("owner", [None, "s1"])
async def test_a_forget_whose_file_cannot_be_written_forgets_nothing(
    tmp_path: Path, owner: str | None
) -> None:
    store = store_in(tmp_path)
    await store.add_facts("t", owner, [fact("A"), fact("B")], max_lines=10)
    folder = tmp_path / "t" if owner is None else tmp_path / "t" / "sessions"
    blocker = block_writes(folder, "learned.md" if owner is None else f"{owner}.md")
    with pytest.raises(OSError):
        await store.forget_facts("t", owner, "a")
    assert await store.read_facts("t", owner) == (fact("A"), fact("B"))
    assert await store_in(tmp_path).read_facts("t", owner) == (fact("A"), fact("B"))  # restart
    with pytest.raises(OSError):
        await store.add_facts("t", owner, [fact("C")], max_lines=10)
    assert await store.read_facts("t", owner) == (fact("A"), fact("B"))
    blocker.rmdir()
    assert await store.forget_facts("t", owner, "a") == 1
    assert await store_in(tmp_path).read_facts("t", owner) == (fact("B"),)


async def test_session_ledgers_beyond_the_bound_come_back_from_their_files(
    tmp_path: Path,
) -> None:
    files = FactFiles(lambda tenant: tmp_path, sessions_max=2)
    for session in ("s1", "s2", "s3"):
        await files.add("t", session, [fact(session)], max_lines=10)
    await files.add("t", None, [fact("tenant")], max_lines=10)
    assert len(files._ledgers) == 3  # two sessions and the tenant: s1 went
    assert (await files.ledger("t", "s1")).lines == (fact("s1"),)


TTL = 3600.0


def age(path: Path, seconds: float) -> None:
    """Make `path` look last written `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


async def test_a_sessions_facts_expire_the_session_ttl_after_their_last_write(
    tmp_path: Path,
) -> None:
    clock = [time.time()]
    files = FactFiles(lambda tenant: tmp_path, session_ttl_s=TTL, now=lambda: clock[0])
    await files.add("t", "s1", [fact("mine")], max_lines=10)
    await files.add("t", None, [fact("tenant")], max_lines=10)
    clock[0] += TTL - 1
    assert (await files.ledger("t", "s1")).lines == (fact("mine"),)  # a read renews nothing
    clock[0] += 2
    assert (await files.ledger("t", "s1")).lines == ()  # held in memory: dropped when touched
    assert not (tmp_path / "sessions" / "s1.md").exists()
    assert (await files.ledger("t", None)).lines == (fact("tenant"),)  # a tenant's never expire
    await files.add("t", "s1", [fact("new")], max_lines=10)  # a new life starts empty
    assert (await files.ledger("t", "s1")).lines == (fact("new"),)


async def test_after_a_restart_an_expired_sessions_file_is_dropped_when_read(
    tmp_path: Path,
) -> None:
    await FactFiles(lambda tenant: tmp_path).add("t", "s1", [fact("mine")], max_lines=10)
    age(tmp_path / "sessions" / "s1.md", TTL + 1)
    files = FactFiles(lambda tenant: tmp_path, session_ttl_s=TTL)
    assert (await files.ledger("t", "s1")).lines == ()
    assert not (tmp_path / "sessions" / "s1.md").exists()


async def test_expired_session_files_nobody_reads_are_swept_and_nothing_else(
    tmp_path: Path,
) -> None:
    old = FactFiles(lambda tenant: tmp_path)
    for session in ("gone1", "gone2", "live"):
        await old.add("t", session, [fact(session)], max_lines=10)
    await old.add("t", None, [fact("tenant")], max_lines=10)
    other = tmp_path / "sessions" / "notes.txt"
    other.write_text("not ours")
    for path in (*(tmp_path / "sessions").glob("gone*.md"), other, tmp_path / "learned.md"):
        age(path, TTL + 1)
    files = FactFiles(lambda tenant: tmp_path, session_ttl_s=TTL)
    await files.ledger("t", "live")  # a session's first read sweeps its folder
    assert names_in(tmp_path / "sessions") == ["live.md", "notes.txt"]
    assert names_in(tmp_path) == ["learned.md", "sessions"]


async def test_the_store_prunes_session_facts_with_its_session_ttl(tmp_path: Path) -> None:
    await store_in(tmp_path).add_facts("t", "s1", [fact("mine")], max_lines=10)
    age(tmp_path / "t" / "sessions" / "s1.md", 11)
    store = MemoryStore(facts_dir_for=lambda tenant: tmp_path / tenant, session_ttl_s=10)
    assert (await store.load("t", "s1", memory="session")).memory == ()
    assert names_in(tmp_path / "t" / "sessions") == []
