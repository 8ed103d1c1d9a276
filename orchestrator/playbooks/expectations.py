"""Expectations: a playbook's assertions, evaluated on its measurements, each an ``Outcome`` with its numbers.

Two kinds:

- a metric expectation compares one figure of a measurement with a number or with another measurement's
  figure (``equal`` within a relative tolerance, ``at_most`` / ``at_least`` with the tolerance as slack);
- a check expectation runs one of the analysis's consistency checks (``orchestrator.analysis.checks.CHECKS``,
  e.g. ``depth_vs_commit``) over some measurements, so the physics lives in one place. It fails on any error
  or warning finding, and also when a measurement lacks the figures the check reads: a check that could not
  look must not pass.

Metric names: a bare name is a column of the analysis's tidy frame (``accept_len``, ``output_tok_s``,
``ddtree_avg_accepted_depth``, ``ttft_ms_p50``, ``speedup_vs_ar``, ...), a dotted one a path into the stored
record (``server.avg_accepted_depth``, ``client.output_tok_s``, ``server.prometheus.accept_len``). A failed
measurement fails every expectation on it, with the reason and the evidence the record carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from orchestrator.analysis.checks import CHECKS, CheckContext, CheckSettings, Finding
from orchestrator.analysis.compare import add_baseline_comparisons
from orchestrator.analysis.frame import config_label, tidy_frame
from orchestrator.analysis.roles import annotate, baseline_roles, chain_length, finite, tree_shape
from orchestrator.experiment.schema import Experiment
from orchestrator.experiment.validation import suggest
from orchestrator.plan.deployments import Deployment, LoadPoint
from orchestrator.playbooks.resolve import describe_expectation
from orchestrator.playbooks.schema import ExpectSpec, MetricRef
from orchestrator.runs.store import Record

__all__ = [
    "CHECK_INPUTS",
    "Measurement",
    "Outcome",
    "OutcomeStatus",
    "evaluate",
    "format_number",
    "metric_value",
]

OutcomeStatus = Literal["pass", "fail", "warn", "skip"]

#: The frame columns each check reads; a measurement without them cannot be checked (and so does not pass).
CHECK_INPUTS: dict[str, tuple[str, ...]] = {
    "depth_vs_commit": ("ddtree_avg_accepted_depth", "ddtree_avg_commit_len"),
    "topk1_vs_chain": ("accept_len",),
    "tree_below_chain": ("accept_len",),
    "speedup_vs_accept_len": ("accept_len", "output_tok_s"),
    "client_vs_server": ("output_tok_s",),
    "speculation_off": (),
    # A self-drafted chain's prediction by the model itself, and the tree read back from the server.
    "golden": ("server_golden_accept_len",),
    "spec_shape": ("server_spec_shape_agree",),
}


@dataclass(frozen=True)
class Outcome:
    """One line of a playbook's verdict: an expectation, a doctor check, a smoke test or a shell command."""

    step: int  # index in the playbook's steps
    kind: str  # expect | doctor | smoke | shell
    title: str
    status: OutcomeStatus
    detail: str = ""
    message: str | None = None
    evidence: tuple[str, ...] = ()
    values: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "kind": self.kind,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "message": self.message,
            "evidence": list(self.evidence),
            "values": dict(self.values),
        }


@dataclass
class Measurement:
    """A named load point: its record and what produced it."""

    name: str
    record: Record
    deployment: Deployment
    point: LoadPoint
    _row: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{config_label(self.record.variant, self.record.params)} @ {self.point.label}"

    @property
    def ok(self) -> bool:
        return self.record.status == "ok"

    def row(self) -> dict[str, Any]:
        """The record as one row of the analysis's tidy frame."""
        if self._row is None:
            frame, _ = tidy_frame([self.record], commands={self.record.deployment_id: self.deployment.command})
            self._row = {str(k): v for k, v in frame.to_dict("records")[0].items()}
        return self._row

    def failure(self) -> tuple[str, tuple[str, ...]]:
        error = self.record.error or {}
        kind = error.get("kind") or self.record.status
        reason = error.get("message") or "no reason recorded"
        text = f"measurement {self.name!r} ({self.label}) {self.record.status} ({kind}): {reason}"
        evidence = tuple(str(x) for x in (error.get("evidence") or [])[-12:])
        return text, evidence

    def summary(self) -> dict[str, Any]:
        """The headline figures (for ``expectations.json`` and the console)."""
        row = self.row()
        keys = (
            "accept_len",
            "output_tok_s",
            "ddtree_avg_accepted_depth",
            "ddtree_avg_commit_len",
            "requests",
            "errors",
        )
        return {
            "label": self.label,
            "point_id": self.record.point_id,
            "deployment_id": self.record.deployment_id,
            "status": self.record.status,
            **{k: finite(row.get(k)) for k in keys},
            "accept_len_source": row.get("accept_len_source"),
        }


