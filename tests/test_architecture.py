"""The architecture of STYLE.md, checked by walking every module's imports (ast):

- the import direction: a module imports only its own floor or the floors below it (`FLOORS`);
  a foundation room (memory/) imports the foundation modules and itself only; the pure rooms
  (stages/, translate/, recall/, cost/) import the foundation and themselves only,
  and adapter rooms never each other;
- network libraries only at the edges (adapters/, server/, cli/, demo/); no I/O module at all in
  the pure modules (everything but the async shells and the edges);
- no import cycle between modules (type-only imports count: they are how cycles crept in);
- nothing mutable at module level (STYLE rule 5: no singletons, no import-time state);
- every package opens with its map (a docstring of a few lines), no module is over 300 lines and
  no function over 50 (decorators and docstring included);
- the top level of `proxy/` holds at most 16 modules.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "proxy"
NETWORK = {"aiohttp", "redis", "openai", "anthropic", "httpx", "socket", "requests", "hiredis"}
IO = NETWORK | {"os", "subprocess", "pathlib", "shutil", "asyncio", "tempfile", "signal"}
EDGES = ("adapters", "server", "cli", "demo")
PURE_ROOMS = ("stages", "translate", "recall", "cost")
"""Imports the foundation and its own room only; no I/O. New pure packages land here."""
EDGE_ROOMS = ("inbound",)
"""Pure converters between a client's API and the internal form: the foundation and translate/."""
FOUNDATION = {
    "types", "errors", "ports", "content", "history", "identity", "sse", "usage", "models", "logs",
    "exact_json",
}  # fmt: skip
FOUNDATION_ROOMS = ("memory",)
"""Packages on the foundation floor: pure, importing only the foundation (`proxy.memory`, the
learned facts' formats, which the bootstrap stage, compaction and the stores share)."""
FLOORS = {
    "foundation": 0,
    **dict.fromkeys(FOUNDATION_ROOMS, 0),
    **dict.fromkeys(PURE_ROOMS, 1),
    "compaction": 2,
    **dict.fromkeys(EDGE_ROOMS, 2),
    "settings": 3,
    "engine": 4,
    "adapters": 5,
    "server": 6,
    "cli": 7,
    "demo": 7,
    "__main__": 7,
}
SHELLS = {
    "compaction/compactor.py",  # background tasks (asyncio), behind the ports
    "compaction/writeback.py",  # the facts' write, bounded by a timeout (asyncio), behind a port
    "recall/answer.py",  # the async shell of one recall call, behind a port
    "config.py",  # reads the TOML file
    "config_tables.py",  # `Path` settings
    "settings.py",  # `Path` fields
    "logs.py",  # the log handler on stderr
}
"""Modules outside the edges allowed an I/O module (never a network library)."""
MAX_LINES = 300
MAX_FUNCTION_LINES = 50
LONG_FUNCTIONS: frozenset[str] = frozenset()
"""Functions allowed over `MAX_FUNCTION_LINES` for now, as `module:name` (none today)."""
MAX_TOP_LEVEL = 16
IMMUTABLE_CALLS = {
    "frozenset", "tuple", "MappingProxyType", "compile", "AppKey", "RequestKey", "TypeVar",
    "getLogger", "ContextVar", "NewType", "Literal", "Timeouts", "len", "getattr", "join",
    "format", "StageReport", "SessionState", "WorkspaceView", "Draft", "object", "float", "int",
}  # fmt: skip
"""Module-level calls that build something immutable (or a logger, a context variable, a key)."""


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def name_of(path: Path) -> str:
    parts = ["proxy", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def floor_of(path: Path) -> tuple[str, int]:
    """(room, floor) of a module: its top package, or the foundation / settings floor."""
    parts = path.relative_to(ROOT).parts
    if len(parts) > 1:
        return parts[0], FLOORS[parts[0]]
    stem = path.stem
    if stem in FOUNDATION or stem == "__init__":
        return "foundation", 0
    if stem in ("settings", "config", "config_tables"):
        return "settings", FLOORS["settings"]
    return stem, FLOORS[stem]


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(path: Path) -> list[str]:
    """Every module name an import statement of `path` names, type-only ones included; for
    `from a import b` both `a` and `a.b` (b may be a module)."""
    found: list[str] = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def imported_roots(path: Path) -> set[str]:
    """The top-level names of every module `path` imports."""
    return {name.split(".")[0] for name in imports(path)}


@cache
def known() -> dict[str, Path]:
    return {name_of(path): path for path in modules()}


def proxy_imports(path: Path) -> set[Path]:
    """The modules of the project that `path` imports (packages by their `__init__`)."""
    table = known()
    return {table[name] for name in imports(path) if name in table} - {path}


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_imports_go_down_the_floors(path: Path) -> None:
    room, floor = floor_of(path)
    for target in proxy_imports(path):
        if target.name == "__init__.py":
            continue  # a package's map holds no code
        other, other_floor = floor_of(target)
        assert other_floor <= floor, f"{rel(path)} imports {rel(target)}, a floor above"
        if room in FOUNDATION_ROOMS:
            assert other in ("foundation", room), f"{rel(path)} imports {rel(target)}"
        if floor == other_floor == FLOORS["stages"]:
            assert other == room, f"{rel(path)} imports {rel(target)}: pure rooms are siblings"
        if room == other == "adapters":
            own = path.relative_to(ROOT).parts[:2]
            theirs = target.relative_to(ROOT).parts[:2]
            if len(own) > 1 and len(theirs) > 1 and not own[1].endswith(".py"):
                assert theirs == own or theirs[1].endswith(".py"), (
                    f"{rel(path)} imports {rel(target)}: adapter rooms are independent"
                )


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_network_libraries_only_at_the_edges(path: Path) -> None:
    room, _ = floor_of(path)
    roots = {name.split(".")[0] for name in imports(path)}
    if room in EDGES or path.name == "__main__.py":
        return
    assert not roots & NETWORK, f"{rel(path)} imports a network library"
    if rel(path) not in SHELLS:
        assert not roots & IO, f"{rel(path)} imports an I/O module"


def test_pure_rooms_and_the_engine_do_no_io() -> None:
    """The list of shells stays short: every module of a pure room is checked above."""
    assert all(shell.split("/")[0] not in ("stages", "translate", "engine") for shell in SHELLS)


def test_no_import_cycles_between_modules() -> None:
    graph = {path: proxy_imports(path) for path in modules()}
    state: dict[Path, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(node: Path, trail: list[Path]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                loop = [*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt]
                cycles.append(" -> ".join(rel(p) for p in loop))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _immutable(value: ast.expr | None) -> bool:
    if value is None:
        return True
    if isinstance(value, ast.Constant | ast.JoinedStr | ast.Name | ast.Attribute | ast.Lambda):
        return True
    if isinstance(value, ast.Subscript):  # a type alias: `dict[str, Any]`, `Callable[...]`
        return True
    if isinstance(value, ast.BinOp):  # arithmetic on constants, a union of types or frozensets
        right = value.right
        return _immutable(value.left) and (_immutable(right) or isinstance(right, ast.Set))
    if isinstance(value, ast.UnaryOp):
        return _immutable(value.operand)
    if isinstance(value, ast.Starred):  # `(*TERMINAL, "done")`: a tuple of immutable parts
        return _immutable(value.value)
    if isinstance(value, ast.Tuple):
        return all(_immutable(item) for item in value.elts)
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in IMMUTABLE_CALLS or (name[:1].isupper() and name.endswith(("Settings", "View"))):
            return True  # frozen settings and views
        if name in ("frozenset", "tuple") or name.startswith("_NO"):
            return True
    return False


def _module_level(node: ast.AST) -> list[ast.stmt]:
    """Statements run at import: the body, and the bodies of top-level `if`/`try` blocks."""
    out: list[ast.stmt] = []
    for stmt in getattr(node, "body", []):
        if isinstance(stmt, ast.If | ast.Try):
            out += _module_level(stmt) + [s for h in getattr(stmt, "handlers", []) for s in h.body]
            out += stmt.orelse
        else:
            out.append(stmt)
    return out


@pytest.mark.parametrize("path", [p for p in modules() if p.name != "__main__.py"], ids=rel)
def test_nothing_mutable_at_module_level(path: Path) -> None:
    """`__main__` runs the command when imported: that is what it is for."""
    for stmt in _module_level(tree(path)):
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names == ["__all__"]:
                continue
            assert _immutable(stmt.value), (
                f"{rel(path)}:{stmt.lineno}: {', '.join(names)} is mutable at module level"
            )
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in stmt.decorator_list:
                text = ast.unparse(decorator)
                assert "cache" not in text, f"{rel(path)}:{stmt.lineno}: a module-level cache"
        elif isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
            raise AssertionError(f"{rel(path)}:{stmt.lineno}: a call at import time")


@pytest.mark.parametrize("path", sorted(ROOT.rglob("__init__.py")), ids=rel)
def test_every_package_opens_with_its_map(path: Path) -> None:
    doc = ast.get_docstring(tree(path))
    assert doc, f"{rel(path)} has no map"
    if path.parent != ROOT:
        assert 5 <= len(doc.splitlines()) <= 30, f"{rel(path)}: a map is a few lines"
        assert not [s for s in tree(path).body if not isinstance(s, ast.Expr | ast.ImportFrom)]


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_module_is_over_300_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{rel(path)} has {lines} lines"


def function_sizes(path: Path) -> list[tuple[str, int]]:
    """(name, lines) of every function and method in `path`, nested ones included: from its first
    decorator to its last line."""
    sizes: list[tuple[str, int]] = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            sizes.append((node.name, (node.end_lineno or node.lineno) - start + 1))
    return sizes


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_function_is_over_50_lines(path: Path) -> None:
    long = [
        f"{rel(path)}:{name} has {lines} lines"
        for name, lines in function_sizes(path)
        if lines > MAX_FUNCTION_LINES and f"{rel(path)}:{name}" not in LONG_FUNCTIONS
    ]
    assert not long, "\n".join(long)


def test_the_top_level_holds_at_most_16_modules() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top
