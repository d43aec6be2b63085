"""proxy/recall imports only the foundation: no I/O, no stage, engine, server or adapter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "proxy" / "recall"
ALLOWED = {"proxy.types", "proxy.content", "proxy.sse", "proxy.errors"}
IO = {
    "aiohttp",
    "redis",
    "openai",
    "anthropic",
    "httpx",
    "socket",
    "requests",
    "os",
    "subprocess",
    "pathlib",
    "shutil",
    "asyncio",
}


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted(ROOT.glob("*.py")), ids=lambda p: p.name)
def test_recall_modules_import_only_the_foundation(path: Path) -> None:
    for module in imports(path):
        assert module.split(".")[0] not in IO, f"{path.name} imports {module}"
        if module.startswith("proxy."):
            assert module in ALLOWED or module.startswith("proxy.recall."), (
                f"{path.name} imports {module}"
            )


def test_the_package_map_imports_nothing() -> None:
    assert imports(ROOT / "__init__.py") == {"__future__"} or not imports(ROOT / "__init__.py")


def test_refs_takes_the_call_text_from_the_foundation() -> None:
    """The stages write markers with `proxy.content`'s call text: refs re-exports it, no more."""
    assert {m for m in imports(ROOT / "refs.py") if m.startswith("proxy")} == {"proxy.content"}
