#!/usr/bin/env python3
"""Populate ``vendor/llama.cpp`` with the pinned llama.cpp tree, verified against the pin.

The pin lives in ``vendor/llama-cpp-pin.json`` (commit, tag and the git *tree* hash). The tree
hash is what we verify: it identifies the exact file contents whatever commit object carries
them (the npm bundle re-commits the same tree under a different commit id).

Sources, tried in this order (``--source`` or ``LLAMACT_VENDOR_SOURCES=a,b`` changes it):

0. ``vendor`` -- ``vendor/llama.cpp`` as it is, when it verifies (a full tree, or the pruned tree
                 of an sdist, verified through the object ids it records for what it left out);
1. ``dir``    -- a local directory named by ``LLAMACT_LLAMA_CPP_DIR`` (a checkout or plain tree);
2. ``cache``  -- a tree verified earlier, kept under ``$LLAMACT_CACHE`` (default ~/.cache/llamact);
3. ``github`` -- the pinned commit fetched from GitHub (fails within seconds when unreachable);
4. ``npm``    -- ``npm pack node-llama-cpp@3.22.1``, whose ``llama/gitRelease.bundle`` is a git
                 bundle of tag v0.5.0 (works wherever only package registries are reachable).

The verified tree is kept in the cache and ``vendor/llama.cpp`` becomes a symlink to it (``--copy``
makes a real copy instead, e.g. for an sdist). Exit status 0 on success; on failure a message says
what each source did.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIN_FILE = REPO / "vendor" / "llama-cpp-pin.json"
DEST = REPO / "vendor" / "llama.cpp"
# Written only into an sdist, next to its pruned tree (see prune_for_sdist).
OMITTED_FILE = REPO / "vendor" / "llama-cpp-omitted.json"
DEFAULT_ORDER = ("vendor", "dir", "cache", "github", "npm")
# What a build of the library needs from the pinned tree; an sdist carries only these (about a
# fifth of the tree: no models, docs, tools or tests) and records the object ids of the rest.
# tools/rpc is upstream's ggml-rpc-server (`llamact rpc-server`), 28 KB linking only ggml.
SDIST_KEEP = ("CMakeLists.txt", "LICENSE", "cmake", "include", "src", "ggml", "vendor", "licenses", "tools/rpc",
              "tools/mtmd")
NETWORK_TIMEOUT_S = 8.0


class VendorError(RuntimeError):
    pass


def load_pin() -> dict[str, str]:
    return json.loads(PIN_FILE.read_text())


def cache_root() -> Path:
    root = os.environ.get("LLAMACT_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "llamact"


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    full_env = dict(os.environ, GIT_TERMINAL_PROMPT="0", **(env or {}))
    proc = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VendorError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _blob_id(data: bytes) -> bytes:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()


def _tree_id(directory: Path, omitted: dict[str, tuple[str, str]], prefix: str) -> bytes | None:
    entries: list[tuple[bytes, bytes, bytes]] = []
    for entry in os.scandir(directory):
        if entry.name == ".git":
            continue
        rel = prefix + entry.name
        if entry.is_symlink():
            entries.append((entry.name.encode(), b"120000", _blob_id(os.readlink(entry.path).encode())))
        elif entry.is_dir():
            sub = _tree_id(Path(entry.path), omitted, rel + "/")
            if sub is not None:  # git has no empty directories
                entries.append((entry.name.encode(), b"40000", sub))
        else:
            mode = b"100755" if entry.stat().st_mode & 0o100 else b"100644"
            entries.append((entry.name.encode(), mode, _blob_id(Path(entry.path).read_bytes())))
    # What the sdist left out is accounted for by the ids the full tree had there.
    for path, (mode, object_id) in omitted.items():
        parent, _, name = path.rpartition("/")
        if (parent + "/" if parent else "") == prefix:
            entries.append((name.encode(), mode.encode(), bytes.fromhex(object_id)))
    if not entries:
        return None
    # git orders a tree's entries by name, a directory's name as if it ended with "/".
    entries.sort(key=lambda e: e[0] + (b"/" if e[1] == b"40000" else b""))
    body = b"".join(mode + b" " + name + b"\0" + oid for name, mode, oid in entries)
    return hashlib.sha1(b"tree %d\0" % len(body) + body).digest()


def tree_hash(directory: Path, omitted: dict[str, tuple[str, str]] | None = None) -> str:
    """The git tree hash of a directory's files, whether or not it is a git checkout.

    Computed the way ``git write-tree`` would (blob and tree objects, git's modes and order), in
    pure Python so that a build from an sdist needs no git. ``omitted`` maps paths the directory
    lacks (an sdist leaves out models and docs) to the (mode, object id) the full tree had there:
    the result equals the pin when, and only when, every file present is the pinned one.
    """
    tree_id = _tree_id(directory, omitted or {}, "")
    if tree_id is None:
        raise VendorError(f"{directory} is empty")
    return tree_id.hex()


def read_omitted(directory: Path) -> dict[str, tuple[str, str]] | None:
    """The record of what an sdist's pruned tree left out, or None for a full tree."""
    if not OMITTED_FILE.is_file() or directory.resolve() != DEST.resolve():
        return None
    data = json.loads(OMITTED_FILE.read_text())
    return {path: (mode, oid) for path, (mode, oid) in data["omitted"].items()}


def verify(directory: Path, pin: dict[str, str], omitted: dict[str, tuple[str, str]] | None = None) -> None:
    got = tree_hash(directory, omitted)
    if got != pin["tree"]:
        raise VendorError(
            f"{directory} does not hold llama.cpp {pin['tag']}: its tree hash is {got}, "
            f"the pin expects {pin['tree']}. Point LLAMACT_LLAMA_CPP_DIR at an unmodified "
            f"checkout of commit {pin['commit']}, or delete the directory to refetch."
        )


def _export_commit(git_dir: Path, rev: str, out: Path) -> None:
    """Write the files of ``rev`` (no .git) to ``out``."""
    out.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", rev],
        capture_output=True,
    )
    if archive.returncode != 0:
        raise VendorError(f"git archive {rev} failed: {archive.stderr.decode(errors='replace')}")
    with tempfile.TemporaryFile() as fh:
        fh.write(archive.stdout)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(out, filter="tar")


