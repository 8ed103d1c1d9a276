#!/usr/bin/env bash
# Set-up shared by scripts/demo.sh and scripts/test.sh: a virtualenv in .venv with specsweep installed
# (editable) and, with --system, the Debian packages the system tests need (root only).
# Idempotent: a second run only checks. Usage: source scripts/bootstrap.sh [--dev] [--system]
set -euo pipefail
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_dev=0; _system=0
for _arg in "$@"; do case $_arg in --dev) _dev=1 ;; --system) _system=1 ;; esac; done

_log(){ printf '[setup] %s\n' "$*" >&2; }

if ((_system)); then
  _need=()
  command -v systemd-nspawn >/dev/null || _need+=(systemd-container)
  [[ -x /usr/sbin/sshd ]] || _need+=(openssh-server)
  command -v ssh >/dev/null || _need+=(openssh-client)
  command -v ip >/dev/null || _need+=(iproute2)
  command -v sudo >/dev/null || _need+=(sudo) # the test host's sudo tests (the guest overlays this machine's /)
  command -v cmake >/dev/null || _need+=(cmake)
  command -v ninja >/dev/null || _need+=(ninja-build)
  command -v g++ >/dev/null || _need+=(g++)
  ldconfig -p 2>/dev/null | grep -q libgomp.so.1 || _need+=(libgomp1)
  # The Slurm tests' cluster (tests/system/slurm_cluster.py): its containers overlay this machine's /.
  [[ -x /usr/sbin/slurmctld && -x /usr/sbin/slurmd ]] || _need+=(slurm-wlm)
  [[ -x /usr/sbin/munged ]] || _need+=(munge)
  # The report's browser test (tests/integration/test_report_browser.py): Debian's headless Chromium.
  command -v chromium >/dev/null || _need+=(chromium)
  if ((${#_need[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
      _log "installing Debian packages: ${_need[*]}"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${_need[@]}" >/dev/null
    else
      _log "not root: skipping Debian packages ${_need[*]} (system tests will skip)"
    fi
  fi
fi

_py=${PYTHON:-python3}
if [[ ! -x $_root/.venv/bin/python ]]; then
  _log "creating .venv with $($_py --version)"
  "$_py" -m venv "$_root/.venv"
fi
# --dev: the tests' tools, and the notebooks' (tests/integration/test_notebook.py runs papermill and nbconvert).
_extra=""; ((_dev)) && _extra="[dev,notebooks]"
_stamp=$_root/.venv/.specsweep-installed$_extra
if [[ ! -f $_stamp || $_root/pyproject.toml -nt $_stamp ]]; then
  _log "installing specsweep$_extra into .venv"
  "$_root/.venv/bin/python" -m pip install -q --disable-pip-version-check -U pip >&2
  "$_root/.venv/bin/python" -m pip install -q --disable-pip-version-check -e "$_root$_extra" >&2
  touch "$_stamp"
fi
export PATH=$_root/.venv/bin:$PATH
