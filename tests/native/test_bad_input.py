"""Bad input: every mistake a user can make raises a typed LlamaException with a message that
says what to do, and never crashes the process.

Files that might make native code misbehave (truncated or corrupted GGUF, invalid regexes, ...)
are opened in a child process: a segfault or abort there fails the test instead of killing pytest.
"""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from child_process import run_child

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import (
    LlamaContextException,
    LlamaException,
    LlamaInferenceException,
    LlamaModelException,
    LlamaStateException,
)
from llamact.native import sampler as s
from llamact.native.context import Batch, Context, ContextOptions
from llamact.native.model import Model

# -- helpers ----------------------------------------------------------------------------------------

def child_outcome(proc: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """(exception class, message) a child printed as RAISED / MESSAGE lines; fails on a crash."""
    assert proc.returncode == 0, (
        f"the child process died (exit {proc.returncode}): native code crashed on bad input\n"
        f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}"
    )
    raised = [line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("RAISED ")]
    message = [line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("MESSAGE ")]
    assert raised, f"no exception was raised; stdout: {proc.stdout[-2000:]}"
    return raised[0], message[0] if message else ""


STEPS_PRELUDE = r"""
import sys
from llamact.native.model import Model


def step(name, fn):
    try:
        result = fn()
    except Exception as exc:
        print("STEP", name, type(exc).__name__, "|", str(exc).replace("\n", " "), flush=True)
    else:
        print("STEP", name, "OK", "|", repr(result).replace("\n", " "), flush=True)


"""


def run_steps(body: str, *args: str, cwd: Path) -> dict[str, tuple[str, str]]:
    """Run ``body`` (which calls ``step(name, fn)``) in a child; name -> (exception class or OK, message).
    For calls that llama.cpp answers with abort() or a huge allocation when llamact's checks regress."""
    proc = run_child(STEPS_PRELUDE + body + '\nprint("DONE", flush=True)\n', *args, cwd=cwd)
    steps: dict[str, tuple[str, str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("STEP "):
            name, kind, rest = line[5:].split(" ", 2)
            steps[name] = (kind, rest.removeprefix("| "))
    assert proc.returncode == 0 and "DONE" in proc.stdout, (
        f"the child process died (exit {proc.returncode}) after steps {list(steps)}: native code "
        f"crashed on bad input\nstderr: {proc.stderr[-3000:]}"
    )
    return steps


def copy_prefix(src: Path, dst: Path, n: int, patches: Sequence[tuple[int, bytes]] = ()) -> Path:
    with src.open("rb") as fh:
        data = bytearray(fh.read(n))
    for offset, raw in patches:
        data[offset : offset + len(raw)] = raw
    dst.write_bytes(bytes(data))
    return dst


_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types
_STRING, _ARRAY = 8, 9


def gguf_layout(path: Path) -> dict[str, int]:
    """Byte offsets of a GGUF file's sections: a minimal reader of the documented format."""
    data = path.read_bytes()[: 64 * 2**20]  # header, metadata and tensor infos are near the start
    pos = 0

    def take(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return int(value)

    def skip_string() -> None:
        nonlocal pos
        length = take("<Q")
        pos += length

    def skip_value(vtype: int) -> None:
        nonlocal pos
        if vtype == _STRING:
            skip_string()
        elif vtype == _ARRAY:
            etype, count = take("<I"), take("<Q")
            if etype in _SCALAR_SIZES:
                pos += _SCALAR_SIZES[etype] * count
            else:
                for _ in range(count):
                    skip_value(etype)
        else:
            pos += _SCALAR_SIZES[vtype]

    assert data[:4] == b"GGUF"
    pos = 8
    n_tensors, n_kv = take("<Q"), take("<Q")
    first_kv = pos
    first_key_len = struct.unpack_from("<Q", data, pos)[0]
    alignment = 32
    for _ in range(n_kv):
        key_len = take("<Q")
        key = data[pos : pos + key_len]
        pos += key_len
        vtype = take("<I")
        if key == b"general.alignment":
            alignment = struct.unpack_from("<I", data, pos)[0]
        skip_value(vtype)
    tensor_info = pos
    tensor_name_len = struct.unpack_from("<Q", data, pos)[0]
    for _ in range(n_tensors):
        skip_string()
        n_dims = take("<I")
        pos += 8 * n_dims + 4 + 8
    data_offset = (pos + alignment - 1) // alignment * alignment
    return {
        "size": path.stat().st_size,
        "first_kv": first_kv,
        "first_key_len": first_key_len,
        "tensor_info": tensor_info,
        "tensor_name_len": tensor_name_len,
        "data": data_offset,
    }


@pytest.fixture(scope="module")
def layout(smollm2_path: Path) -> dict[str, int]:
    out = gguf_layout(smollm2_path)
    assert out["first_kv"] == 24 and out["first_kv"] < out["tensor_info"] < out["data"] < out["size"]
    return out


@pytest.fixture(scope="module")
def model(smollm2_path: Path) -> Iterator[Model]:
    m = Model(smollm2_path)
    yield m
    m.close()


@pytest.fixture(scope="module")
def context(model: Model) -> Iterator[Context]:
    c = Context(model, ContextOptions(n_ctx=256))
    yield c
    c.close()


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    e = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256))
    yield e
    e.close()


@pytest.fixture
def fresh_engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    e = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=128))
    yield e
    e.close()


def assert_engine_still_works(engine: LlamaEngine, decode: bool = False) -> None:
    """A rejected request must leave the engine usable: not left busy, and (``decode``) able to
    generate."""
    stream = engine.generate([1], GenerationParams(max_tokens=1, greedy=True))  # raises if still busy
    stream.close()
    if decode:
        result = engine.complete("Hello", GenerationParams(max_tokens=1, greedy=True))
        assert len(result.tokens) == 1


# -- model files: missing, wrong kind, not GGUF -----------------------------------------------------


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "no-such-model.gguf"
    with pytest.raises(LlamaModelException) as info:
        Model(path)
    assert str(path) in str(info.value)
    assert "not found" in str(info.value)
    assert info.value.details["path"] == str(path)
    with pytest.raises(LlamaModelException, match="not found"):
        LlamaEngine.load(path)


