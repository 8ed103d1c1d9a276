"""What every consistency check (:mod:`orchestrator.analysis.checks`) is made of: a ``Finding``, the tolerances
(``CheckSettings``, from ``checks:`` in the stored experiment) and the ``CheckContext`` a check reads a run
through, with the helpers the checks share to word a finding."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.analysis.roles import BaselineRoles
from orchestrator.analysis.statuses import MEASURED
from orchestrator.errors import ConfigError, StoreError
from orchestrator.files import read_bounded
from orchestrator.runs.reading import confined
from orchestrator.runs.store import SkippedLine

if TYPE_CHECKING:
    from orchestrator.analysis.lossless import LosslessResult

__all__ = ["SEVERITY_ORDER", "CheckContext", "CheckSettings", "Finding", "Severity"]

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}

# Metric lines print two decimals; a difference below this is rounding, not physics.
_PRINT_SLACK = 0.011
_EVIDENCE_LINES = 12
_RESTART_SUFFIX = re.compile(r" \[restart \d+\]$")


class Finding(BaseModel):
    """One thing a check found. ``point`` is the point id (``None`` for a finding about the whole run)."""

    model_config = ConfigDict(frozen=True)

    check: str
    point: str | None
    severity: Severity
    message: str
    evidence: list[str] = Field(default_factory=list)
    host: str | None = None
    config: str | None = None
    load: str | None = None

    @property
    def where(self) -> str:
        """``ddtree(budget=7, topk=1) @ C=1 on gpu-box``, or ``run`` for a run-level finding."""
        text = " @ ".join(p for p in (self.config, self.load) if p)
        if self.host:
            text = f"{text} on {self.host}" if text else self.host
        return text or "run"


class CheckSettings(BaseModel):
    """The experiment's ``checks:`` block (unknown keys are ignored here; the experiment loader rejects them)."""

    model_config = ConfigDict(extra="ignore")

    chain_tolerance: float = Field(0.10, ge=0)
    client_server_tolerance: float = Field(0.25, ge=0)
    speedup_slack: float = Field(1.10, ge=1)
    min_requests: int = Field(10, ge=0)
    disabled: list[str] = Field(default_factory=list)
    # Drafts per step of the linear baseline, when neither its parameters nor its command say it.
    linear_chain_length: int | None = Field(None, ge=1)
    # The level of every interval and of the significance of a winner.
    confidence: float = Field(0.95, gt=0.5, lt=1)
    # A point whose failed or cancelled requests exceed this share of its requests is ``degraded``
    # (orchestrator/analysis/answer.py); ``rank_degraded`` lets such points into winners and ties.
    degraded_requests: float = Field(0.10, ge=0, lt=1)
    rank_degraded: bool = False
    # Two of the baseline's likeliest tokens this close (nats) are a near tie the lossless check lets
    # speculation flip (orchestrator/analysis/lossless.py, TIE_MARGIN); 0: every flip before the baseline's
    # own divergence is lossy.
    lossless_tie_margin: float = Field(0.25, ge=0)
    # A point measured while the controller's machine had more than this many runnable tasks a CPU (its
    # 1-minute load average over its CPUs; orchestrator/sweep/machineload.py) is marked: finding machine_load.
    # 0 turns it off.
    machine_load: float = Field(2.0, ge=0)

    @classmethod
    def from_experiment(cls, experiment: dict[str, Any], *, source: str = "experiment.yaml") -> CheckSettings:
        raw = experiment.get("checks") or {}
        if not isinstance(raw, dict):
            raise ConfigError("checks must be a mapping", file=source, key="checks")
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = "checks." + ".".join(str(p) for p in first["loc"])
            raise ConfigError(first["msg"], file=source, key=key) from exc


