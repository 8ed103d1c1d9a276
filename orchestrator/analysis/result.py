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
from orchestrator.analysis.roles import BaselineRoles, annotate, baseline_roles

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

    def status_counts(self) -> dict[str, int]:
        measured = self.frame[self.frame["alias_of"].isna()]
        counter = Counter(measured["status"])
        return {s: int(counter.get(s, 0)) for s in ("ok", "failed", "skipped")}


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
    frame = add_baseline_comparisons(frame, roles, metric=metric)
    context = CheckContext(
        frame=frame, roles=roles, settings=settings, run_path=run.path, skipped_lines=run.skipped_lines
    )
    return Analysis(
        run=run,
        roles=roles,
        settings=settings,
        frame=frame,
        findings=run_checks(context),
        best=best_per_load(frame, metric=metric, rule=significance(settings.confidence)),
        pareto=pareto_front(frame, y=metric, level=settings.confidence),
        metric=metric,
    )


def analyse(path: str | Path, *, metric: str = THROUGHPUT, all_attempts: bool = False) -> Analysis:
    """Read a run directory and analyse it: the one entry point reports and notebooks use."""
    return analyse_run_data(open_run(path, all_attempts=all_attempts), metric=metric)
