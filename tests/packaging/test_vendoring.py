"""The pin and its verification (scripts/vendor_llama_cpp.py)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

import llamact


@pytest.fixture(scope="module")
def vendor(repo_root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("vendor_llama_cpp", repo_root / "scripts" / "vendor_llama_cpp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pin_record_is_the_one_source(vendor: ModuleType, repo_root: Path) -> None:
    pin = vendor.load_pin()
    assert pin["tag"] == "v0.5.0"
    assert pin["commit"] == "7fe450e19305b828c199d602c23a8337aaa1f03b"
    assert pin["tree"] == "fd570ef54b10ec5fecb739e7e04c8ce44a6f415a"
    # the installed build reports the same pin
    info = llamact.build_info()
    assert info["llama_cpp"]["commit"] == pin["commit"] and info["llama_cpp"]["tag"] == pin["tag"]
    assert "cpu" in info["backends"]


def test_vendored_tree_matches_the_pin(vendor: ModuleType, repo_root: Path) -> None:
    tree = repo_root / "vendor" / "llama.cpp"
    assert (tree / "include" / "llama.h").is_file(), "run python scripts/vendor_llama_cpp.py"
    vendor.verify(tree.resolve(), vendor.load_pin())  # raises on any difference


def test_tree_hash_equals_git_write_tree(vendor: ModuleType, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("hello\n")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)))
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    repo = tmp_path / "repo"
    shutil.copytree(src, repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    expected = subprocess.run(["git", "write-tree"], cwd=repo, check=True, capture_output=True, text=True).stdout
    assert vendor.tree_hash(src) == expected.strip()


def test_a_modified_tree_is_refused_with_a_clear_message(vendor: ModuleType, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "llama.h").write_text("/* not the pinned tree */\n")
    with pytest.raises(vendor.VendorError) as info:
        vendor.verify(tree, vendor.load_pin())
    message = str(info.value)
    assert "fd570ef54b10ec5fecb739e7e04c8ce44a6f415a" in message and str(tree) in message
    assert "LLAMACT_LLAMA_CPP_DIR" in message


def test_local_directory_source_is_verified(vendor: ModuleType, tmp_path: Path, monkeypatch) -> None:
    bogus = tmp_path / "bogus"
    bogus.mkdir()
    (bogus / "README.md").write_text("x\n")
    monkeypatch.setenv("LLAMACT_LLAMA_CPP_DIR", str(bogus))
    monkeypatch.setenv("LLAMACT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(vendor.VendorError) as info:
        vendor.ensure_cached_tree(vendor.load_pin(), ["dir"], log=lambda _m: None)
    assert "dir:" in str(info.value) and "tree hash" in str(info.value)
    assert not (tmp_path / "cache" / "src" / "llama.cpp-7fe450e19305").exists()


def test_unreachable_github_fails_fast(vendor: ModuleType, tmp_path: Path, monkeypatch) -> None:
    # "fast" as events, not wall time: the reachability probe is the only network call, and it is
    # bounded by NETWORK_TIMEOUT_S; no download is attempted after it fails
    pin = dict(vendor.load_pin(), github="https://unreachable.invalid/llama.cpp")
    probes: list[tuple[object, object]] = []
    real_connect = vendor.socket.create_connection

    def probe(address, timeout=None, *args, **kwargs):
        probes.append((address, timeout))
        return real_connect(address, timeout, *args, **kwargs)

    def no_download(*args, **kwargs):
        raise AssertionError("a download was attempted after the probe failed")

    monkeypatch.setattr(vendor.socket, "create_connection", probe)
    monkeypatch.setattr(vendor.urllib.request, "urlopen", no_download)
    with pytest.raises(vendor.VendorError, match="unreachable"):
        vendor.from_github(pin, tmp_path / "staging")
    assert probes == [(("unreachable.invalid", 443), vendor.NETWORK_TIMEOUT_S)]


def test_pin_file_is_valid_json(repo_root: Path) -> None:
    pin = json.loads((repo_root / "vendor" / "llama-cpp-pin.json").read_text())
    assert set(pin) >= {"tag", "commit", "tree", "npm_package", "npm_bundle_path", "github"}


def test_an_sdist_pruned_tree_verifies_through_its_omitted_record(vendor: ModuleType, tmp_path: Path) -> None:
    pin = vendor.load_pin()
    full = vendor.cached_tree(pin)
    vendor.prune_for_sdist(full, tmp_path, pin)
    pruned = tmp_path / "llama.cpp"
    record = json.loads((tmp_path / "llama-cpp-omitted.json").read_text())
    omitted = {path: tuple(entry) for path, entry in record["omitted"].items()}
    assert {"models", "docs", "tests", "tools/server"} <= set(omitted) and not (pruned / "models").exists()
    assert (pruned / "tools" / "rpc" / "CMakeLists.txt").is_file()  # llamact rpc-server from an sdist
    assert (pruned / "include" / "llama.h").is_file() and (pruned / "ggml" / "CMakeLists.txt").is_file()
    vendor.verify(pruned, pin, omitted)  # the pruned tree plus the record is the pinned tree

    # a changed file, a missing file, or an omitted entry that lies: each is refused
    header = pruned / "include" / "llama.h"
    original = header.read_bytes()
    header.write_bytes(original + b"\n")
    with pytest.raises(vendor.VendorError, match="tree hash"):
        vendor.verify(pruned, pin, omitted)
    header.write_bytes(original)
    (pruned / "LICENSE").unlink()
    with pytest.raises(vendor.VendorError, match="tree hash"):
        vendor.verify(pruned, pin, omitted)
    shutil.copy2(full / "LICENSE", pruned / "LICENSE")
    vendor.verify(pruned, pin, omitted)
    with pytest.raises(vendor.VendorError, match="tree hash"):
        vendor.verify(pruned, pin, dict(omitted, models=("40000", "0" * 40)))


def test_tree_hash_counts_symlinks_like_git(vendor: ModuleType, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "target.txt").write_text("x\n")
    (src / "link").symlink_to("target.txt")
    (src / "empty").mkdir()  # git has no empty directories
    subprocess.run(["git", "init", "-q"], cwd=src, check=True)
    subprocess.run(["git", "add", "-A"], cwd=src, check=True)
    expected = subprocess.run(["git", "write-tree"], cwd=src, check=True, capture_output=True, text=True).stdout
    assert vendor.tree_hash(src) == expected.strip()
