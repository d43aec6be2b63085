"""The import direction of STYLE.md: network libraries only in adapters/ and server/, pure
stages free of I/O, nothing mutable or side-effecting at module level."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "proxy"
NETWORK = {"aiohttp", "redis", "openai", "anthropic", "httpx", "socket", "requests"}
IO = NETWORK | {"os", "subprocess", "pathlib", "shutil", "asyncio"}
EDGE = {"adapters", "server", "cli", "demo"}
ENTRY = {"__main__.py", "config.py"}


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_network_libraries_only_at_the_edges(path: Path) -> None:
    rel = path.relative_to(ROOT)
    if rel.parts[0] in EDGE or rel.name in ENTRY:
        return
    assert not imported_roots(path) & NETWORK, f"{rel} imports a network library"


@pytest.mark.parametrize("path", sorted((ROOT / "stages").glob("*.py")), ids=lambda p: p.name)
def test_stages_do_no_io(path: Path) -> None:
    assert not imported_roots(path) & IO, f"stage {path.name} imports an I/O module"


@pytest.mark.parametrize("path", sorted((ROOT / "translate").glob("*.py")), ids=lambda p: p.name)
def test_translators_are_pure(path: Path) -> None:
    assert not imported_roots(path) & IO, f"translator {path.name} imports an I/O module"