def test_directory_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(LlamaModelException) as info:
        Model(tmp_path)
    assert str(tmp_path) in str(info.value)
    assert "not a file" in str(info.value)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("text.gguf", b"this is a text file, not a model\n"),
        ("zeros.gguf", bytes(4096)),
        ("empty.gguf", b""),
        ("short.gguf", b"GG"),
        ("ggml.bin", b"lmgg" + bytes(100)),        # legacy GGML magic
        ("model.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}" + bytes(10)),
        ("archive.zip", b"PK\x03\x04" + bytes(100)),
        ("lowercase.gguf", b"gguf" + bytes(100)),
    ],
)
def test_not_a_gguf_file(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(LlamaModelException) as info:
        Model(path)
    message = str(info.value)
    assert "GGUF" in message
    assert str(path) in message
    assert "convert" in message  # says how to get a GGUF file


# -- truncated and corrupted GGUF files (in a child process) ----------------------------------------

TRUNCATIONS = {
    "just-past-magic": lambda L: 4,
    "mid-version": lambda L: 6,
    "mid-counts": lambda L: 12,
    "header-only": lambda L: 24,
    "mid-first-key": lambda L: L["first_kv"] + 10,
    "mid-metadata": lambda L: (L["first_kv"] + L["tensor_info"]) // 2,
    "mid-tensor-infos": lambda L: L["tensor_info"] + 40,
    "end-of-tensor-infos": lambda L: L["data"],
    "mid-tensor-data": lambda L: L["data"] + (L["size"] - L["data"]) // 2,
    "one-byte-short": lambda L: L["size"] - 1,
}


def _u32(v: int) -> bytes:
    return struct.pack("<I", v)


def _u64(v: int) -> bytes:
    return struct.pack("<Q", v)


CORRUPTIONS = {
    # name: (offset(layout), new bytes, fragment of llama.cpp's reason expected in the message)
    "version-0": (lambda L: 4, _u32(0), "bad GGUF version"),
    "version-1": (lambda L: 4, _u32(1), "GGUFv1 is no longer supported"),
    "version-99": (lambda L: 4, _u32(99), "version 99"),
    "absurd-tensor-count": (lambda L: 8, _u64(2**63 - 1), "number of tensors"),
    "absurd-kv-count": (lambda L: 16, _u64(2**63 - 1), "number of key value pairs"),
    "too-many-kvs": (lambda L: 16, _u64(10**9), "key-value pairs"),
    "absurd-key-length": (lambda L: L["first_kv"], _u64(2**62), "string length"),
    "bad-value-type": (lambda L: L["first_kv"] + 8 + L["first_key_len"], _u32(0xDEADBEEF), "invalid GGUF type"),
    "too-many-dims": (lambda L: L["tensor_info"] + 8 + L["tensor_name_len"], _u32(99), "invalid number of dimensions"),
    "negative-dim": (
        lambda L: L["tensor_info"] + 12 + L["tensor_name_len"], _u64(2**64 - 1), "invalid number of elements"
    ),
    "huge-dim": (lambda L: L["tensor_info"] + 12 + L["tensor_name_len"], _u64(2**40), "offset"),
    "bad-tensor-type": (lambda L: L["tensor_info"] + 28 + L["tensor_name_len"], _u32(999), "invalid ggml type"),
    "tensor-offset-past-end": (lambda L: L["tensor_info"] + 32 + L["tensor_name_len"], _u64(2**60), "offset"),
    "misaligned-tensor-offset": (lambda L: L["tensor_info"] + 32 + L["tensor_name_len"], _u64(3), "offset"),
}

LOAD_EACH_IN_CHILD = r"""
import sys
from llamact.native.model import Model
for i, path in enumerate(sys.argv[1:]):
    print("START", i, flush=True)
    try:
        Model(path).close()
    except Exception as exc:
        print("RAISED", i, type(exc).__name__, "|", str(exc).replace("\n", " "), flush=True)
    else:
        print("LOADED", i, flush=True)
"""


def load_each_in_children(paths: list[Path], cwd: Path, code: str = LOAD_EACH_IN_CHILD) -> list[tuple[str, str]]:
    """(exception class or LOADED or CRASHED, message) per file, loaded in as few child processes
    as possible: a child that dies is replaced by a new one for the files after the culprit."""
    results: dict[int, tuple[str, str]] = {}
    start = 0
    while start < len(paths):
        proc = run_child(code, *map(str, paths[start:]), cwd=cwd)
        last_started = -1
        for line in proc.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word == "START":
                last_started = start + int(rest)
            elif word == "RAISED":
                index, kind, message = rest.split(" ", 2)
                results[start + int(index)] = (kind, message.removeprefix("| "))
            elif word == "LOADED":
                results[start + int(rest)] = ("LOADED", "")
        if proc.returncode == 0:
            break
        culprit = max(last_started, start)
        results[culprit] = ("CRASHED", f"exit {proc.returncode}; stderr: {proc.stderr[-2000:]}")
        start = culprit + 1
    return [results.get(i, ("MISSING", "")) for i in range(len(paths))]


@pytest.fixture(scope="module")
def damaged_models(
    tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path, layout: dict[str, int]
) -> Iterator[dict[str, tuple[Path, str, str]]]:
    """Every truncated / corrupted variant, loaded once in child processes: name -> (path, kind, message)."""
    folder = tmp_path_factory.mktemp("damaged-gguf")
    paths: dict[str, Path] = {}
    for name, end in TRUNCATIONS.items():
        paths[f"truncated-{name}"] = copy_prefix(smollm2_path, folder / f"truncated-{name}.gguf", end(layout))
    for name, (where, raw, _) in CORRUPTIONS.items():
        # header, metadata and tensor infos: llama.cpp rejects the corruption before it reads any data
        paths[f"corrupt-{name}"] = copy_prefix(
            smollm2_path, folder / f"corrupt-{name}.gguf", layout["data"] + 4096, [(where(layout), raw)]
        )
    arch = smollm2_path.read_bytes()[:128]
    at = arch.index(b"general.architecture") + len(b"general.architecture") + 4 + 8
    assert arch[at : at + 5] == b"llama"
    paths["unknown-arch"] = copy_prefix(smollm2_path, folder / "unknown-arch.gguf", layout["size"], [(at, b"xxxxx")])
    names = list(paths)
    outcomes = load_each_in_children([paths[n] for n in names], cwd=folder)
    yield {n: (paths[n], kind, message) for n, (kind, message) in zip(names, outcomes, strict=True)}
    shutil.rmtree(folder, ignore_errors=True)


def damaged_outcome(damaged_models: dict[str, tuple[Path, str, str]], name: str) -> tuple[Path, str]:
    path, kind, message = damaged_models[name]
    assert kind != "CRASHED", f"native code crashed loading {name}: {message}"
    assert kind == "LlamaModelException", (kind, message)
    assert str(path) in message
    return path, message


@pytest.mark.model
@pytest.mark.parametrize("where", list(TRUNCATIONS))
def test_truncated_gguf(damaged_models: dict[str, tuple[Path, str, str]], layout: dict[str, int], where: str) -> None:
    _, message = damaged_outcome(damaged_models, f"truncated-{where}")
    assert "truncated or corrupt" in message  # what to do: check the download
    if TRUNCATIONS[where](layout) >= layout["data"]:
        # the header is whole: llama.cpp's own reason names the tensor that lies past the end
        assert "not within the file bounds" in message
    else:
        assert "failed to read" in message  # llama.cpp's reason is quoted, not just "failed to load"


@pytest.mark.model
@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupted_gguf_header(damaged_models: dict[str, tuple[Path, str, str]], name: str) -> None:
    _, message = damaged_outcome(damaged_models, f"corrupt-{name}")
    assert CORRUPTIONS[name][2] in message, message
    assert "corrupt" in message


@pytest.mark.model
def test_unknown_architecture_is_named(damaged_models: dict[str, tuple[Path, str, str]]) -> None:
    _, message = damaged_outcome(damaged_models, "unknown-arch")
    assert "unknown model architecture: 'xxxxx'" in message
    assert "does not support" in message


def test_a_crashing_child_is_detected(tmp_path: Path) -> None:
    """The harness itself: a child that dies is reported as CRASHED, and the files after it still load."""
    crash = tmp_path / "crash.gguf"
    crash.write_bytes(b"x")
    abort_on_crash_file = "    if path.endswith('crash.gguf'):\n        import os; os.abort()\n    try:"
    code = LOAD_EACH_IN_CHILD.replace("    try:", abort_on_crash_file, 1)
    assert "os.abort()" in code
    other = tmp_path / "other.gguf"
    other.write_bytes(b"not gguf")
    results = load_each_in_children([other, crash, other], tmp_path, code)
    assert results[0][0] == "LlamaModelException"
    assert results[1][0] == "CRASHED"
    assert results[2][0] == "LlamaModelException"


# -- progress callbacks -----------------------------------------------------------------------------


def _mappings_of(path: Path) -> int:
    with open("/proc/self/maps") as fh:
        return sum(1 for line in fh if line.rstrip().endswith(str(path)))


@pytest.fixture(scope="module")
def private_model_copy(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Iterator[Path]:
    """A copy only these tests map, so /proc/self/maps shows whether their model was freed."""
    path = tmp_path_factory.mktemp("private-model") / "private.gguf"
    shutil.copyfile(smollm2_path, path)
    yield path
    path.unlink()


@pytest.mark.model
@pytest.mark.parametrize("when", ["first call", "last call"])
def test_progress_callback_exception_propagates_and_frees_the_model(private_model_copy: Path, when: str) -> None:
    calls: list[float] = []
    boom = ValueError("stop loading")

    def progress(fraction: float) -> None:
        calls.append(fraction)
        if when == "first call" or fraction >= 1.0:
            raise boom

    with pytest.raises(ValueError) as info:
        Model(private_model_copy, progress=progress)
    assert info.value is boom  # the callback's own exception, not a wrapper
    assert calls and (len(calls) == 1 if when == "first call" else calls[-1] == 1.0)
    if sys.platform.startswith("linux"):
        assert _mappings_of(private_model_copy) == 0, "the half-loaded model is still mapped: not freed"
    with pytest.raises(KeyboardInterrupt):  # BaseException too, and through the engine
        LlamaEngine.load(private_model_copy, progress=lambda f: (_ for _ in ()).throw(KeyboardInterrupt()))
    if sys.platform.startswith("linux"):
        assert _mappings_of(private_model_copy) == 0
    # loading still works afterwards
    with Model(private_model_copy, progress=lambda f: None) as m:
        assert m.n_params > 0


@pytest.mark.model
@pytest.mark.parametrize("stop_at", [0.0, 0.5, 1.0])
def test_progress_callback_false_cancels(private_model_copy: Path, stop_at: float) -> None:
    with pytest.raises(LlamaModelException) as info:
        Model(private_model_copy, progress=lambda f: f < stop_at if stop_at else False)
    assert "cancelled by the progress callback" in str(info.value)
    assert str(private_model_copy) in str(info.value)
    if sys.platform.startswith("linux"):
        assert _mappings_of(private_model_copy) == 0


@pytest.mark.model
def test_progress_callback_returning_none_or_true_loads(smollm2_path: Path) -> None:
    seen: list[float] = []
    with Model(smollm2_path, progress=lambda f: seen.append(f)) as m:
        assert m.n_params > 0
    assert seen[-1] == 1.0 and all(0.0 <= f <= 1.0 for f in seen)
    with Model(smollm2_path, progress=lambda f: True) as m:
        assert m.n_params > 0


# -- contexts ---------------------------------------------------------------------------------------


@pytest.mark.model
@pytest.mark.parametrize("n_ctx", [2**30, 2**31 - 1])
def test_context_larger_than_memory_is_refused(model: Model, n_ctx: int) -> None:
    with pytest.raises(LlamaContextException) as info:
        Context(model, ContextOptions(n_ctx=n_ctx))
    message = str(info.value)
    assert "n_ctx" in message
    assert "smaller n_ctx" in message or "n_ctx must be" in message


@pytest.mark.model
def test_engine_with_a_huge_context_fails_cleanly(tmp_path: Path, smollm2_path: Path) -> None:
    """Through the engine (which may offload to a GPU), in a child: an OOM kill there fails the test."""
    code = r"""
import sys
from llamact import LlamaEngine, ModelParams
try:
    LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=2**30))
except Exception as exc:
    print("RAISED", type(exc).__name__)
    print("MESSAGE", exc)
"""
    kind, message = child_outcome(run_child(code, str(smollm2_path), cwd=tmp_path))
    assert kind == "LlamaContextException"
    assert "n_ctx" in message


@pytest.mark.model
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_ctx", -1),
        ("n_ctx", -(2**31)),
        ("n_ctx", 2**31),
        ("n_ctx", 1.5),
        ("n_ctx", "4096"),
        ("n_batch", -5),
        ("n_ubatch", -1),
        ("n_threads", -2),
        ("n_threads_batch", -2),
        ("n_seq_max", 0),
        ("n_seq_max", -3),
    ],
)
def test_invalid_context_sizes(model: Model, field: str, value: Any) -> None:
    with pytest.raises(LlamaContextException) as info:
        Context(model, ContextOptions(**{field: value}))
    assert field in str(info.value)


