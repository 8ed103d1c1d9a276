#!/usr/bin/env bash
# The main job on the embedded default: set up .venv, then sweep the built-in simulator on this machine.
# Extra arguments go to `specsweep sweep` (for example -q or --json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh
exec specsweep sweep sweeps/demo.yaml "$@"
