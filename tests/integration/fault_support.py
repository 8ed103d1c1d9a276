"""One simulator fault through the real CLI: the experiment scaffolding the fault tests share (a one-variant
simulator experiment, its lossless probe off, ``specsweep sweep`` to a run directory that must exit 0).

    load = fault_load(concurrency=[1], warmup=6, requests=6, max_tokens=16)
    swept = sweep_with_fault(tmp_path, home, "reset", "--algorithm linear --fault counter-reset=11", load)
    swept.run_dir, swept.records, swept.proc
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    only_run_dir,
    records,
    run_cli,
    write_experiment,
)

__all__ = ["FAULT_TIMEOUTS", "SweptFault", "fault_load", "sweep_with_fault"]

#: Short client timeouts: a fault that stops an answer fails its request in seconds, not the default minutes.
FAULT_TIMEOUTS = {"connect": "2s", "first_token": "2s", "total": "5s"}


def fault_load(**fields: Any) -> dict[str, Any]:
    """A greedy load of full-length answers with :data:`FAULT_TIMEOUTS`, then ``fields``."""
    return {"ignore_eos": True, "temperature": 0, "timeouts": FAULT_TIMEOUTS, **fields}


@dataclass(frozen=True)
class SweptFault:
    proc: CompletedProcess[str]
    run_dir: Path

    @property
    def records(self) -> list[dict[str, Any]]:
        return records(self.run_dir)


def sweep_with_fault(
    tmp_path: Path,
    home: Path,
    name: str,
    spec_args: str,
    load: dict[str, Any],
    *,
    engine: str | None = None,
    itl_ms: float | None = None,
) -> SweptFault:
    """``specsweep sweep`` of the one variant ``linear`` (``spec_args``, its fault among them) on a simulator, with
    ``$HOME`` at ``home``; it must exit 0. The lossless probe is off: its requests would reach the server beside
    the point's and move a fault counted in requests."""
    doc = local_experiment(name, free_port(), {"linear": spec_args}, load=load, itl_ms=itl_ms)
    if engine is not None:
        doc["engine"] = engine
    doc["lossless"] = {"enabled": False}
    path = write_experiment(tmp_path / f"{name}.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), env=cli_env(home))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return SweptFault(proc, only_run_dir(results, name))
