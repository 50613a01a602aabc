"""The house rules of the tree that reading it should show (docs/design.md, "Rules of the house"),
checked on the source: import direction, no import circles, native objects reached only through the
engine, the server's app a small module. Every import counts, lazy and TYPE_CHECKING ones included:
an import circle is a circle however it is hidden."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "llamact"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The llamact modules ``name`` imports (a ``from X import y`` of a submodule y counts as X.y)."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in MODULES else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles(prefix: str) -> list[list[str]]:
    """Strongly connected groups of more than one module under ``prefix`` (a package's ``__init__``
    importing its own submodules is not a circle with them)."""
    nodes = [m for m in GRAPH if m == prefix or m.startswith(prefix + ".")]
    edges = {m: {d for d in GRAPH[m] if d in nodes and not m.startswith(d + ".")} for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:   # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in nodes:
        if node not in index:
            visit(node)
    return groups


@pytest.mark.parametrize("package", ["llamact.chat", "llamact.engine", "llamact.session", "llamact.server",
                                     "llamact.backends"])
def test_no_import_circles(package: str) -> None:
    assert _cycles(package) == []


def test_native_is_reached_only_through_the_engine() -> None:
    outside = {m: sorted(d for d in GRAPH[m] if d.startswith("llamact.native"))
               for m in GRAPH if not m.startswith(("llamact.native", "llamact.engine"))}
    assert {m: d for m, d in outside.items() if d} == {}


@pytest.mark.parametrize(("lower", "upper"), [
    ("llamact.chat", ("llamact.engine", "llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.jinja", ("llamact.chat", "llamact.engine", "llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.grammar", ("llamact.chat", "llamact.engine", "llamact.session", "llamact.server", "llamact.peg",
                         "llamact.compat")),
    ("llamact.peg", ("llamact.chat", "llamact.engine", "llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.engine", ("llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.session", ("llamact.server", "llamact.compat")),
    # llama-cpp-python's API sits on the engine beside the server: neither uses the other
    ("llamact.server", ("llamact.compat",)),
    ("llamact.compat", ("llamact.server", "llamact.session")),
    # a second runtime is a leaf under the engine, as native is: it uses chat, never what sits on it
    ("llamact.backends", ("llamact.engine", "llamact.session", "llamact.server", "llamact.compat",
                          "llamact.native")),
])
def test_imports_point_down(lower: str, upper: tuple[str, ...]) -> None:
    wrong = {m: sorted(d for d in GRAPH[m] if d.startswith(upper))
             for m in GRAPH if m == lower or m.startswith(lower + ".")}
    assert {m: d for m, d in wrong.items() if d} == {}


def _native_reads(path: Path) -> list[str]:
    """``.vocab`` reads, and ``<engine>.model.<attr>`` / ``<engine>.context.<attr>``: reaching through an
    engine to its native objects (an ``engine`` named as such, ``self.engine``, ``state.engine``, ...)."""
    reads = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        inner = node.value
        through_engine = isinstance(inner, ast.Attribute) and inner.attr in ("model", "context") \
            and "engine" in ast.unparse(inner.value).lower()
        if node.attr == "vocab" or through_engine:
            reads.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return reads


@pytest.mark.parametrize("package", ["server", "session", "parity", "compat"])
def test_no_native_objects_read_outside_the_engine(package: str) -> None:
    reads = [r for path in sorted((PACKAGE / package).rglob("*.py")) for r in _native_reads(path)]
    assert reads == []


def test_the_server_app_is_the_guard_and_the_routers() -> None:
    assert len((PACKAGE / "server" / "app.py").read_text(encoding="utf-8").splitlines()) < 150
