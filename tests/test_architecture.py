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


# -- the runtime contract (engine/backend.py): sibling runtimes, one narrow interface ----------------

RUNTIME_CLASSES = {"LlamaEngine": "llamact.engine.engine", "BatchScheduler": "llamact.engine.batched",
                   "LitertEngine": "llamact.engine.litert_engine"}
TOKEN_STREAMS = {"GenerationStream": "llamact.engine.streams", "SequenceStream": "llamact.engine.batched",
                 "RuntimeGeneration": "llamact.engine.litert_generation"}


def _class(module: str, name: str) -> type:
    import importlib

    return getattr(importlib.import_module(module), name)


def _protocol_members(protocol: type) -> dict[str, object]:
    return {name: value for name, value in vars(protocol).items()
            if not name.startswith("_") or name in ("__iter__", "__next__")}


def _accepts(implementation: object, declared: object) -> list[str]:
    """What ``implementation`` (a function) lacks to be called as ``declared`` is: each declared
    parameter, by name and kind, with a default where the declared one has one."""
    import inspect

    have = inspect.signature(implementation).parameters   # type: ignore[arg-type]
    wrong = []
    for name, want in inspect.signature(declared).parameters.items():   # type: ignore[arg-type]
        if want.kind is want.VAR_KEYWORD:
            if not any(p.kind is p.VAR_KEYWORD for p in have.values()):
                wrong.append("**" + name)
            continue
        got = have.get(name)
        if got is None or (want.kind is want.KEYWORD_ONLY) != (got.kind is got.KEYWORD_ONLY) \
                or (want.default is not want.empty and got.default is got.empty):
            wrong.append(name)
    return wrong


@pytest.mark.parametrize(("protocol", "classes"), [("ChatBackend", RUNTIME_CLASSES), ("TokenStream", TOKEN_STREAMS)])
def test_the_runtimes_keep_the_contract(protocol: str, classes: dict[str, str]) -> None:
    """Every runtime (and every runtime's stream) has each member of the protocol, a method taking
    the protocol's arguments (mypy checks the types: llamact/engine/__init__.py)."""
    contract = _class("llamact.engine.backend", protocol)
    broken = {}
    for name, module in classes.items():
        cls = _class(module, name)
        for member, declared in _protocol_members(contract).items():
            if not hasattr(cls, member) and member not in _instance_attributes(cls):
                broken[f"{name}.{member}"] = "missing"
            elif callable(declared) and not isinstance(declared, property):
                lacks = _accepts(getattr(cls, member), declared)
                if lacks:
                    broken[f"{name}.{member}"] = f"does not take {lacks}"
    assert broken == {}


def _instance_attributes(cls: type) -> set[str]:
    """The ``self.<name> = ...`` assignments of ``cls.__init__`` (a protocol's property may be one)."""
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    return {t.attr for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def _class_bases() -> dict[str, list[str]]:
    """Every class of the package, by name, with the names of its bases as written."""
    bases: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, []).extend(ast.unparse(b).split(".")[-1] for b in node.bases)
    return bases


def test_no_runtime_inherits_from_another() -> None:
    """The runtimes are siblings: none subclasses another, so none carries methods it must refuse;
    they share code through helpers (chat_calls, streams, ChatStream)."""
    runtimes = set(RUNTIME_CLASSES) | set(TOKEN_STREAMS)
    inheriting = {name: base for name, bases in _class_bases().items() for base in bases if base in runtimes}
    assert inheriting == {}
    assert {name: _class_bases()[name] for name in RUNTIME_CLASSES} == {name: [] for name in RUNTIME_CLASSES}


def test_no_runtime_is_found_by_walking_subclasses() -> None:
    """A runtime is picked from a table (engine/loader.py: the file's suffix), never by walking a
    class's subclasses."""
    walks = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in PACKAGE.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Attribute) and node.attr == "__subclasses__"]
    assert walks == []


def test_litert_engine_answers_every_name_of_llama_engine() -> None:
    """Code that takes either engine (the server's routes, the CLI, the session) reads LlamaEngine's
    names: each is answered by LitertEngine or declared there as llama.cpp's alone (LlamaCppOnly,
    a typed refusal), never left to an AttributeError."""
    import inspect

    llama = _class("llamact.engine.engine", "LlamaEngine")
    litert = _class("llamact.engine.litert_engine", "LitertEngine")
    public = {name for name in dir(llama) if not name.startswith("_")
              and not isinstance(inspect.getattr_static(llama, name), classmethod)}   # (load: the loader's)
    assert sorted(public - set(dir(litert))) == []
