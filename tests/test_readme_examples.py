"""The README's runnable examples run. Each ```python block right after a ``<!-- runnable -->`` line
is run, in the README's order, in one fresh Python process (later examples may use names an
earlier one defined, as a reader pasting them in turn would), in a temporary directory. A broken
example -- a renamed API, an example that raises -- fails here, with its output."""

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


def test_readme_examples_run(tmp_path: Path) -> None:
    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4, "the README's runnable examples are marked"
    script = []
    for line, source in blocks:
        compile(source, f"README.md:{line}", "exec")   # a syntax error names its block
        script.append(f"print('=== README.md:{line}', flush=True)\n{source}\n")
    program = tmp_path / "readme_examples.py"
    program.write_text("".join(script), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(program)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    assert proc.stdout.count("=== README.md:") == len(blocks)
