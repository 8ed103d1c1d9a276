#!/usr/bin/env bash
# The test suite, with all of its set-up: Debian packages for the system tests (when root), .venv with the dev
# extra, the real engines (llama.cpp's llama-server and its model; cached), then lint, type check, the layers and
# pytest on every core (pytest-xdist: SPECSWEEP_TEST_WORKERS workers, default 3; tests that share one server
# run in one worker, --dist loadgroup).
# Extra arguments go to pytest (for example -k plan, tests/unit, or -n 0 for one process).
set -euo pipefail
cd "$(dirname "$0")/.."
_start=$SECONDS
source scripts/bootstrap.sh --dev --system
if [[ -z ${SPECSWEEP_SKIP_LLAMA:-} ]]; then
  eval "$(bash scripts/get-llama-server.sh)" && export LLAMA_SERVER LLAMA_MODEL \
    || echo "[setup] llama-server not available: its tests will skip" >&2
fi
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
