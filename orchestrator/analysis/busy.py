"""The points of the ``machine_load`` check (orchestrator/analysis/checks.py): points measured while the
controller's machine had more runnable tasks a CPU than ``checks.machine_load`` (the records' ``machine``, written by
orchestrator/sweep/machineload.py). Another benchmark, a test suite or a build delayed the client's timings (and a
local server's), which no figure shows."""

from __future__ import annotations

import pandas as pd

__all__ = ["busy_points"]


def busy_points(measured: pd.DataFrame, threshold: float) -> tuple[str, list[str]] | None:
    """(message, evidence) for the run's busy points, or None when there are none (or the check is off)."""
    if threshold <= 0 or "machine_load" not in measured.columns:
        return None
    rows = [
        r
        for r in measured.to_dict("records")
        if isinstance(r.get("machine_load"), int | float)
        and r["machine_load"] == r["machine_load"]
        and r["machine_load"] > threshold
    ]
    if not rows:
        return None
    worst = max(float(r["machine_load"]) for r in rows)
    message = (
        f"{len(rows)} of {len(measured)} points were measured while this machine was busy (up to {worst:.1f} "
        f"runnable tasks a CPU, above checks.machine_load {threshold:g}): whatever else ran here delayed the "
        "client's timings and a local server's steps, so these figures may be low and noisy; for clean figures, "
        "run the sweep again on a quiet machine"
    )
    evidence = [
        f"{r.get('label')} @ {r.get('load_label')} on {r.get('host')}: {float(r['machine_load']):.1f} a CPU"
        for r in rows
    ]
    return message, evidence
