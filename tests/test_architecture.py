"""The house rules of the tree that reading it should show (docs/design.md, "Rules of the house"),
checked on the source: import direction, no import circle anywhere, native objects reached only
through the engine, the server's app a small module. Every import counts, lazy and TYPE_CHECKING ones
included: an import circle is a circle however it is hidden. That no native object is *read* outside
engine/ and native/, whatever name holds it, takes types to state: a mypy plugin holds that rule
(native_reads_plugin.py, run on the package by ``mypy llamact`` in test_code_quality.py), and the
tests here show it is registered and refuses what it should."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import native_reads_plugin
import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "llamact"


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


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    return groups


def _module_cycles(prefix: str) -> list[list[str]]:
    """Import circles among the modules under ``prefix``. A name imported from a package's
    ``__init__`` (``from .. import build_info``) is an edge to that ``__init__`` like any other:
    when the ``__init__`` imports the importer back, that is a circle."""
    nodes = {m for m in GRAPH if m == prefix or m.startswith(prefix + ".")}
    return _cycles({m: GRAPH[m] & nodes for m in nodes})


SUBPACKAGES = sorted(m for m, path in MODULES.items() if path.name == "__init__.py" and m.count(".") == 1)


def test_every_subpackage_is_checked_for_circles() -> None:
    assert SUBPACKAGES == ["llamact.backends", "llamact.chat", "llamact.compat", "llamact.engine", "llamact.grammar",
                           "llamact.jinja", "llamact.native", "llamact.parity", "llamact.peg", "llamact.serve_ray",
                           "llamact.server", "llamact.session"]


@pytest.mark.parametrize("package", ["llamact", *SUBPACKAGES])
def test_no_import_circles(package: str) -> None:
    assert _module_cycles(package) == []


def _folder(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_circles_between_folders() -> None:
    """The subpackages and top-level modules, each one node: imports between them go one way
    (a circle of folders can hide in modules that are each acyclic)."""
    edges: dict[str, set[str]] = {_folder(m): set() for m in GRAPH}
    for m, targets in GRAPH.items():
        edges[_folder(m)].update(_folder(d) for d in targets if _folder(d) != _folder(m))
    assert _cycles(edges) == []


def test_nothing_imports_a_command() -> None:
    """``__main__`` modules are where commands start: library code never imports one (the parity
    command's helpers live in ``parity/locate.py``, under it)."""
    importers = {m: sorted(d for d in GRAPH[m] if d.endswith(".__main__")) for m in GRAPH}
    assert {m: d for m, d in importers.items() if d} == {}


def test_native_is_reached_only_through_the_engine() -> None:
    """Only engine/ imports native (parity included: it measures llamact through the engine, as a user
    would); what the engine hands out is checked by the native reads rule below."""
    outside = {m: sorted(d for d in GRAPH[m] if d.startswith("llamact.native"))
               for m in GRAPH if not m.startswith(("llamact.native", "llamact.engine"))}
    assert {m: d for m, d in outside.items() if d} == {}


@pytest.mark.parametrize(("lower", "upper"), [
    ("llamact.chat", ("llamact.engine", "llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.jinja", ("llamact.chat", "llamact.engine", "llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.grammar", ("llamact.chat", "llamact.engine", "llamact.session", "llamact.server", "llamact.peg",
                         "llamact.compat")),
    ("llamact.peg", ("llamact.chat", "llamact.engine", "llamact.session", "llamact.server", "llamact.compat")),
    ("llamact.engine", ("llamact.session", "llamact.server", "llamact.compat", "llamact.serve_ray")),
    ("llamact.session", ("llamact.server", "llamact.compat", "llamact.serve_ray")),
    # llama-cpp-python's API sits on the engine beside the server: neither uses the other
    ("llamact.server", ("llamact.compat", "llamact.serve_ray")),
    # Ray's replicas sit on the server (its app, its settings): nothing below knows Ray
    ("llamact.serve_ray", ("llamact.compat", "llamact.session", "llamact.native")),
    ("llamact.compat", ("llamact.server", "llamact.session")),
    # a second runtime is a leaf under the engine, as native is: it uses chat, never what sits on it
    ("llamact.backends", ("llamact.engine", "llamact.session", "llamact.server", "llamact.compat",
                          "llamact.native")),
])
def test_imports_point_down(lower: str, upper: tuple[str, ...]) -> None:
    wrong = {m: sorted(d for d in GRAPH[m] if d.startswith(upper))
             for m in GRAPH if m == lower or m.startswith(lower + ".")}
    assert {m: d for m, d in wrong.items() if d} == {}


def test_ray_is_imported_only_by_its_package() -> None:
    """Ray is an optional extra (llamact[ray]): only llamact.serve_ray imports it (and the CLI, to say
    what to install when ``serve --ray`` finds it missing)."""
    importers = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "ray" or n.startswith("ray.") for n in names):
                importers.add(name)
    assert {m for m in importers if not m.startswith("llamact.serve_ray")} == {"llamact.cli"}


def test_nothing_imports_the_parity_tooling() -> None:
    """``llamact.parity`` measures the package from above: nothing in the package imports it."""
    importers = {m: sorted(d for d in GRAPH[m] if d.startswith("llamact.parity"))
                 for m in GRAPH if not m.startswith("llamact.parity")}
    assert {m: d for m, d in importers.items() if d} == {}


def test_the_native_reads_rule_is_registered() -> None:
    """``mypy llamact`` (test_code_quality.py) holds the package to the rule only while pyproject
    registers the plugin."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    mypy_section = text.split("[tool.mypy]", 1)[1].split("\n[", 1)[0]   # (no tomllib on Python 3.10)
    assert 'plugins = ["tests/native_reads_plugin.py"]' in mypy_section


def test_the_public_native_values_are_what_the_package_exports() -> None:
    """The native classes the rule lets be read anywhere are exactly those ``llamact`` exports."""
    import llamact

    exported = {f"{obj.__module__}.{obj.__qualname__}" for name in llamact.__all__
                if isinstance(obj := getattr(llamact, name), type) and obj.__module__.startswith("llamact.native.")}
    assert exported == set(native_reads_plugin.PUBLIC_VALUES)


# A package shaped like llamact's, small enough for mypy to check in seconds: native classes, an
# engine holding them, and reads from a server module through several names.
_PLANTED = {
    "llamact/__init__.py": "",
    "llamact/native/__init__.py": "",
    "llamact/native/context.py": """
        class Context:
            n_threads: int = 1
            _ptr: int = 0
            def decode(self) -> None: ...
        """,
    "llamact/native/devices.py": """
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class Device:
            name: str
        """,
    "llamact/engine/__init__.py": "",
    "llamact/engine/engine.py": """
        from typing import Any, NamedTuple
        from ..native.context import Context
        from ..native.devices import Device
        class Chunk(NamedTuple):
            text: str
        class LlamaEngine:
            context: Context
            draft: Context | None = None
            untyped: Any = None
            n_ctx: int = 0
            _secret: int = 0
            def make_context(self) -> Context: return self.context
            def devices(self) -> list[Device]: return []
            def chunk(self) -> Chunk: return Chunk("")
        class Scheduler:
            engine: LlamaEngine
            def __init__(self, engine: LlamaEngine) -> None:
                self.engine = engine
                self.context = engine.context
        def threads(engine: LlamaEngine) -> int:
            return engine.context.n_threads + engine._secret   # inside engine/: allowed
        """,
    "llamact/server/__init__.py": "",
    "llamact/server/planted.py": """
        from typing import Any
        from ..engine.engine import LlamaEngine, Scheduler
        class Runner:
            def __init__(self, scheduler: Scheduler) -> None:
                self.backend = scheduler
            def lockstep(self) -> bool:
                return self.backend.context.n_threads > 1
        def reads(model: LlamaEngine, anything: Any) -> None:
            model.context.decode()
            model.draft
            model.make_context()
            model._secret
            model.untyped
            model.n_ctx
            model.devices()[0].name
            model.chunk()._replace(text="")
            anything.context.n_threads
        """,
}

# (line in planted.py, what the rule says there); nothing else may be reported
_REFUSED = [
    (7, "a native Context through Scheduler.context"),
    (7, "'n_threads' of a native Context"),
    (9, "a native Context through LlamaEngine.context"),
    (9, "'decode' of a native Context"),
    (10, "a native Context through LlamaEngine.draft"),
    (11, "a native Context through LlamaEngine.make_context"),
    (12, "the private LlamaEngine._secret"),
    (13, "LlamaEngine.untyped, typed Any (type it, so what is read through it can be checked)"),
]


def test_the_native_reads_rule_refuses_reads_through_any_name(tmp_path: Path) -> None:
    for name, text in _PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--hide-error-context",
         "llamact/server/planted.py", "llamact/engine/engine.py"],
        cwd=tmp_path, capture_output=True, text=True)
    reported = []
    for line in proc.stdout.splitlines():
        path, lineno, _kind, message = line.split(":", 3)
        assert path == "llamact/server/planted.py" and "native object read outside engine/native" in message, line
        reported.append((int(lineno), message.split(": ", 1)[1].split(" (the rule:")[0]))
    assert sorted(reported) == sorted(_REFUSED), proc.stdout + proc.stderr


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