@pytest.mark.model
def test_context_parameter_llama_cpp_rejects(model: Model) -> None:
    with pytest.raises(LlamaContextException) as info:
        Context(model, ContextOptions(n_ctx=512, n_seq_max=100_000))
    assert "n_seq_max" in str(info.value)  # llama.cpp's reason is quoted


@pytest.mark.model
@pytest.mark.parametrize(
    "params",
    [ModelParams(n_ctx=-1), ModelParams(n_batch=-1), ModelParams(n_threads=-4), ModelParams(n_ctx=2**31)],
    ids=["n_ctx", "n_batch", "n_threads", "n_ctx-too-big"],
)
def test_engine_rejects_invalid_model_params(smollm2_path: Path, params: ModelParams) -> None:
    with pytest.raises(LlamaContextException):
        LlamaEngine.load(smollm2_path, params)


# -- sampler parameters -----------------------------------------------------------------------------

BAD_SPECS = [
    (s.Temp(math.nan), "Temp.t"),
    (s.Temp(math.inf), "Temp.t"),
    (s.Temp(-math.inf), "Temp.t"),
    (s.TempExt(math.nan, 0.0), "TempExt.t"),
    (s.TempExt(0.8, -1.0), "TempExt.delta"),
    (s.TopP(1.5), "TopP.p"),
    (s.TopP(-0.1), "TopP.p"),
    (s.TopP(math.nan), "TopP.p"),
    (s.TopP(0.9, min_keep=-1), "TopP.min_keep"),
    (s.MinP(1.01), "MinP.p"),
    (s.MinP(-0.5), "MinP.p"),
    (s.Typical(2.0), "Typical.p"),
    (s.TopK(-1), "TopK.k"),
    (s.TopK(1.5), "TopK.k"),  # type: ignore[arg-type]
    (s.TopK(True), "TopK.k"),
    (s.TopK(2**31), "TopK.k"),
    (s.TopNSigma(math.nan), "TopNSigma.n"),
    (s.Xtc(1.5, 0.1), "Xtc.p"),
    (s.Xtc(0.5, -0.1), "Xtc.t"),
    (s.Penalties(repeat=0.0), "Penalties.repeat"),
    (s.Penalties(repeat=-1.0), "Penalties.repeat"),
    (s.Penalties(repeat=math.nan), "Penalties.repeat"),
    (s.Penalties(last_n=-2), "Penalties.last_n"),
    (s.Penalties(frequency=math.inf), "Penalties.frequency"),
    (s.Dry(multiplier=-1.0), "Dry.multiplier"),
    (s.Dry(base=0.5), "Dry.base"),
    (s.Dry(seq_breakers=("",)), "Dry.seq_breakers"),
    (s.Mirostat(tau=-1.0), "Mirostat.tau"),
    (s.Mirostat(eta=math.nan), "Mirostat.eta"),
    (s.Mirostat(m=0), "Mirostat.m"),
    (s.MirostatV2(tau=math.inf), "MirostatV2.tau"),
    (s.Dist(seed=-1), "Dist.seed"),
    (s.Dist(seed=2**32), "Dist.seed"),
    (s.LogitBias({49152: 1.0}), "LogitBias.biases"),
    (s.LogitBias({10**9: 1.0}), "LogitBias.biases"),
    (s.LogitBias({-1: 1.0}), "LogitBias.biases"),
    (s.LogitBias({0: math.nan}), "LogitBias.biases"),
    (s.LogitBias({"the": 1.0}), "LogitBias.biases"),  # type: ignore[dict-item]
    (s.Grammar(""), "Grammar.grammar"),
    (s.Grammar("   \n"), "Grammar.grammar"),
    (s.Grammar('root ::= "a"\x00'), "Grammar.grammar"),
    (s.Grammar('root ::= "a"', trigger_tokens=(10**6,)), "Grammar.trigger_tokens"),
    (s.Grammar('root ::= "a"', trigger_tokens=(-1,)), "Grammar.trigger_tokens"),
]


