"""Compiled templates kept on disk, like Python's ``__pycache__`` (jinja2's own bytecode-cache idea).

    compile_cached(environment, kind, source) -> jinja2.Template

Compiling a large chat template is jinja2's parse, its Python code generation and Python's
``compile``: a few hundred milliseconds for the biggest vendored templates, paid by every process
that loads the model, twice (the render environment and the caps-probing one). The code object
depends only on the source and on the code that generates it, so it is kept under
``$LLAMACT_CACHE/jinja-code`` (default ``~/.cache/llamact/jinja-code``), keyed by the sha256 of
the source, the environment kind, the Python and jinja2 versions and the text of llamact's own
Jinja modules (any change to them makes a new key). A missing, unreadable or corrupt entry is
compiled again; writes are atomic. ``LLAMACT_JINJA_CODE_CACHE=0`` turns the disk cache off.
What it stores is code that llamact generated, in the user's own cache directory (the same trust
as ``__pycache__``); the template itself still runs sandboxed.
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType

import jinja2

__all__ = ["cache_directory", "compile_cached"]


def cache_directory() -> Path | None:
    """Where compiled templates are kept (None: the disk cache is off)."""
    if os.environ.get("LLAMACT_JINJA_CODE_CACHE", "1") == "0":
        return None
    base = os.environ.get("LLAMACT_CACHE")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "llamact") / "jinja-code"


@functools.lru_cache(maxsize=1)
def _generator_identity() -> str:
    """What the generated code depends on besides the source: versions and llamact's Jinja modules."""
    h = hashlib.sha256(f"{sys.version}|{jinja2.__version__}".encode())
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _path(directory: Path, kind: str, source: str) -> Path:
    key = hashlib.sha256(f"{_generator_identity()}|{kind}|".encode() + source.encode("utf-8", "surrogatepass"))
    return directory / f"{key.hexdigest()}.code"


def _load(path: Path) -> CodeType | None:
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _store(path: Path, code: CodeType) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(marshal.dumps(code))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full disk only costs the next process a compile


def compile_cached(environment: jinja2.Environment, kind: str, source: str) -> jinja2.Template:
    """``environment.from_string(source)``, with the code object from (or kept in) the disk cache.
    Raises whatever compiling raises (jinja2.TemplateSyntaxError, ...)."""
    directory = cache_directory()
    path = _path(directory, kind, source) if directory is not None else None
    code = _load(path) if path is not None else None
    if code is None:
        code = environment.compile(source)
        if path is not None:
            _store(path, code)
    return environment.template_class.from_code(environment, code, environment.make_globals(None), None)