# --- sources -------------------------------------------------------------------------------


def from_dir(pin: dict[str, str], staging: Path) -> Path:
    value = os.environ.get("LLAMACT_LLAMA_CPP_DIR")
    if not value:
        raise VendorError("LLAMACT_LLAMA_CPP_DIR is not set")
    src = Path(value).expanduser().resolve()
    if not src.is_dir():
        raise VendorError(f"LLAMACT_LLAMA_CPP_DIR={value} is not a directory")
    if (src / ".git").exists():
        # A checkout: export the pinned commit's files so local edits cannot leak in.
        try:
            _git("-C", str(src), "cat-file", "-e", f"{pin['commit']}^{{tree}}")
            rev = pin["commit"]
        except VendorError:
            rev = "HEAD"
        _export_commit(src / ".git", rev, staging)
    else:
        shutil.copytree(src, staging, symlinks=True)
    return staging


def from_github(pin: dict[str, str], staging: Path) -> Path:
    url = f"{pin['github']}/archive/{pin['commit']}.tar.gz"
    host = url.split("/")[2]
    try:
        socket.create_connection((host, 443), timeout=NETWORK_TIMEOUT_S).close()
    except OSError as exc:
        raise VendorError(f"{host} is unreachable ({exc})") from exc
    with tempfile.TemporaryDirectory() as tmp:
        tarball = Path(tmp) / "src.tar.gz"
        try:
            with urllib.request.urlopen(url, timeout=NETWORK_TIMEOUT_S) as resp, tarball.open("wb") as fh:
                shutil.copyfileobj(resp, fh)
        except OSError as exc:
            raise VendorError(f"download of {url} failed ({exc})") from exc
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="tar")
        (top,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        shutil.move(str(top), staging)
    return staging


def from_npm(pin: dict[str, str], staging: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError("npm is not installed")
    downloads = cache_root() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    name, version = pin["npm_package"].rsplit("@", 1)
    tgz = downloads / f"{name}-{version}.tgz"
    if not tgz.exists():
        proc = subprocess.run(
            [npm, "pack", pin["npm_package"], "--pack-destination", str(downloads)],
            capture_output=True, text=True, timeout=600,
        )
        if proc.returncode != 0 or not tgz.exists():
            raise VendorError(f"npm pack {pin['npm_package']} failed: {proc.stderr.strip()[-500:]}")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tgz) as tar:
            member = tar.getmember(pin["npm_bundle_path"])
            tar.extractall(tmp, members=[member], filter="tar")
        bundle = Path(tmp) / pin["npm_bundle_path"]
        bare = Path(tmp) / "bundle.git"
        _git("clone", "-q", "--bare", str(bundle), str(bare))
        _export_commit(bare, "HEAD", staging)
    return staging


SOURCES = {"dir": from_dir, "github": from_github, "npm": from_npm}


# --- driver --------------------------------------------------------------------------------


def cached_tree(pin: dict[str, str]) -> Path:
    return cache_root() / "src" / f"llama.cpp-{pin['commit'][:12]}"


def ensure_cached_tree(pin: dict[str, str], order: list[str], log=print) -> Path:
    target = cached_tree(pin)
    problems: list[str] = []
    for source in order:
        if source == "cache":
            if target.is_dir():
                try:
                    verify(target, pin)
                    log(f"llama.cpp {pin['tag']}: cached tree verified at {target}")
                    return target
                except VendorError as exc:
                    problems.append(f"cache: {exc}")
                    shutil.rmtree(target)
            else:
                problems.append("cache: empty")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".staging-")) / "tree"
        try:
            SOURCES[source](pin, staging)
            verify(staging, pin)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        except (VendorError, OSError, subprocess.SubprocessError) as exc:
            problems.append(f"{source}: {exc}")
            continue
        finally:
            shutil.rmtree(staging.parent, ignore_errors=True)
        log(f"llama.cpp {pin['tag']}: fetched from {source}, verified, cached at {target}")
        return target
    raise VendorError(
        "could not obtain the pinned llama.cpp tree:\n  " + "\n  ".join(problems) + "\n"
        f"Either install from llamact's sdist (it carries the tree), set LLAMACT_LLAMA_CPP_DIR to a "
        f"checkout of {pin['github']} at commit {pin['commit']}, or allow access to GitHub or npm."
    )