@pytest.mark.model
@pytest.mark.parametrize(("spec", "name"), BAD_SPECS, ids=[f"{n}-{i}" for i, (_, n) in enumerate(BAD_SPECS)])
def test_invalid_sampler_parameter(model: Model, spec: s.SamplerSpec, name: str) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        s.SamplerChain(model, [spec, s.Greedy()])
    message = str(info.value)
    assert name in message  # names the parameter
    assert "must" in message  # and the rule it breaks


@pytest.mark.model
def test_sampler_chain_needs_samplers(model: Model) -> None:
    with pytest.raises(LlamaInferenceException, match="at least one sampler"):
        s.SamplerChain(model, [])
    with pytest.raises(LlamaInferenceException, match="not a sampler spec"):
        s.SamplerChain(model, ["greedy"])  # type: ignore[list-item]


@pytest.mark.model
@pytest.mark.parametrize(
    ("grammar", "root", "reason"),
    [
        ("root ::= [", "root", "unexpected end of input"),
        ('root ::= "a', "root", "unexpected end of input"),
        ("root ::= foo", "root", "Undefined rule identifier 'foo'"),
        ('root ::= "a" | other', "root", "Undefined rule identifier 'other'"),
        ('root ::= "a"', "start", "does not contain a 'start' symbol"),
        ('root ::= root "a"', "root", "left recursion"),
        ("this is not GBNF", "root", "error parsing grammar"),
    ],
)
def test_grammar_llama_cpp_rejects_quotes_its_reason(model: Model, grammar: str, root: str, reason: str) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        s.SamplerChain(model, [s.Grammar(grammar, root=root, front_end_check=False), s.Greedy()])
    assert "Grammar" in str(info.value)
    assert reason in str(info.value)
    # a lazy grammar is parsed the same way
    with pytest.raises(LlamaInferenceException) as info:
        s.SamplerChain(model, [s.Grammar(grammar, root=root, trigger_patterns=("<tool_call>",), front_end_check=False),
                               s.Greedy()])
    assert reason in str(info.value)