def format_number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"


def metric_value(measurement: Measurement, metric: str) -> tuple[float | None, str | None]:
    """(value, None), or (None, why there is none)."""
    if "." in metric:
        node: Any = measurement.record.model_dump(mode="json")
        walked: list[str] = []
        for part in metric.split("."):
            if not isinstance(node, dict) or part not in node:
                options = sorted(str(k) for k in node) if isinstance(node, dict) else []
                where = ".".join(walked) or "the record"
                return None, f"{where} of {measurement.name!r} has no {part!r}" + suggest(part, options).replace(
                    "valid keys", "it has"
                )
            node = node[part]
            walked.append(part)
        value = finite(node)
        if value is None:
            return None, f"{metric} of {measurement.name!r} is {node!r}, not a number"
        return value, None
    row = measurement.row()
    if metric not in row:
        numeric = sorted(k for k, v in row.items() if finite(v) is not None)
        return None, f"measurement {measurement.name!r} has no metric {metric!r}" + suggest(metric, numeric).replace(
            "valid keys", "metrics with a value"
        )
    value = finite(row[metric])
    if value is None:
        return (
            None,
            f"measurement {measurement.name!r} has no value for {metric} (the server or client did not report it)",
        )
    return value, None


def _compare(spec: ExpectSpec, a: float, b: float) -> tuple[bool, str]:
    tol = spec.tolerance
    if spec.compare == "equal":
        gap = abs(a - b)
        allowed = tol * abs(b) if b else tol
        rel = f"{gap / abs(b):.1%} {'above' if a > b else 'below'}" if b else f"{gap:g} apart"
        return gap <= allowed + 1e-12, (rel if a != b else "identical") + f"; allowed ±{tol * 100:g}%"
    if spec.compare == "at_most":
        limit = b * (1 + tol) if b >= 0 else b * (1 - tol)
        return a <= limit + 1e-12, f"limit {format_number(limit)}"
    limit = b * (1 - tol) if b >= 0 else b * (1 + tol)
    return a >= limit - 1e-12, f"limit {format_number(limit)}"


def _evaluate_metric(spec: ExpectSpec, step: int, measurements: Mapping[str, Measurement]) -> Outcome:
    title = describe_expectation(spec)
    assert spec.metric is not None and isinstance(spec.of, str)
    subject = measurements[spec.of]
    involved = [subject]
    if isinstance(spec.to, MetricRef):
        involved.append(measurements[spec.to.of])
    for m in involved:
        if not m.ok:
            text, evidence = m.failure()
            return Outcome(step, "expect", title, "fail", f"cannot compare: {text}", spec.message, evidence)
    a, problem = metric_value(subject, spec.metric)
    values: dict[str, float | None] = {f"{spec.of}.{spec.metric}": a}
    b: float | None
    if isinstance(spec.to, MetricRef):
        other_metric = spec.to.metric or spec.metric
        b, other_problem = metric_value(measurements[spec.to.of], other_metric)
        b_name = f"{spec.to.of}.{other_metric}"
        values[b_name] = b
        problem = problem or other_problem
    else:
        b, b_name = float(spec.to) if spec.to is not None else None, "expected"
    if problem is not None or a is None or b is None:
        return Outcome(step, "expect", title, "fail", f"cannot compare: {problem}", spec.message, (), values)
    passed, how = _compare(spec, a, b)
    detail = f"{spec.of}.{spec.metric} = {format_number(a)}, {b_name} = {format_number(b)} ({how})"
    if isinstance(spec.to, MetricRef) and "accept" in spec.metric and not passed:
        detail += _chain_note(subject, measurements[spec.to.of])
    return Outcome(step, "expect", title, "pass" if passed else "fail", detail, spec.message, (), values)


def _chain(m: Measurement) -> int | None:
    """Drafts per step when the measurement is a chain (a linear drafter, or a top-k = 1 tree), else None."""
    shape = tree_shape(m.record.params, m.deployment.command)
    if shape is not None:
        return shape.chain_drafts if shape.topk == 1 else None
    return chain_length(m.record.params, m.deployment.command)


