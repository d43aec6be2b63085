"""The embedded store's facts in the workspace: a restart keeps them, files are replaced whole,
hand edits are sanitised, a tenant without a workspace keeps them in memory only."""

from __future__ import annotations

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