@pytest.mark.model
@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?<=x)y"])
def test_invalid_grammar_trigger_pattern(tmp_path: Path, smollm2_path: Path, pattern: str) -> None:
    code = r"""
import sys
from llamact.native.model import Model
from llamact.native import sampler as s
m = Model(sys.argv[1])
try:
    s.SamplerChain(m, [s.Grammar('root ::= "a"', trigger_patterns=(sys.argv[2],)), s.Greedy()])
except Exception as exc:
    print("RAISED", type(exc).__name__)
    print("MESSAGE", exc)
"""
    kind, message = child_outcome(run_child(code, str(smollm2_path), pattern, cwd=tmp_path))
    assert kind == "LlamaSamplerParameterException"   # the request's grammar: kind request
    assert "trigger" in message


@pytest.mark.model
@pytest.mark.parametrize(
    ("params", "name"),
    [
        (GenerationParams(temperature=math.nan), "t="),
        (GenerationParams(temperature=math.inf), "t="),
        (GenerationParams(top_p=1.5), "TopP.p"),
        (GenerationParams(top_p=-0.5), "TopP.p"),
        (GenerationParams(min_p=2.0), "MinP.p"),
        (GenerationParams(top_k=-1), "TopK.k"),
        (GenerationParams(repeat_penalty=0.0), "Penalties.repeat"),
        (GenerationParams(repeat_penalty=-1.0), "Penalties.repeat"),
        (GenerationParams(mirostat=3), "mirostat"),
        (GenerationParams(mirostat=-1), "mirostat"),
        (GenerationParams(mirostat=2, mirostat_tau=-1.0), "MirostatV2.tau"),
        (GenerationParams(seed=-5), "seed"),
        (GenerationParams(logit_bias={10**6: 1.0}), "LogitBias"),
        (GenerationParams(logit_bias={-1: -math.inf}), "LogitBias"),
        # the engine validates grammars with llamact's GBNF front end before llama.cpp sees them
        (GenerationParams(grammar="root ::= ["), "unterminated character class at line 1, column 10"),
        (GenerationParams(grammar="root ::= foo"), "undefined rule 'foo' (referenced in rule 'root')"),
        (GenerationParams(grammar="   "), "no rules"),
        (GenerationParams(greedy=True, grammar="root ::= ["), "unterminated character class"),
    ],
)
def test_invalid_generation_params(engine: LlamaEngine, params: GenerationParams, name: str) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        engine.generate("Hello", params)
    assert name in str(info.value)
    with pytest.raises(LlamaInferenceException):
        engine.complete([1, 2, 3], params)
    assert_engine_still_works(engine)


# -- tokens -----------------------------------------------------------------------------------------

BAD_IDS = [-1, -(2**31), 49152, 10**6, 2**31, 2**40]


@pytest.mark.model
@pytest.mark.parametrize("token", BAD_IDS)
def test_bad_token_ids_in_the_vocabulary_api(model: Model, token: int) -> None:
    vocab = model.vocab
    for call in (
        lambda: vocab.detokenize([1, token, 2]),
        lambda: vocab.token_to_piece(token),
        lambda: vocab.text(token),
        lambda: vocab.is_eog(token),
        lambda: vocab.is_control(token),
        lambda: vocab.attributes(token),
    ):
        with pytest.raises(LlamaInferenceException) as info:
            call()
        assert str(token) in str(info.value)
        assert "outside this vocabulary" in str(info.value)
        assert "49151" in str(info.value)  # the valid range


@pytest.mark.model
@pytest.mark.parametrize("token", BAD_IDS)
def test_bad_token_ids_in_the_engine(engine: LlamaEngine, token: int) -> None:
    with pytest.raises(LlamaInferenceException, match="outside"):
        engine.detokenize([token])
    with pytest.raises(LlamaInferenceException) as info:
        engine.complete([1, token], GenerationParams(max_tokens=2))
    assert str(token) in str(info.value)
    with pytest.raises(LlamaInferenceException):
        next(iter(engine.generate([token], GenerationParams(max_tokens=2))))
    assert_engine_still_works(engine)


