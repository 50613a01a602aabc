"""`python -m build --sdist`, then `pip install llamact-X.tar.gz` into a fresh venv, offline.

One slow test (CI runs it): the sdist carries the pinned llama.cpp tree, pruned and verified, so
the install needs no source of llama.cpp at all (LLAMACT_VENDOR_SOURCES=vendor, an empty cache);
the installed package generates with the bundled model exactly what the dev build generates.
Cheap where it can be: only the library is built (no oracle, no upstream tools), through the same
ccache as scripts/_env.sh, in a build directory inside the unpacked sdist under CCACHE_BASEDIR so
that cache hits survive pip's random temporary paths.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams

pytestmark = [pytest.mark.slow, pytest.mark.model]

PROMPT = "The capital of France is"
SCRIPT = """
import json, sys
import llamact
from llamact import GenerationParams, LlamaEngine, ModelParams
with LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=256)) as engine:
    result = engine.complete(sys.argv[2], GenerationParams(greedy=True, max_tokens=8))
print(json.dumps({"file": llamact.__file__, "text": result.text, "backends": llamact.build_info()["backends"]}))
"""


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "LLAMACT_LIB_DIR", "LLAMACT_BIN_DIR", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV"}}
    cache = Path(os.environ.get("LLAMACT_CACHE", Path.home() / ".cache" / "llamact"))
    # No source of llama.cpp but the sdist itself: an empty cache, and only the vendored tree.
    env.update(LLAMACT_CACHE=str(tmp / "empty-cache"), LLAMACT_VENDOR_SOURCES="vendor", TMPDIR=str(tmp / "t"))
    launcher = shutil.which("ccache")
    cmake_args = os.environ.get("CMAKE_ARGS", "")
    if launcher:
        env.update(CCACHE_DIR=os.environ.get("CCACHE_DIR", str(cache / "ccache")),
                   CCACHE_BASEDIR=str(tmp), CCACHE_NOHASHDIR="1")
        cmake_args += f" -DCMAKE_C_COMPILER_LAUNCHER={launcher} -DCMAKE_CXX_COMPILER_LAUNCHER={launcher}"
    env["CMAKE_ARGS"] = cmake_args.strip()
    (tmp / "t").mkdir(exist_ok=True)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def test_sdist_installs_offline_into_a_fresh_venv_and_generates(
    repo_root: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    env = _clean_env(tmp_path)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(dist), str(repo_root)],
         dict(os.environ, LLAMACT_VENDOR_SOURCES="vendor,cache"), repo_root)
    (sdist,) = dist.glob("llamact-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    assert f"{top}/vendor/llama.cpp/include/llama.h" in names
    assert f"{top}/vendor/llama-cpp-omitted.json" in names
    assert f"{top}/build_backend/llamact_backend.py" in names
    assert f"{top}/vendor/llama.cpp/tools/rpc/rpc-server.cpp" in names
    upstream = f"{top}/vendor/llama.cpp/"
    for unwanted in (f"{upstream}models/", f"{upstream}docs/", f"{upstream}tools/server/", f"{upstream}tests/",
                     f"{top}/build/", f"{top}/tests/", f"{top}/llamact/_lib/"):
        assert not [n for n in names if n.startswith(unwanted)], unwanted
    assert not [n for n in names if "/.git/" in n or n.endswith(".gguf")]
    print(f"sdist {sdist.name}: {sdist.stat().st_size / 2**20:.1f} MiB, {len(names)} entries")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env, tmp_path)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "scikit-build-core>=0.10", "cmake>=3.21", "ninja"], env, tmp_path)
    _run([*pip, "--no-build-isolation", "-C", "build-dir=build/{wheel_tag}", str(sdist)], env, tmp_path)

    (dist_info,) = (venv / "lib").glob("python3.*/site-packages/llamact-*.dist-info")
    tags = [line.split(": ", 1)[1] for line in (dist_info / "WHEEL").read_text().splitlines()
            if line.startswith("Tag: ")]
    assert len(tags) == 1 and tags[0].startswith("py3-none-"), tags

    out = json.loads(_run([python, "-c", SCRIPT, str(smollm2_path), PROMPT], env, tmp_path).splitlines()[-1])
    assert Path(out["file"]).is_relative_to(venv), out["file"]
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256)) as engine:
        expected = engine.complete(PROMPT, GenerationParams(greedy=True, max_tokens=8)).text
    assert out["text"] == expected and expected.strip()