def _chain_note(a: Measurement, b: Measurement) -> str:
    """Accept lengths of chains of different lengths differ by nature: say so next to a failed comparison."""
    ca, cb = _chain(a), _chain(b)
    if ca is None or cb is None or ca == cb:
        return ""
    return (
        f"; note: {a.name} is a chain of {ca} drafts and {b.name} of {cb}, so their accept lengths differ by "
        "nature: compare chains of one length, or use check: topk1_vs_chain, which scales for the length"
    )


def _check_frame(records: list[Record], experiment: Experiment, deployments: Mapping[str, Deployment]) -> pd.DataFrame:
    commands = {dep_id: dep.command for dep_id, dep in deployments.items()}
    frame, params = tidy_frame(records, commands=commands)
    roles = baseline_roles(list(experiment.baselines))
    settings = _settings(experiment)
    frame = annotate(frame, roles, params, settings.linear_chain_length)
    return add_baseline_comparisons(frame, roles)


def _settings(experiment: Experiment) -> CheckSettings:
    return CheckSettings.model_validate(experiment.checks.model_dump())


def _evaluate_check(
    spec: ExpectSpec,
    step: int,
    measurements: Mapping[str, Measurement],
    records: list[Record],
    experiment: Experiment,
    deployments: Mapping[str, Deployment],
    run_path: Path | None,
) -> Outcome:
    title = describe_expectation(spec)
    name = spec.check
    assert name is not None
    chosen = [measurements[n] for n in spec.of_names]
    inputs = CHECK_INPUTS.get(name, ())
    if chosen:
        subject = [m.record for m in chosen]
        if name != "failed_points":
            for m in chosen:
                if not m.ok:
                    text, evidence = m.failure()
                    return Outcome(step, "expect", title, "fail", f"cannot check: {text}", spec.message, evidence)
    else:
        subject = [r for r in records if r.status != "skipped"]
        if not subject:
            return Outcome(
                step, "expect", title, "fail", "cannot check: nothing was measured before this step", spec.message
            )
    frame = _check_frame(subject, experiment, deployments)
    values: dict[str, float | None] = {}
    names = {m.record.point_id: m.name for m in chosen}
    lacking: list[str] = []
    with_inputs = 0
    for row in frame[frame["alias_of"].isna()].to_dict("records"):
        who = names.get(str(row["point_id"])) or f"{row['label']} @ {row['load_label']}"
        missing = [c for c in inputs if finite(row.get(c)) is None]
        for column in inputs:
            values[f"{who}.{column}"] = finite(row.get(column))
        if row["status"] == "ok" and missing:
            lacking.append(f"{who} has no {', '.join(missing)}")
        elif row["status"] == "ok":
            with_inputs += 1
    if inputs and (lacking if chosen else with_inputs == 0):
        why = "; ".join(lacking) or "no point has the figures it reads"
        detail = f"cannot check {name}: {why} (it reads {', '.join(inputs)})"
        return Outcome(step, "expect", title, "fail", detail, spec.message, (), values)
    context = CheckContext(
        frame=frame, roles=baseline_roles(list(experiment.baselines)), settings=_settings(experiment), run_path=run_path
    )
    findings = [f for f in CHECKS[name](context) if f.severity in ("error", "warning")]
    shown = ", ".join(f"{k} = {format_number(v)}" for k, v in values.items())
    if not findings:
        return Outcome(
            step, "expect", title, "pass", shown or f"{len(frame)} point(s): no finding", spec.message, (), values
        )
    return Outcome(
        step,
        "expect",
        title,
        "fail",
        _finding_text(findings[0], names),
        spec.message,
        _evidence(findings, names),
        values,
    )


def _finding_text(finding: Finding, names: Mapping[str, str]) -> str:
    who = names.get(finding.point or "") or finding.where
    return f"{who}: {finding.message}"


def _evidence(findings: list[Finding], names: Mapping[str, str]) -> tuple[str, ...]:
    out = list(findings[0].evidence)
    for extra in findings[1:]:
        out.append(_finding_text(extra, names))
        out.extend(f"  {line}" for line in extra.evidence[:3])
    return tuple(out[:20])


def evaluate(
    spec: ExpectSpec,
    step: int,
    measurements: Mapping[str, Measurement],
    *,
    records: list[Record],
    experiment: Experiment,
    deployments: Mapping[str, Deployment],
    run_path: Path | None = None,
) -> Outcome:
    """Evaluate one expectation on the measurements so far (``records``: every record of the run so far)."""
    if spec.check is not None:
        return _evaluate_check(spec, step, measurements, records, experiment, deployments, run_path)
    return _evaluate_metric(spec, step, measurements)