@pytest.mark.model
def test_bad_tokens_and_missing_logits_in_a_sampler_chain(tmp_path: Path, smollm2_path: Path) -> None:
    """llama.cpp aborts the process on each of these; llamact must raise instead (run in a child)."""
    steps = run_steps(
        r"""
from llamact.native.context import Batch, Context, ContextOptions
from llamact.native import sampler as s
m = Model(sys.argv[1])
chain = s.SamplerChain(m, [s.Grammar('root ::= "yes" | "no"'), s.Greedy()])
for t in (-5, 10**6, 49152):
    step(f"accept-{t}", lambda t=t: chain.accept(t))
step("accept-banned", lambda: chain.accept(m.vocab.tokenize("zebra", add_special=False)[0]))
step("accept-eos-too-early", lambda: chain.accept(m.vocab.eos))
step("accept-allowed", lambda: [chain.accept(t) for t in m.vocab.tokenize("yes", add_special=False)])
ctx = Context(m, ContextOptions(n_ctx=64))
greedy = s.SamplerChain(m, [s.Greedy()])
step("sample-before-decode", lambda: greedy.sample(ctx))
step("logits-before-decode", lambda: ctx.logits())
batch = Batch(ctx, 4)
batch.set_sequence([1, 2], 0)
ctx.decode(batch)
step("sample-bad-index", lambda: greedy.sample(ctx, 7))
step("sample-ok", lambda: 0 <= greedy.sample(ctx) < m.vocab.n_tokens)
""",
        str(smollm2_path),
        cwd=tmp_path,
    )
    for t in (-5, 10**6, 49152):
        kind, message = steps[f"accept-{t}"]
        # the caller's token: a request error (LlamaArgumentException, still an inference exception)
        assert kind == "LlamaArgumentException" and "outside this vocabulary" in message and str(t) in message
    for name in ("accept-banned", "accept-eos-too-early"):
        kind, message = steps[name]
        assert kind == "LlamaInferenceException" and "not allowed by the grammar" in message, (name, message)
    assert steps["accept-allowed"][0] == "OK"
    kind, message = steps["sample-before-decode"]
    assert kind == "LlamaInferenceException" and "decode a batch" in message
    kind, message = steps["logits-before-decode"]
    assert kind == "LlamaInferenceException" and "no logits" in message
    kind, message = steps["sample-bad-index"]
    assert kind == "LlamaInferenceException" and "output 7" in message
    assert steps["sample-ok"] == ("OK", "True")


@pytest.mark.model
def test_lazy_grammar_rejects_tokens_after_its_trigger(tmp_path: Path, smollm2_path: Path) -> None:
    steps = run_steps(
        r"""
from llamact.native import sampler as s
m = Model(sys.argv[1])
v = m.vocab
chain = s.SamplerChain(m, [s.Grammar('root ::= "hello" " world"', trigger_patterns=("hello",)), s.Greedy()])
step("free-text", lambda: [chain.accept(t) for t in v.tokenize("say ", add_special=False)])
step("trigger", lambda: [chain.accept(t) for t in v.tokenize("hello", add_special=False)])
step("banned", lambda: chain.accept(v.tokenize("!", add_special=False)[0]))
""",
        str(smollm2_path),
        cwd=tmp_path,
    )
    assert steps["free-text"][0] == "OK"  # unconstrained until the trigger
    assert steps["trigger"][0] == "OK"
    kind, message = steps["banned"]
    assert kind == "LlamaInferenceException" and "not allowed by the grammar" in message


@pytest.mark.model
def test_lazy_grammar_trigger_token_with_a_rejected_tail(tmp_path: Path, smollm2_path: Path) -> None:
    steps = run_steps(
        r"""
from llamact.native import sampler as s
m = Model(sys.argv[1])
v = m.vocab
(hello,) = v.tokenize("hello", add_special=False)  # one token: "hel" triggers, "lo" is not "x"
chain = s.SamplerChain(m, [s.Grammar('root ::= "hel" "x"', trigger_patterns=("hel",)), s.Greedy()])
step("tail", lambda: chain.accept(hello))
""",
        str(smollm2_path),
        cwd=tmp_path,
    )
    assert steps["tail"][0] == "LlamaInferenceException"


@pytest.mark.model
def test_bad_batches(model: Model) -> None:
    with Context(model, ContextOptions(n_ctx=64)) as ctx:
        with pytest.raises(LlamaInferenceException, match="capacity"):
            Batch(ctx, 0)
        batch = Batch(ctx, 2)
        with pytest.raises(LlamaInferenceException, match="empty batch"):
            ctx.decode(batch)
        with pytest.raises(LlamaInferenceException, match="exceed the batch capacity"):
            batch.set_sequence([1, 2, 3], 0)
        batch.set_sequence([10**6], 0)
        with pytest.raises(LlamaInferenceException, match="invalid tokens"):
            ctx.decode(batch)
        batch.clear()
        batch.add(1, 0, seq_ids=(99,), logits=True)
        with pytest.raises(LlamaInferenceException):
            ctx.decode(batch)
        batch.clear()
        batch.add(1, 0)
        batch.add(2, 1)
        with pytest.raises(LlamaInferenceException, match="full"):
            batch.add(3, 2)
        batch.close()


@pytest.mark.model
def test_text_that_is_not_unicode(engine: LlamaEngine) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        engine.tokenize("abc\ud800def")
    assert "surrogate" in str(info.value) and "position 3" in str(info.value)
    with pytest.raises(LlamaInferenceException):
        engine.complete("abc\udfff", GenerationParams(max_tokens=1))
    # invalid UTF-8 *bytes* are fine: byte-fallback tokens
    assert engine.model.vocab.tokenize(b"\xff\xfe", add_special=False)


@pytest.mark.model
def test_empty_prompt(engine: LlamaEngine) -> None:
    assert not engine.model.vocab.add_bos  # SmolLM2 adds no BOS: "" really is empty
    for prompt in ("", []):
        with pytest.raises(LlamaInferenceException) as info:
            engine.complete(prompt, GenerationParams(max_tokens=2))
        assert "empty" in str(info.value) and "at least one token" in str(info.value)
    assert_engine_still_works(engine, decode=True)


@pytest.mark.model
def test_prompt_longer_than_the_context(engine: LlamaEngine) -> None:
    prompt = "hello " * 400
    with pytest.raises(LlamaContextException) as info:
        engine.complete(prompt, GenerationParams(max_tokens=2))
    message = str(info.value)
    assert "256" in message  # the context size
    assert "larger n_ctx" in message and "shorter prompt" in message
    assert info.value.details["n_ctx"] == 256
    assert info.value.details["n_prompt"] > 256
    with pytest.raises(LlamaContextException):
        engine.complete(list(range(10, 10 + 257)), GenerationParams(max_tokens=2))
    assert_engine_still_works(engine, decode=True)


