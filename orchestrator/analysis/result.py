"""One call from a run directory to everything a report shows: ``analyse(path) -> Analysis``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from orchestrator.analysis.checks import CheckContext, CheckSettings, Finding, run_checks
from orchestrator.analysis.compare import (
    THROUGHPUT,
    add_baseline_comparisons,
    best_per_load,
    pareto_front,
    significance,
)
from orchestrator.analysis.frame import RunData, open_run
from orchestrator.analysis.lossless import LosslessResult
from orchestrator.analysis.roles import BaselineRoles, annotate, baseline_roles
from orchestrator.analysis.rowfacts import lost_requests
from orchestrator.analysis.statuses import STATUSES

__all__ = ["Analysis", "analyse", "analyse_run_data"]


@dataclass
class Analysis:
    """A run directory, analysed: the frame with baselines joined, the findings, the winners, the front."""

    run: RunData
    roles: BaselineRoles
    settings: CheckSettings
    frame: pd.DataFrame
    findings: list[Finding]
    best: pd.DataFrame
    pareto: pd.DataFrame
    metric: str = THROUGHPUT
    #: The lossless verdict of the run's probe answers (analysis/lossless.py); None: no probe, or check disabled.
    lossless: LosslessResult | None = None

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    @property
    def experiment_name(self) -> str:
        return self.run.info.experiment

    @property
    def param_columns(self) -> list[str]:
        return self.run.param_columns

    def counts(self) -> dict[str, int]:
        """Findings per severity (every severity present, zero included)."""
        counter = Counter(f.severity for f in self.findings)
        return {s: counter.get(s, 0) for s in ("error", "warning", "info")}

    @property
    def ranked_statuses(self) -> tuple[str, ...]:
        """The statuses a winner, a tie or the front is chosen among (``degraded`` only with rank_degraded)."""
        return ("ok", "degraded") if self.settings.rank_degraded else ("ok",)

    def status_counts(self) -> dict[str, int]:
        """Points (not windows: repeats of one load are one point) by status."""
        measured = self.frame[self.frame["alias_of"].isna()]
        counter = Counter(measured["status"])
        return {s: int(counter.get(s, 0)) for s in STATUSES}


def analyse_run_data(run: RunData, *, metric: str = THROUGHPUT) -> Analysis:
    """Analyse an already opened run (tests pass hand-made ``RunData``)."""
    baselines = run.experiment.get("baselines")
    if not isinstance(baselines, list) or not baselines:
        # No list stored: the variants whose records say they are baselines, in order of appearance.
        marked: list[str] = []
        if not run.frame.empty:
            marked = [str(v) for v in run.frame[run.frame["baseline"].astype(bool)]["variant"]]
        baselines = list(dict.fromkeys(marked))
    roles = baseline_roles([str(b) for b in baselines])
    settings = CheckSettings.from_experiment(run.experiment, source=str(run.path / "experiment.yaml"))
    frame = annotate(run.frame, roles, run.param_columns, settings.linear_chain_length)
    frame = mark_degraded(frame, settings.degraded_requests)
    frame = add_baseline_comparisons(frame, roles, metric=metric)
    ranked = ("ok", "degraded") if settings.rank_degraded else ("ok",)
    context = CheckContext(
        frame=frame, roles=roles, settings=settings, run_path=run.path, skipped_lines=run.skipped_lines
    )
    findings = run_checks(context)
    return Analysis(
        run=run,
        roles=roles,
        settings=settings,
        frame=frame,
        findings=findings,
        best=best_per_load(frame, metric=metric, rule=significance(settings.confidence), statuses=ranked),
        pareto=pareto_front(frame, y=metric, level=settings.confidence, statuses=ranked),
        metric=metric,
        lossless=None if "lossless" in settings.disabled else context.lossless_result,
    )


def mark_degraded(frame: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """``frame`` with ``status`` ``degraded`` for each ok point that lost more than ``threshold`` of its
    requests (failed or cancelled), and ``lost_requests`` (how many) and ``error_kind`` / ``error_message``
    saying why; its figures stay (they are over the requests that completed, which the message says)."""
    if frame.empty:
        return frame.assign(lost_requests=pd.Series(dtype=float))
    out = frame.copy()
    lost_column: list[float] = []
    # Only the columns the rule reads, made into records once (iterrows over the wide frame cost seconds at
    # thousands of points: bench/RESULTS-scale.md).
    read = [c for c in ("errors", "cancelled", "requests", "status", "errors_by_kind") if c in out.columns]
    for index, row in zip(out.index, out[read].to_dict("records"), strict=True):
        lost, sent = lost_requests({str(k): v for k, v in row.items()})
        lost_column.append(float(lost) if row.get("status") in ("ok", "degraded") else float("nan"))
        if row.get("status") != "ok" or not sent or lost / sent <= threshold:
            continue
        out.at[index, "status"] = "degraded"
        out.at[index, "error_kind"] = "degraded"
        out.at[index, "error_message"] = (
            f"{lost} of {sent} requests lost{_kinds(row.get('errors_by_kind'))}, more than the "
            f"{threshold:.0%} checks.degraded_requests allows; its figures are over the {sent - lost} that completed"
        )
    out["lost_requests"] = lost_column
    return out


def _kinds(text: object) -> str:
    import json

    if not isinstance(text, str) or not text:
        return ""
    try:
        kinds = json.loads(text)
    except json.JSONDecodeError:
        return f" ({text})"
    if not isinstance(kinds, dict) or not kinds:
        return ""
    return " (" + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items(), key=lambda kv: str(kv[0]))) + ")"


def analyse(path: str | Path, *, metric: str = THROUGHPUT, all_attempts: bool = False) -> Analysis:
    """Read a run directory and analyse it: the one entry point reports and notebooks use."""
    return analyse_run_data(open_run(path, all_attempts=all_attempts), metric=metric)