def link_into_repo(tree: Path, copy: bool) -> None:
    # A full tree replaces whatever was there, an sdist's pruned tree and its record included.
    OMITTED_FILE.unlink(missing_ok=True)
    if DEST.is_symlink() or DEST.is_file():
        DEST.unlink()
    elif DEST.is_dir():
        shutil.rmtree(DEST)
    if copy:
        shutil.copytree(tree, DEST, symlinks=True)
    else:
        DEST.symlink_to(tree, target_is_directory=True)


def vendored_tree_ok(pin: dict[str, str], log=print) -> bool:
    """True when vendor/llama.cpp is there already and verified (a full tree or an sdist's)."""
    if not DEST.is_dir():
        return False
    omitted = read_omitted(DEST)
    try:
        verify(DEST, pin, omitted)
    except VendorError as exc:
        log(f"vendor/llama.cpp is not the pinned tree, fetching it again: {exc}")
        return False
    kind = "pruned sdist tree" if omitted is not None else "tree"
    log(f"llama.cpp {pin['tag']}: vendored {kind} verified at {DEST}")
    return True


def _object_id(path: Path) -> tuple[str, str]:
    """(git mode, object id) of one file, symlink or directory of the full tree."""
    if path.is_symlink():
        return "120000", _blob_id(os.readlink(path).encode()).hex()
    if path.is_dir():
        tree_id = _tree_id(path, {}, "")
        assert tree_id is not None, f"{path} is empty"
        return "40000", tree_id.hex()
    return ("100755" if path.stat().st_mode & 0o100 else "100644"), _blob_id(path.read_bytes()).hex()


def prune_for_sdist(tree: Path, out: Path, pin: dict[str, str]) -> None:
    """Write ``out/llama.cpp`` (what the build needs) and ``out/llama-cpp-omitted.json``.

    The omitted record lets the build verify the pruned tree against the pin's tree hash.
    """
    verify(tree, pin)
    dest = out / "llama.cpp"
    omitted: dict[str, tuple[str, str]] = {}

    def copy_kept(src: Path, to: Path, rel: str) -> None:
        to.mkdir(parents=True)
        for entry in sorted(src.iterdir()):
            path = rel + entry.name
            if entry.name == ".git":
                continue
            if path in SDIST_KEEP:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.copytree(entry, to / entry.name, symlinks=True)
                else:
                    shutil.copy2(entry, to / entry.name, follow_symlinks=False)
            elif entry.is_dir() and any(keep.startswith(path + "/") for keep in SDIST_KEEP):
                copy_kept(entry, to / entry.name, path + "/")  # keep a part of this directory
            else:
                omitted[path] = _object_id(entry)

    copy_kept(tree, dest, "")
    record = {"pin_tree": pin["tree"], "omitted": omitted}
    (out / OMITTED_FILE.name).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    if tree_hash(dest, omitted) != pin["tree"]:
        raise VendorError("the pruned tree does not verify against the pin (a bug in prune_for_sdist)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", choices=[*DEFAULT_ORDER],
                        help="try only these sources, in this order (repeatable)")
    parser.add_argument("--copy", action="store_true", help="copy the tree instead of symlinking it")
    parser.add_argument("--print-path", action="store_true", help="print the verified tree's path")
    args = parser.parse_args(argv)
    env_order = os.environ.get("LLAMACT_VENDOR_SOURCES")
    order = args.source or (env_order.split(",") if env_order else list(DEFAULT_ORDER))
    pin = load_pin()
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    if order and order[0] == "vendor":
        order = order[1:]
        if vendored_tree_ok(pin, log) and not args.copy:
            if args.print_path:
                print(DEST.resolve())
            return 0
    order = [source for source in order if source != "vendor"]
    try:
        tree = ensure_cached_tree(pin, order, log=log)
    except VendorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    link_into_repo(tree, args.copy)
    if args.print_path:
        print(tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
