"""The command line: help, generate --json (against the engine), chat streaming, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # From a neutral directory: `python -m` puts the working directory first on sys.path, and the
    # source tree's llamact/ has no compiled libraries.
    return subprocess.run([sys.executable, "-m", "llamact", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=tempfile.gettempdir())


def test_help_lists_the_commands() -> None:
    proc = _run("--help")
    assert proc.returncode == 0
    assert "generate" in proc.stdout and "chat" in proc.stdout and "serve" in proc.stdout
    serve = _run("serve", "--help")
    for flag in ("--model", "--host", "--port", "--parallel", "--ctx-size", "--api-key", "--chat-template-file",
                 "--config", "--max-body-size", "--max-body-depth", "--max-tokenize-tokens", "--timeout",
                 "--shutdown-timeout", "--spec-type", "--spec-default", "--spec-draft-model", "--spec-draft-n-max"):
        assert flag in serve.stdout, flag
    gen = _run("generate", "--help")
    for flag in ("--model", "--prompt", "--n-predict", "--threads", "--ctx-size", "--greedy", "--seed", "--temp",
                 "--top-k", "--top-p", "--min-p", "--json"):
        assert flag in gen.stdout, flag


def test_version_reports_the_pin() -> None:
    proc = _run("--version")
    assert proc.returncode == 0 and "v0.5.0" in proc.stdout and "7fe450e1" in proc.stdout


@pytest.mark.model
def test_generate_json_matches_the_engine(smollm2_path: Path) -> None:
    proc = _run("generate", "--model", str(smollm2_path), "--prompt", "The capital of France is", "-n", "12",
                "--greedy", "--threads", "2", "--ctx-size", "256", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_threads=2)) as engine:
        expected = engine.complete("The capital of France is", GenerationParams(greedy=True, max_tokens=12))
    assert out["prompt_tokens"] == expected.prompt_tokens
    assert out["tokens"] == expected.tokens and out["text"] == expected.text
    assert out["stop_reason"] == expected.stop_reason.value
    assert out["timings"]["predicted_n"] == len(expected.tokens) and out["timings"]["predicted_per_second"] > 0


@pytest.mark.model
def test_generate_takes_llama_servers_speculative_flags(smollm2_path: Path) -> None:
    prompt = "Repeat: red, green, blue, red, green, blue, red,"
    proc = _run("generate", "--model", str(smollm2_path), "--prompt", prompt, "-n", "16", "--greedy", "--threads",
                "1", "--ctx-size", "256", "--json", "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                "--spec-ngram-simple-size-m", "8")
    assert proc.returncode == 0, proc.stderr
    timings = json.loads(proc.stdout)["timings"]
    assert timings["draft_n"] >= timings["draft_n_accepted"] > 0
    refused = _run("serve", "--spec-type", "ngram-bogus", "--port", "0")
    assert refused.returncode == 2 and "unknown speculative type: ngram-bogus" in refused.stderr


@pytest.mark.model
def test_chat_streams_an_answer(smollm2_path: Path) -> None:
    proc = _run("chat", "--model", str(smollm2_path), "--prompt", "Say hello.", "-n", "24", "--greedy",
                "--ctx-size", "512")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "> Say hello."
    assert "".join(lines[1:]).strip()  # the model answered something
    assert "loading" in proc.stderr and "100%" in proc.stderr  # the progress bar


def test_serve_refuses_a_missing_model_at_once(tmp_path: Path) -> None:
    proc = _run("serve", "--model", str(tmp_path / "missing.gguf"), "--port", "0")
    assert proc.returncode == 1
    assert "missing.gguf does not exist" in proc.stderr


def test_serve_stops_when_the_model_fails_to_load(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    proc = _run("serve", "--model", str(bad), "--port", "0")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("llamact: error:") and "bad.gguf" in last


def test_bad_model_is_a_clean_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    proc = _run("generate", "--model", str(missing), "--prompt", "x")
    assert proc.returncode == 1
    assert "model file not found" in proc.stderr and str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.model
def test_bad_sampling_flag_is_a_clean_error(smollm2_path: Path) -> None:
    proc = _run("generate", "--model", str(smollm2_path), "--prompt", "x", "--top-p", "1.5")
    assert proc.returncode == 1
    assert "top_p" in proc.stderr.lower() or "TopP" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("damage", ["missing", "not json", "no pin"])
def test_version_on_a_broken_install_is_one_clear_line(tmp_path: Path, damage: str) -> None:
    """A package without a readable build record (an install that did not build, or a damaged
    one): ``--version`` says so in one line and fails, without a traceback."""
    import os
    import shutil

    import llamact

    broken = tmp_path / "site" / "llamact"
    shutil.copytree(Path(llamact.__file__).parent, broken, ignore=shutil.ignore_patterns("_lib", "_bin", "__pycache__"))
    info = broken / "_build_info.json"
    if damage == "missing":
        info.unlink(missing_ok=True)
    elif damage == "not json":
        info.write_text("{ this is not json")
    else:
        info.write_text(json.dumps({"backends": ["cpu"]}))
    env = {**os.environ, "PYTHONPATH": str(broken.parent)}
    proc = subprocess.run([sys.executable, "-m", "llamact", "--version"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llamact: error: "), proc.stderr
    assert "reinstall" in lines[0] or "install it" in lines[0]  # says what to do
    assert proc.stdout == ""


def test_serve_without_the_server_extra_says_what_to_install_before_reading_flags() -> None:
    """Without fastapi / uvicorn / pydantic-settings, ``serve --port N`` names the extra, not "--port"."""
    hide = "import sys; sys.modules['uvicorn'] = None; from llamact.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", hide, "serve", "--port", "8081", "-c", "512"], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir())
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'llamact[server]'" in lines[0] and "uvicorn" in lines[0], proc.stderr
    assert "unrecognized" not in proc.stderr and "usage:" not in proc.stderr


def test_a_bad_flag_is_two_lines_not_the_whole_usage() -> None:
    proc = _run("serve", "--ctx", "512")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ["llamact serve: error: ambiguous option: --ctx could match --ctx-size, --ctx-size-draft",
                     "(`llamact serve --help` lists the options)"], proc.stderr


@pytest.mark.model
def test_interactive_chat_has_help_and_quit(smollm2_path: Path) -> None:
    """/help lists the commands, /quit leaves: neither goes to the model (nothing after /quit is read)."""
    proc = subprocess.run([sys.executable, "-m", "llamact", "chat", "--model", str(smollm2_path), "-n", "8",
                           "--ctx-size", "512", "--threads", "1"], input="/help\n/quit\nTell me a story.\n",
                          capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
    assert proc.returncode == 0, proc.stderr
    assert "/quit" in proc.stderr and "/image PATH" in proc.stderr   # the list /help printed
    assert proc.stdout == "> > ", proc.stdout   # two prompts, no reply


@pytest.mark.model
@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_chat_refuses_a_demanded_call_the_template_cannot_make(smollm2_path: Path, tmp_path: Path,
                                                               choice: str) -> None:
    """SmolLM2's template has no tool-call format: a --tool-choice that demands a call is refused before
    the first message, as the server and the library refuse it, naming this command's flags."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
    proc = _run("chat", "--model", str(smollm2_path), "--prompt", "Weather in Paris?", "-n", "8", "--ctx-size", "512",
                "--threads", "1", "--tools", str(tools), "--tool-choice", choice)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("llamact: error: tool_choice ") and "no tool-call format" in error, error
    assert "--model qwen2.5-coder-0.5b" in error and "--custom-template chatml-tools" in error, error
    assert "custom_template" not in error   # the library's keyword is not this command's flag
    # the shipped template it names is usable by that name: the named call is made
    made = _run("chat", "--model", str(smollm2_path), "--prompt", "Weather in Paris?", "-n", "160", "--greedy",
                "--ctx-size", "512", "--threads", "1", "--tools", str(tools), "--tool-choice", "get_weather",
                "--custom-template", "chatml-tools")
    assert made.returncode == 0, made.stderr
    call = json.loads(made.stdout.strip().splitlines()[-1])["tool_call"]
    assert call["name"] == "get_weather" and "city" in json.loads(call["arguments"])
