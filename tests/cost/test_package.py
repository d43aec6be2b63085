"""proxy/cost is pure and importable from anywhere: foundation imports only, no I/O module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "proxy" / "cost"
ALLOWED = {
    "__future__",
    "collections",
    "dataclasses",
    "datetime",
    "hashlib",
    "re",
    "tomllib",
    "types",
    "typing",
    "orjson",
    "proxy",
}


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_cost_modules_import_only_the_foundation(path: Path) -> None:
    names = imports(path)
    assert {name.split(".")[0] for name in names} <= ALLOWED
    assert all(name.startswith("proxy.cost") for name in names if name.startswith("proxy"))


def test_the_package_opens_with_a_map() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")))
    assert doc is not None and 5 <= len(doc.splitlines()) <= 15
    for module in sorted(PACKAGE.glob("*.py")):
        if module.stem != "__init__":
            assert f"`{module.stem}`" in doc
