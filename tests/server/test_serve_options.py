"""``llamact serve``'s one table (issue 27), without a model: each row is a flag, an ``LLAMACT_*``
variable and a config key at once; router mode's catalogue (``--models-dir``, llama-server's preset
INI, a config file's ``models``) and its precedence; the network edge's key reading."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from llamact.errors import LlamaException
from llamact.server import read_catalogue
from llamact.server.config.options import SERVER, add_flags, flag_values, rows
from llamact.server.config.settings import ServerSettings, load_settings
from llamact.server.http.edge import api_keys, key_matches

# a value for each kind of row, as the command line and a variable write it, and what it becomes
SAMPLES: dict[str, tuple[str, Any]] = {
    "ctx_size": ("1024", 1024), "n_gpu_layers": ("all", -1), "device": ("CUDA0,CUDA1", ("CUDA0", "CUDA1")),
    "split_mode": ("row", "row"), "tensor_split": ("3,1", (3.0, 1.0)), "main_gpu": ("1", 1),
    "rpc": ("10.0.0.2:50052", ("10.0.0.2:50052",)), "flash_attn": ("off", "off"), "cache_type_k": ("q8_0", "q8_0"),
    "cache_type_v": ("q4_0", "q4_0"), "alias": ("a,b", ("a", "b")), "temp": ("0.25", 0.25), "seed": ("7", 7),
    "chat_template_kwargs": ('{"x": 1}', {"x": 1}), "reasoning_format": ("none", "none"), "cache_ram": ("0", 0),
    "slot_save_path": ("/tmp", Path("/tmp")), "api_key": ("k1,k2", ("k1", "k2")), "api_prefix": ("/llama", "/llama"),
    "cors_origins": ("*", ("*",)), "models_max": ("1", 1), "log_format": ("json", "json"), "threads_batch": ("2", 2),
    "reasoning": ("off", "off"), "top_k": ("5", 5), "mirostat_lr": ("0.2", 0.2),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_flags(p, ServerSettings)
    return p


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_row_is_a_flag_a_variable_and_a_config_key(name: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    text, expected = SAMPLES[name]
    flag = rows(ServerSettings)[name].flags[0]
    from_flag = load_settings(flag_values(parser().parse_args([flag, text]), ServerSettings))
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({name: json.loads(text) if name == "chat_template_kwargs" else text}))
    from_file = load_settings({}, config)
    monkeypatch.setenv(f"LLAMACT_{name.upper()}", text)
    from_env = load_settings({})
    assert getattr(from_flag, name) == getattr(from_env, name) == getattr(from_file, name) == expected


def test_every_row_has_a_flag_help_and_llama_servers_spelling_where_it_has_one() -> None:
    table = rows(ServerSettings)
    assert set(table) == set(ServerSettings.model_fields)   # every setting is a row
    assert all(row.flags and row.help for row in table.values())
    spelled = {"n_gpu_layers": "-ngl", "device": "-dev", "split_mode": "-sm", "tensor_split": "-ts",
               "flash_attn": "-fa", "cache_type_k": "-ctk", "cache_type_v": "-ctv", "rpc": "--rpc", "lora": "--lora",
               "alias": "--alias", "chat_template_kwargs": "--chat-template-kwargs", "cache_ram": "--cache-ram",
               "reasoning_format": "--reasoning-format", "slot_save_path": "--slot-save-path",
               "api_key_file": "--api-key-file", "ssl_key_file": "--ssl-key-file", "ssl_cert_file": "--ssl-cert-file",
               "api_prefix": "--api-prefix", "models_dir": "--models-dir", "models_preset": "--models-preset",
               "models_max": "--models-max", "cors_origins": "--cors-origins", "timeout": "--timeout",
               "max_body_size": "--max-body-size"}
    assert {name: flag for name, flag in spelled.items() if flag not in table[name].flags} == {}


def test_each_model_row_reaches_model_params_and_each_sampling_row_the_request_defaults() -> None:
    given = {name: text for name, (text, _) in SAMPLES.items() if name not in ("cache_type_v",)}
    settings = load_settings({**given, "fixed_threads": True, "threads": "3", "lora": "a.gguf",
                              "lora_scaled": "b.gguf:0.5"})
    params = settings.model_params()
    assert (params.n_ctx, params.n_gpu_layers, params.split_mode) == (1024, -1, "row")
    assert params.devices == ("CUDA0", "CUDA1")
    assert (params.tensor_split, params.main_gpu, params.rpc_servers) == ((3.0, 1.0), 1, ("10.0.0.2:50052",))
    assert (params.flash_attn, params.type_k, params.n_threads, params.n_threads_batch) == (False, "q8_0", 3, 2)
    assert params.adaptive_threads is False and params.loras == (("a.gguf", 1.0), ("b.gguf", 0.5))
    for row in rows(ServerSettings).values():
        assert row.model is None or hasattr(params, row.model)
    sampling = settings.sampling_defaults()
    assert sampling == {"temperature": 0.25, "seed": 7, "top_k": 5, "mirostat_eta": 0.2}
    assert load_settings({"seed": "-1"}).sampling_defaults() == {"seed": None}   # -1: random, as llama-server
    # llama.cpp reads the seed with std::stoul into a uint32_t: a negative one wraps (it used to
    # make every request without a seed a 400, "Xtc.seed=-5")
    assert load_settings({"seed": "-5"}).sampling_defaults() == {"seed": 4294967291}
    assert load_settings({"seed": str(2**32 + 3)}).sampling_defaults() == {"seed": 3}
    assert load_settings({"device": "none"}).model_params().devices == ()        # upstream's "none"


def test_a_bad_value_is_refused_by_its_flag(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "llamact", "serve", "-ctk", "q3", "--port", "0"],
                          capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
    assert proc.returncode == 2 and "-ctk" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "llamact", "serve", "--models-max", "-3", "--port", "0"],
                          capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
    assert proc.returncode == 2 and "--models-max: Input should be greater than or equal to 0" in proc.stderr


def _gguf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")
    return path


def test_the_catalogue_of_a_models_dir_a_preset_and_a_config_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models"
    _gguf(models / "alpha.gguf")
    _gguf(models / "mmproj-alpha.gguf")                       # a companion, not a model
    _gguf(models / "beta" / "beta-00001-of-00002.gguf")     # a split model: its first shard
    _gguf(models / "beta" / "beta-00002-of-00002.gguf")
    _gguf(models / "beta" / "mmproj-beta-f16.gguf")          # beside a model in its folder: its projector
    preset = tmp_path / "presets.ini"
    preset.write_text("[*]\nctx-size = 2048\ntemp = 0.5\n\n[alpha]\nn-gpu-layers = 10\nno-mmproj-offloads = 1\n")
    with pytest.raises(LlamaException, match=r"\[alpha\]: option 'no-mmproj-offloads' is not recognized"):
        read_catalogue({"models_dir": models, "models_preset": preset})
    preset.write_text("[*]\nctx-size = 2048\ntemp = 0.5\n\n[alpha]\nn-gpu-layers = 10\nload-on-startup = true\n"
                      "alias = a1, a2\n\n[gamma]\nmodel = /m/gamma.gguf\nctx-size = 512\n")
    config = tmp_path / "team.json"
    config.write_text(json.dumps({"ctx_size": 4096, "threads": 2, "port": 9000,
                                  "models": {"beta": {"parallel": 2, "ctx_size": 8192}}}))
    monkeypatch.setenv("LLAMACT_TEMP", "0.7")
    catalogue = read_catalogue({"models_dir": models, "models_preset": preset, "threads": 1}, config)
    assert catalogue.router and catalogue.settings.port == 9000
    specs = {spec.name: spec for spec in catalogue.models}
    assert set(specs) == {"alpha", "beta", "gamma"}
    alpha, beta, gamma = specs["alpha"], specs["beta"], specs["gamma"]
    assert (alpha.settings.model, alpha.source, alpha.load_on_startup, alpha.aliases) == (
        str(models / "alpha.gguf"), "preset", True, ("a1", "a2"))
    assert beta.settings.model == str(models / "beta" / "beta-00001-of-00002.gguf") and beta.source == "config"
    assert beta.settings.mmproj == models / "beta" / "mmproj-beta-f16.gguf" and alpha.settings.mmproj is None
    # flags over the environment over the model's entry over [*] over the config file's top level
    assert (alpha.settings.ctx_size, beta.settings.ctx_size, gamma.settings.ctx_size) == (2048, 8192, 512)
    assert {s.settings.threads for s in specs.values()} == {1}
    assert {s.settings.temp for s in specs.values()} == {0.7}
    assert (alpha.settings.n_gpu_layers, beta.settings.parallel) == (10, 2)


@pytest.mark.parametrize("entry, words", [
    ({"model": "/m.gguf", "port": 1}, "'port' is a server setting"),
    ({"model": "/m.gguf", "no_such": 1}, "'no_such' is not a setting"),
    ({"ctx_size": 1}, "has no model file"),
])
def test_a_models_entry_holds_only_a_models_settings(entry: dict[str, Any], words: str, tmp_path: Path) -> None:
    config = tmp_path / "team.json"
    config.write_text(json.dumps({"models": {"m": entry}}))
    with pytest.raises(LlamaException, match=words):
        read_catalogue({}, config)


def test_one_model_outside_router_mode_and_names_that_clash(tmp_path: Path) -> None:
    one = read_catalogue({"model": "/m/x.gguf", "alias": "x,y"})
    assert not one.router and [(s.name, s.aliases) for s in one.models] == [("x", ("y",))]
    assert read_catalogue({"model": "/m/x.gguf"}).models[0].name == "/m/x.gguf"   # llama-server's: as given
    config = tmp_path / "team.json"
    config.write_text(json.dumps({"models": {"a": {"model": "/a.gguf", "alias": "b"}, "b": {"model": "/b.gguf"}}}))
    with pytest.raises(LlamaException, match="the name 'b' is given to both"):
        read_catalogue({}, config)
    config.write_text(json.dumps({"models": {"a": {"model": "/a.gguf"}}}))
    with pytest.raises(LlamaException, match="router mode"):
        read_catalogue({"model": "/x.gguf"}, config)


def test_keys_from_flags_and_a_key_file_compared_in_full(tmp_path: Path) -> None:
    key_file = tmp_path / "keys.txt"
    key_file.write_text("# the team's keys\nalpha-key\n\n  beta-key  \n")
    keys = api_keys(load_settings({"api_key": "one,two", "api_key_file": key_file}))
    assert keys == ("one", "two", "alpha-key", "beta-key")
    assert key_matches("beta-key", keys) and key_matches("one", keys)
    assert not any(key_matches(k, keys) for k in ("", "on", "one ", "alpha-key-", "\udcff"))
    with pytest.raises(LlamaException, match="does not exist"):
        api_keys(load_settings({"api_key_file": tmp_path / "nope.txt"}))


def test_server_rows_are_the_servers_alone() -> None:
    scopes = {name: row.scope for name, row in rows(ServerSettings).items()}
    for name in ("host", "port", "api_key", "ssl_cert_file", "cors_origins", "api_prefix", "models_max",
                 "max_body_size", "timeout", "grammar_max_bytes", "log_format"):
        assert scopes[name] == SERVER, name


def test_more_threads_than_cores_is_a_warning_in_either_log_format() -> None:
    import io
    import os

    from llamact.server.http.logs import ServerLog

    cores = len(os.sched_getaffinity(0))
    text, lines = io.StringIO(), io.StringIO()
    ServerLog("text", text).check_threads(cores + 1, "m")
    ServerLog("json", lines).check_threads(1, "m", other_threads=cores)   # another model holds the cores
    ServerLog("json", lines).check_threads(cores, "fits")
    assert text.getvalue().startswith(f"llamact: warning: model m: {cores + 1} threads on {cores} core(s)")
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [(r["event"], r["level"], r["model"], r["other_threads"]) for r in records] == [
        ("warning", "warning", "m", cores)]


def test_the_guides_team_config_reads_as_it_says(repo_root: Path, tmp_path: Path) -> None:
    """The server-configuration guide, "A team's server": the config file shown is a valid catalogue
    of three models (the section moved there from the README when the README became short)."""
    import re

    guide = (repo_root / "docs" / "guides" / "server-config.md").read_text(encoding="utf-8")
    section = guide[guide.index("## A team's server"):]
    text = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert text is not None
    config = tmp_path / "team.json"
    config.write_text(text.group(1))
    catalogue = read_catalogue({}, config)
    assert catalogue.router and catalogue.settings.port == 8443 and catalogue.settings.models_max == 2
    assert catalogue.settings.ssl_cert_file == Path("/etc/llamact/fullchain.pem")
    specs = {spec.name: spec for spec in catalogue.models}
    assert set(specs) == {"qwen-coder", "gemma", "embed"}
    qwen = specs["qwen-coder"]
    assert qwen.load_on_startup and qwen.settings.model_params().flash_attn is True
    assert (qwen.settings.parallel, qwen.settings.ctx_size, qwen.settings.threads) == (4, 32768, 8)
    assert specs["gemma"].aliases == ("gemma-3", "default") and specs["gemma"].settings.ctx_size == 8192