@pytest.mark.model
@pytest.mark.parametrize("max_tokens", [-2, -100, 1.5, True, "10", None])
def test_invalid_max_tokens(engine: LlamaEngine, max_tokens: Any) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        engine.complete("Hello", GenerationParams(max_tokens=max_tokens))
    assert "max_tokens" in str(info.value)
    with pytest.raises(LlamaInferenceException):
        next(iter(engine.generate("Hello", GenerationParams(max_tokens=max_tokens))))
    assert_engine_still_works(engine)


@pytest.mark.model
def test_max_tokens_zero_and_unlimited_are_valid(engine: LlamaEngine) -> None:
    assert engine.complete("Hello", GenerationParams(max_tokens=0)).tokens == []
    eos = engine.model.vocab.eos
    assert eos is not None
    result = engine.complete("Hello", GenerationParams(max_tokens=-1, greedy=True, logit_bias={eos: 100.0}))
    assert result.stop_reason.value == "eog" and result.tokens == []


# -- use after close --------------------------------------------------------------------------------


def assert_closed_error(call: Any) -> None:
    with pytest.raises(LlamaStateException) as info:
        call()
    assert "closed" in str(info.value)
    assert "create a new one" in str(info.value)


@pytest.mark.model
def test_model_use_after_close(smollm2_path: Path) -> None:
    m = Model(smollm2_path)
    vocab = m.vocab
    m.close()
    assert m.closed
    for call in (
        m.metadata,
        lambda: m.metadata_value("general.name"),
        lambda: m.description,
        lambda: m.n_params,
        lambda: m.n_ctx_train,
        m.template_source,
        lambda: vocab.n_tokens,
        lambda: vocab.eos,
        lambda: vocab.tokenize("hello"),
        lambda: vocab.detokenize([1, 2]),
        lambda: vocab.token_to_piece(1),
        lambda: vocab.is_eog(1),
        lambda: Context(m, ContextOptions(n_ctx=64)),
        lambda: s.SamplerChain(m, [s.Greedy()]),
    ):
        assert_closed_error(call)
    m.close()  # twice is fine


@pytest.mark.model
def test_context_use_after_close(smollm2_path: Path, tmp_path: Path) -> None:
    m = Model(smollm2_path)
    try:
        ctx = Context(m, ContextOptions(n_ctx=64))
        batch = Batch(ctx, 4)
        batch.set_sequence([1, 2], 0)
        ctx.decode(batch)
        state = ctx.state_bytes()
        ctx.save_state(tmp_path / "state.bin", [1, 2])
        ctx.close()
        ctx.close()
        for call in (
            lambda: ctx.decode(batch),
            ctx.state_bytes,
            lambda: ctx.load_state_bytes(state),
            lambda: ctx.save_state(tmp_path / "other.bin", [1]),
            lambda: ctx.load_state(tmp_path / "state.bin"),
            lambda: ctx.load_state(tmp_path / "state.bin", capacity=16),
            lambda: ctx.n_ctx,
            ctx.logits,
            ctx.memory_clear,
            lambda: ctx.memory_seq_rm(0),
            ctx.perf,
            lambda: ctx.set_threads(2),
        ):
            assert_closed_error(call)
        assert not m.closed  # closing a context leaves its model open
        batch.close()
        batch.close()
        assert_closed_error(lambda: batch.add(1, 0))
    finally:
        m.close()


@pytest.mark.model
def test_sampler_chain_use_after_close(model: Model, context: Context) -> None:
    chain = s.SamplerChain(model, [s.TopK(10), s.Dist(seed=1)])
    chain.close()
    chain.close()
    for call in (lambda: chain.sample(context), lambda: chain.accept(1), chain.reset, chain.perf):
        assert_closed_error(call)


@pytest.mark.model
def test_closing_the_model_closes_its_contexts_and_chains(smollm2_path: Path) -> None:
    m = Model(smollm2_path)
    ctx = Context(m, ContextOptions(n_ctx=64))
    chain = s.SamplerChain(m, [s.Grammar('root ::= "a"'), s.Greedy()])
    batch = Batch(ctx, 4)
    batch.set_sequence([1, 2], 0)
    ctx.decode(batch)
    m.close()
    assert ctx.closed and chain.closed
    assert_closed_error(lambda: ctx.decode(batch))
    assert_closed_error(lambda: chain.sample(ctx))
    assert_closed_error(lambda: chain.accept(1))
    assert_closed_error(ctx.state_bytes)
    ctx.close()
    chain.close()
    m.close()
    batch.close()


@pytest.mark.model
def test_engine_use_after_close(fresh_engine: LlamaEngine) -> None:
    e = fresh_engine
    e.close()
    assert e.closed
    for call in (
        lambda: e.generate("Hello"),
        lambda: e.generate([1, 2, 3]),
        lambda: e.complete("Hello"),
        lambda: e.complete([1, 2, 3]),
        lambda: e.tokenize("Hello"),
        lambda: e.detokenize([1, 2]),
        e.get_metadata,
        lambda: e.chat_template([{"role": "user", "content": "hi"}]).prompt,
    ):
        assert_closed_error(call)
    e.close()  # twice is fine


@pytest.mark.model
def test_unstarted_stream_after_engine_close(fresh_engine: LlamaEngine) -> None:
    stream = fresh_engine.generate("Hello", GenerationParams(max_tokens=5))
    fresh_engine.close()
    with pytest.raises(LlamaStateException):
        next(iter(stream))


@pytest.mark.model
def test_engine_closed_mid_stream(tmp_path: Path, smollm2_path: Path) -> None:
    code = r"""
import sys
from llamact import LlamaEngine, ModelParams, GenerationParams
e = LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=128))
stream = e.generate("Once upon a time", GenerationParams(max_tokens=20, greedy=True))
next(iter(stream))
e.close()
try:
    for chunk in stream:
        pass
except Exception as exc:
    print("RAISED", type(exc).__name__)
    print("MESSAGE", exc)
"""
    kind, message = child_outcome(run_child(code, str(smollm2_path), cwd=tmp_path))
    assert kind == "LlamaStateException"
    assert "closed" in message


