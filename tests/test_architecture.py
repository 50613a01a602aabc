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


# -- the server's layout (issue 41): one folder per API family, the layers beside them ----------------

SERVER = PACKAGE / "server"
# lowest first: a module imports from its own folder or the folders before it, never after
SERVER_LAYERS = ("config", "runners", "http", "wire", "models", "serving")
SERVER_FAMILIES = ("admin", "chat", "completions", "embeddings", "messages", "native", "responses", "slots",
                   "templates")
# directly under server/: the package (serve), the ASGI app, the process's stop; nothing else
SERVER_ENTRY_POINTS = {"__init__.py", "app.py", "shutdown.py"}
FAMILY_FILES = {"__init__.py", "routes.py", "wire.py"}   # every family: its routes, its wire format
FAMILY_OPTIONAL = {"stream.py"}                          # a family that writes events of its own


def _server_folder(module: str) -> str | None:
    """The folder of ``llamact.server.<folder>.<module>``; None for a module directly under server/."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and (SERVER / parts[2]).is_dir()) else None


def test_only_the_entry_points_sit_directly_under_server() -> None:
    assert {p.name for p in SERVER.glob("*.py")} == SERVER_ENTRY_POINTS


def test_every_server_folder_is_an_api_family_or_a_layer() -> None:
    folders = {p.name for p in SERVER.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    assert folders == set(SERVER_LAYERS) | set(SERVER_FAMILIES)


@pytest.mark.parametrize("family", SERVER_FAMILIES)
def test_each_api_family_has_the_same_files(family: str) -> None:
    folder = SERVER / family
    files = {p.name for p in folder.iterdir() if p.suffix == ".py"}
    assert FAMILY_FILES <= files <= FAMILY_FILES | FAMILY_OPTIONAL
    assert not [p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert "router = APIRouter()" in (folder / "routes.py").read_text(encoding="utf-8")


def test_the_app_serves_every_family() -> None:
    assert {f"llamact.server.{family}.routes" for family in SERVER_FAMILIES} <= GRAPH["llamact.server.app"]


def test_server_layers_import_downward() -> None:
    """A layer imports its own folder and the layers below; a family imports the layers and, of another
    family, only its wire format (the chat body that Responses and Messages become, the raw completion
    body /completion reads); nothing below the entry points imports them."""
    rank = {folder: i for i, folder in enumerate(SERVER_LAYERS)} | {family: len(SERVER_LAYERS)
                                                                    for family in SERVER_FAMILIES}
    wrong = []
    for module in (m for m in GRAPH if m.startswith("llamact.server.")):
        folder = _server_folder(module)
        if folder is None:
            continue
        for target in GRAPH[module]:
            if not target.startswith("llamact.server"):
                continue
            to = _server_folder(target)
            if to is None:
                wrong.append(f"{module} -> {target} (an entry point)")
            elif to != folder and (rank[to] > rank[folder] or (
                    to in SERVER_FAMILIES and folder in SERVER_FAMILIES and not target.endswith(".wire"))):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_import_circle_between_server_folders() -> None:
    edges: dict[str, set[str]] = {}
    for module in (m for m in GRAPH if m.startswith("llamact.server.")):
        folder = _server_folder(module)
        if folder is not None:
            edges.setdefault(folder, set()).update(
                to for to in (_server_folder(t) for t in GRAPH[module] if t.startswith("llamact.server."))
                if to is not None and to != folder)
    seen: dict[str, int] = {}   # 1: on the path, 2: done

    def circle_from(folder: str, path: list[str]) -> list[str]:
        seen[folder] = 1
        for to in sorted(edges.get(folder, ())):
            if seen.get(to) == 1:
                return [*path, folder, to]
            if to not in seen and (found := circle_from(to, [*path, folder])):
                return found
        seen[folder] = 2
        return []

    circles = [c for f in sorted(edges) if f not in seen and (c := circle_from(f, []))]
    assert circles == []


def test_the_error_kinds_answers_are_written_in_one_table() -> None:
    """The error types an exception's kind decides are named, outside docstrings, only by the HTTP
    edge's table (``server/http/errors.py``): every route and stream asks it."""
    decided = {"server_error", "exceed_context_size_error"}
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.relative_to(SERVER)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in decided and id(node) not in docstrings]
    assert found and {place.split(":")[0] for place in found} == {"http/errors.py"}
