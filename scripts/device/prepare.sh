#!/usr/bin/env bash
# Make .devcarry/ for a CUDA check on a GPU machine without network (this project's device machine:
# Python 3.12, CUDA, PyTorch's image; at most 64 MiB travel): the sdist (the pinned tree, pruned),
# wheels of llamact's pure-Python dependencies for Python 3.12, and SmolLM2 cut to 4 layers. Then, on
# the machine, from the repository root: bash scripts/device/run.sh (name .devcarry in what travels).
# Run it here after scripts/test.sh set things up (its venv: gguf, build).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
C="$REPO/.devcarry"
grep -qx '/.devcarry/' "$REPO/.git/info/exclude" 2>/dev/null || echo '/.devcarry/' >> "$REPO/.git/info/exclude"
rm -rf "$C" && mkdir -p "$C/whl"
python -m build --sdist --no-isolation -o "$C" "$REPO" >/dev/null
python "$REPO/scripts/device/cut_model.py" "$C/smollm2-4l.gguf" --layers 4 >/dev/null
version() { python -m pip show "$1" | awk '/^Version/{print $2}'; }
for pkg in lark jsonschema jsonschema-specifications referencing rpds-py pydantic pydantic-core annotated-types \
           typing-inspection typing-extensions gguf; do
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$C/whl" "$pkg==$(version "$pkg")"
done
du -sh "$C"
