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
                           "llamact.jinja", "llamact.native", "llamact.parity", "llamact.peg", "llamact.server",
                           "llamact.session"]


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
