"""llamact's build backend: scikit-build-core, plus the pinned llama.cpp tree inside the sdist.

Every hook is scikit-build-core's. ``build_sdist`` adds ``vendor/llama.cpp`` -- the verified pinned
tree, pruned to what the build needs -- and ``vendor/llama-cpp-omitted.json`` (the git object ids
of what was left out, so the build verifies the pruned tree against the pin's tree hash). An sdist
therefore builds offline; a plain source tree fetches the tree at configure time (CMakeLists.txt
runs scripts/vendor_llama_cpp.py).
"""

from __future__ import annotations

import importlib.util
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

from scikit_build_core import build as _skbuild
from scikit_build_core.build import (  # noqa: F401  (re-exported hooks)
    build_editable,
    build_wheel,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

_REPO = Path(__file__).resolve().parent.parent


def _vendoring() -> ModuleType:
    path = _REPO / "scripts" / "vendor_llama_cpp.py"
    spec = importlib.util.spec_from_file_location("_llamact_vendoring", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stage_vendor_tree(staging: Path) -> None:
    """Fill ``staging`` with llama.cpp/ and llama-cpp-omitted.json, verified against the pin."""
    vendoring = _vendoring()
    pin = vendoring.load_pin()
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    if vendoring.vendored_tree_ok(pin, log) and vendoring.read_omitted(vendoring.DEST) is not None:
        # Building an sdist from an unpacked sdist: its pruned tree is already what we ship.
        vendoring.shutil.copytree(vendoring.DEST, staging / "llama.cpp", symlinks=True)
        vendoring.shutil.copy2(vendoring.OMITTED_FILE, staging / vendoring.OMITTED_FILE.name)
        return
    order = [s for s in vendoring.DEFAULT_ORDER if s != "vendor"]
    try:
        tree = vendoring.ensure_cached_tree(pin, order, log=log)
    except vendoring.VendorError as exc:
        raise SystemExit(f"llamact sdist: {exc}") from exc
    vendoring.prune_for_sdist(tree, staging, pin)


def _normalized(info: tarfile.TarInfo, mtime: float) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = mtime
    return info


def build_sdist(sdist_directory: str, config_settings: dict[str, list[str] | str] | None = None) -> str:
    name = _skbuild.build_sdist(sdist_directory, config_settings)
    sdist = Path(sdist_directory) / name
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "vendor"
        staging.mkdir()
        _stage_vendor_tree(staging)
        rewritten = Path(tmp) / name
        with tarfile.open(sdist, "r:gz") as src, tarfile.open(rewritten, "w:gz", format=tarfile.PAX_FORMAT) as dst:
            members = src.getmembers()
            top = members[0].name.split("/")[0]
            mtime = members[0].mtime
            for member in members:
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
            for path in sorted(staging.rglob("*")):
                arcname = f"{top}/vendor/{path.relative_to(staging).as_posix()}"
                dst.add(path, arcname, recursive=False, filter=lambda info: _normalized(info, mtime))
        rewritten.replace(sdist)
    return name
