"""The README's runnable examples run. Each ```python block right after a ``<!-- runnable -->`` line
is run on its own, in a fresh Python process and a temporary directory of its own, as a reader
pasting just that example would run it: each example brings its own imports and names. A broken
example -- a renamed API, a missing import, an example that raises -- fails here, with its output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- runnable -->"


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, source) of each python block whose fence follows the marker line."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == MARKER:
            fence = i + 1
            if fence >= len(lines) or lines[fence].strip() != "```python":
                raise AssertionError(f"README.md:{i + 1}: {MARKER} must be followed by a ```python fence")
            end = next(j for j in range(fence + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((fence + 2, "\n".join(lines[fence + 1:end])))
    return blocks


def test_the_marker_finds_blocks_and_refuses_a_misplaced_one() -> None:
    text = f"a\n{MARKER}\n```python\nx = 1\n```\n{MARKER}\n```bash\nls\n```\n"
    with pytest.raises(AssertionError, match="must be followed"):
        runnable_blocks(text)
    assert runnable_blocks(f"{MARKER}\n```python\nx = 1\ny = 2\n```\n") == [(3, "x = 1\ny = 2")]


def test_the_blocks_run_apart(tmp_path: Path) -> None:
    """A block using a name only an earlier block defines fails: blocks do not share a process."""
    (tmp_path / "README.md").write_text(f"{MARKER}\n```python\nx = 1\n```\n{MARKER}\n```python\nprint(x)\n```\n")
    blocks = runnable_blocks((tmp_path / "README.md").read_text())
    assert run_block(tmp_path / "a", *blocks[0]).returncode == 0
    proc = run_block(tmp_path / "b", *blocks[1])
    assert proc.returncode != 0 and "NameError" in proc.stderr


def run_block(directory: Path, line: int, source: str) -> subprocess.CompletedProcess[str]:
    directory.mkdir()
    program = directory / f"readme_{line}.py"
    # blank lines before the block: a traceback names README.md's own line numbers
    program.write_text("\n" * (line - 1) + source + "\n", encoding="utf-8")
    return subprocess.run([sys.executable, str(program)], cwd=directory, capture_output=True, text=True,
                          timeout=900)   # a hang guard, not a speed check


BLOCKS = runnable_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_marks_its_examples() -> None:
    assert len(BLOCKS) >= 5, "the README's runnable examples are marked"


@pytest.mark.parametrize(("line", "source"), BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_readme_example_runs_on_its_own(tmp_path: Path, line: int, source: str) -> None:
    compile(source, f"README.md:{line}", "exec")   # a syntax error names its block
    proc = run_block(tmp_path / "example", line, source)
    assert proc.returncode == 0, f"README.md:{line}\n" + proc.stdout[-4000:] + proc.stderr[-6000:]



def test_a_streamed_example_ends_its_line_before_the_next_print() -> None:
    """A block that streams with ``end=""`` ends the line (``print()``) before it prints anything else:
    the raw-text example's complete() line ran into the streamed story."""
    streaming = [(line, source) for line, source in BLOCKS if 'end=""' in source]
    assert streaming
    for line, source in streaming:
        rest = source.split('end=""', 1)[1].split("\n")[1:]
        following = next(text.strip() for text in rest if text.strip().startswith("print("))
        assert following == "print()" or following.startswith("print()"), f"README.md:{line}: {following}"


def test_the_images_examples_writer_says_to_install_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The images example's projector writer needs ``gguf``, which llamact does not install: without
    it, a LlamaException says what to install (not a bare ModuleNotFoundError)."""
    from llamact.errors import LlamaException
    from llamact.parity.projectors import write_projector

    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(LlamaException, match=r"pip install gguf"):
        write_projector(tmp_path / "mmproj.gguf", n_embd_text=576)
    assert "pip install gguf" in README.read_text(encoding="utf-8")
