"""benchmarks/ablations.py: every ablation still finds what it replaces, and undoes cleanly."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator

import pytest

from benchmarks.ablations import ABLATIONS, Patches, apply, describe, parse_names
from proxy.server.appkeys import Lifecycle


@pytest.fixture
def patches() -> Iterator[list[Patches]]:
    """Patches applied by a test, undone whatever happens."""
    applied: list[Patches] = []
    yield applied
    for one in reversed(applied):
        one.undo()


@pytest.mark.parametrize("name", list(ABLATIONS))
def test_each_ablation_replaces_attributes_that_exist_and_undo_restores_them(
    name: str, patches: list[Patches]
) -> None:
    applied = apply([name])
    patches.append(applied)
    replaced = [(owner, attr, original) for owner, attr, original, _ in applied.replaced]
    assert replaced, f"{name} replaces nothing"
    assert all(getattr(owner, attr) is not original for owner, attr, original in replaced)
    assert describe(name) and "\n" not in describe(name)
    applied.undo()
    assert all(getattr(owner, attr) is original for owner, attr, original in replaced)


def test_an_unknown_ablation_is_refused_and_nothing_is_applied() -> None:
    with pytest.raises(ValueError, match="unknown ablation"):
        apply(["pipeline", "no_such_feature"])
    with pytest.raises(ValueError, match="no_such_feature"):
        parse_names("task,no_such_feature")


def test_replacing_a_missing_attribute_fails_loudly() -> None:
    with pytest.raises(AttributeError):
        Patches().replace(types.SimpleNamespace(), "moved_away", None)


async def test_task_ablation_runs_inline_and_falls_back_to_a_task_when_suspended(
    patches: list[Patches],
) -> None:
    patches.append(apply(["task"]))
    done: list[str] = []

    async def quick() -> None:
        done.append("quick")

    async def suspends() -> None:
        await asyncio.sleep(0)
        done.append("suspends")

    lifecycle = Lifecycle()
    lifecycle.spawn(quick())
    assert done == ["quick"] and not lifecycle.tasks
    lifecycle.spawn(suspends())
    assert len(lifecycle.tasks) == 1
    await asyncio.gather(*lifecycle.tasks)
    assert done == ["quick", "suspends"]