# -- saved state ------------------------------------------------------------------------------------


GARBAGE_STATES = [b"", b"garbage" * 10, bytes(1000), b"\xff" * 64, b"ggsn", b"ggsn" + bytes(8)]


@pytest.mark.model
@pytest.mark.parametrize("content", GARBAGE_STATES, ids=["empty", "text", "zeros", "ff", "magic-only", "magic-zeros"])
def test_state_from_a_garbage_file(tmp_path: Path, context: Context, content: bytes) -> None:
    path = tmp_path / "state.bin"
    path.write_bytes(content)
    with pytest.raises(LlamaStateException) as info:
        context.load_state(path)
    assert str(path) in str(info.value)


@pytest.mark.model
def test_state_from_garbage_and_damaged_bytes(tmp_path: Path, smollm2_path: Path) -> None:
    """In a child: llama.cpp allocates (and clears) whatever length the first 4 bytes claim, up to
    4 GiB, before checking it; llamact must refuse such input before it gets there."""
    steps = run_steps(
        r"""
import struct
from llamact.native.context import Batch, Context, ContextOptions
m = Model(sys.argv[1])
ctx = Context(m, ContextOptions(n_ctx=64))
garbage = [b"", b"garbage" * 10, bytes(1000), b"\xff" * 64, b"ggsn", b"ggsn" + bytes(8)]
for i, data in enumerate(garbage):
    step(f"garbage-{i}", lambda data=data: ctx.load_state_bytes(data))
batch = Batch(ctx, 4)
batch.set_sequence([1, 2, 3], 0)
ctx.decode(batch)
good = ctx.state_bytes()
step("prefix", lambda: (struct.unpack_from("<I", good)[0], good[4:9]))
step("truncated", lambda: ctx.load_state_bytes(good[: len(good) // 2]))
step("other-arch", lambda: ctx.load_state_bytes(good[:4] + b"xxxxx" + good[9:]))
step("absurd-length", lambda: ctx.load_state_bytes(b"\xff\xff\xff\xff" + good[4:]))
step("trailing-bytes", lambda: ctx.load_state_bytes(good + b"extra"))
step("good", lambda: ctx.load_state_bytes(good))
path = sys.argv[2]
ctx.save_state(path, [1, 2, 3], checksum=False)   # llama.cpp's own file: its reader's guards, not the seal
raw = open(path, "rb").read()
head = 12 + 4 * 3
open(path, "wb").write(raw[:head] + b"\xff\xff\xff\xff" + raw[head + 4 :])
step("file-absurd-length", lambda: ctx.load_state(path))
open(path, "wb").write(raw[: len(raw) // 2])
step("file-truncated", lambda: ctx.load_state(path))
open(path, "wb").write(raw)
step("file-capacity", lambda: ctx.load_state(path, capacity=2))
step("file-good", lambda: ctx.load_state(path))
step("decode-after", lambda: (ctx.memory_clear(), ctx.decode(batch)))
""",
        str(smollm2_path),
        str(tmp_path / "session.bin"),
        cwd=tmp_path,
    )
    for i in range(len(GARBAGE_STATES)):
        kind, message = steps[f"garbage-{i}"]
        assert kind == "LlamaStateException" and "state" in message, (i, kind, message)
    assert steps["prefix"] == ("OK", "(5, b'llama')")  # what the guard relies on: u32 length + arch name
    for name in ("truncated", "other-arch", "absurd-length", "trailing-bytes"):
        kind, message = steps[name]
        assert kind == "LlamaStateException", (name, kind, message)
    assert "wrong model arch" in steps["other-arch"][1]  # llama.cpp's reason is quoted
    assert "architecture name" in steps["absurd-length"][1]
    assert steps["good"][0] == "OK"
    for name in ("file-absurd-length", "file-truncated", "file-capacity"):
        kind, message = steps[name]
        assert kind == "LlamaStateException" and "session.bin" in message, (name, kind, message)
    assert "architecture name" in steps["file-absurd-length"][1]
    assert "capacity" in steps["file-capacity"][1]
    assert steps["file-good"] == ("OK", "[1, 2, 3]")
    assert steps["decode-after"][0] == "OK"  # the context survived it all


@pytest.mark.model
def test_state_from_a_missing_file(tmp_path: Path, context: Context) -> None:
    path = tmp_path / "missing.bin"
    with pytest.raises(LlamaStateException) as info:
        context.load_state(path)
    assert str(path) in str(info.value)
    with pytest.raises(LlamaStateException, match="could not save"):
        context.save_state(tmp_path / "no-such-dir" / "state.bin", [1])


@pytest.mark.model
def test_saved_state_round_trip_after_refusals(tmp_path: Path, engine: LlamaEngine) -> None:
    ctx = engine.context
    engine.complete("Hello there", GenerationParams(max_tokens=2, greedy=True))
    good = ctx.state_bytes()
    with pytest.raises(LlamaStateException, match="wrong model arch"):
        ctx.load_state_bytes(good[:4] + b"xxxxx" + good[9:])
    with pytest.raises(LlamaStateException):
        ctx.load_state_bytes(good[: len(good) // 2])
    ctx.load_state_bytes(good)
    path = tmp_path / "session.bin"
    ctx.save_state(path, [1, 2, 3])
    with pytest.raises(LlamaStateException) as info:
        ctx.load_state(path, capacity=2)
    assert "capacity" in str(info.value) and str(path) in str(info.value)
    assert ctx.load_state(path) == [1, 2, 3]
    assert_engine_still_works(engine, decode=True)


# -- the hierarchy ----------------------------------------------------------------------------------


def test_every_error_is_a_llama_exception_with_details() -> None:
    for cls in (LlamaModelException, LlamaContextException, LlamaInferenceException, LlamaStateException):
        exc = cls("what to do", {"k": 1})
        assert isinstance(exc, LlamaException)
        assert str(exc) == "what to do" and exc.details == {"k": 1}