@dataclass
class CheckContext:
    """What the checks read: the analysed frame (with ``role``/``tree_*``/comparison columns) and settings."""

    frame: pd.DataFrame
    roles: BaselineRoles
    settings: CheckSettings = field(default_factory=CheckSettings)
    run_path: Path | None = None
    skipped_lines: list[SkippedLine] = field(default_factory=list)

    # The frame is the checks' input and none of them changes it: its selections are made once (a check that
    # asked for them per row made the checks quadratic in points; bench/RESULTS-scale.md).
    @cached_property
    def measured(self) -> pd.DataFrame:
        return self.frame[self.frame["alias_of"].isna()]

    @cached_property
    def ok(self) -> pd.DataFrame:
        measured = self.measured
        return measured[measured["status"].isin(MEASURED)]

    @cached_property
    def _records(self) -> dict[Any, dict[str, Any]] | None:
        """Every measured row as a record, by its index label (None when the labels are not unique)."""
        measured = self.measured
        if not measured.index.is_unique:
            return None
        return dict(zip(measured.index, _rows(measured), strict=True))

    @cached_property
    def lossless_result(self) -> LosslessResult | None:
        """The lossless verdict of the run's probe answers (``orchestrator/analysis/lossless.py``), None when the
        run has none."""
        from orchestrator.analysis.lossless import LOSSLESS_DIR, check_lossless, read_answers

        if self.run_path is None or not (self.run_path / LOSSLESS_DIR).is_dir():
            return None
        answers, labels = read_answers(self.run_path)
        if not answers:
            return None
        baseline: dict[str, tuple[str, str] | None] = {}
        for key, label in labels.items():
            if self.roles.ar is not None and _RESTART_SUFFIX.sub("", label) == self.roles.ar:
                current = baseline.get(key[0])
                if current is None or labels[current] != self.roles.ar:
                    baseline[key[0]] = key
        return check_lossless(answers, labels, baseline, self.settings.lossless_tie_margin)

    def rows(self, frame: pd.DataFrame) -> list[dict[str, Any]]:
        """The rows of ``frame`` (a selection of ``measured``) as records, made once for every check: a record
        is read, never changed, by the checks."""
        records = self._records
        if records is None or not all(label in records for label in frame.index):
            return _rows(frame)
        return [records[label] for label in frame.index]

    @cached_property
    def linear_by_host(self) -> dict[Any, pd.DataFrame]:
        """The linear baseline's measured rows, per host."""
        linear = self.ok[self.ok["role"] == "linear"]
        return {host: rows for host, rows in linear.groupby("host", sort=False, dropna=False)}

    def window_text(self, row: dict[str, Any]) -> str | None:
        """The point's raw window (None when the run directory or the file is not there)."""
        name = row.get("window_file")
        if self.run_path is None or not isinstance(name, str):
            return None
        try:
            path = confined(self.run_path, name)
        except StoreError:
            return None
        try:
            return read_bounded(path, 256 * 1024 * 1024).decode("utf-8", errors="replace")
        except OSError:
            return None

    def window_lines(self, row: dict[str, Any], pattern: str, limit: int = 3) -> list[str]:
        """Up to ``limit`` lines of the point's raw window that match ``pattern`` (evidence for a finding)."""
        name = row.get("window_file")
        text = self.window_text(row)
        if text is None:
            return []
        regex = re.compile(pattern)
        hits = [line.rstrip() for line in text.splitlines() if regex.search(line)]
        return [f"{name}: {line}" for line in hits[:limit]]


def _metric_lines(engine: object) -> str:
    """A pattern for the window lines that carry ``engine``'s figures (its markers; any engine's if unknown)."""
    from orchestrator.engines.registry import engine_names, get_engine, is_engine

    names = [engine] if isinstance(engine, str) and is_engine(engine) else list(engine_names())
    markers = {m for name in names for m in get_engine(name).markers}
    return "|".join(re.escape(m) for m in sorted(markers)) or r"(?!)"


def _finding(check: str, row: dict[str, Any], severity: Severity, message: str, evidence: list[str]) -> Finding:
    return Finding(
        check=check,
        point=row.get("point_id"),
        severity=severity,
        message=message,
        evidence=evidence[:_EVIDENCE_LINES],
        host=row.get("host"),
        config=row.get("label"),
        load=row.get("load_label"),
    )


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dict("records")  # type: ignore[return-value]


def _f(value: float) -> str:
    return f"{value:.2f}"
