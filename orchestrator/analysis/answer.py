"""A run directory's answer: computed once, by :func:`answer`, and rendered by every output.

The answer holds, from :func:`orchestrator.analysis.result.analyse` (one frame, one significance rule, one way
of combining repeats: ``orchestrator/analysis/intervals.py``):

- per point (one configuration at one load, its repeats and restarts combined): its status (``ok``,
  ``degraded``, ``failed``, ``skipped``), how many requests it lost and why, and each figure (:data:`FIGURES`)
  with its source, its exactness and its interval (``lo``, ``hi`` and the ``se`` the interval comes from);
- per load: the winner, those tied with it (the rule cannot tell them apart) and those it beats, with the
  margin over the runner-up and its interval;
- the Pareto front of per-user against total throughput (a point leaves it only when another beats it beyond
  noise): the keys of its points;
- the counts of points (planned, ok, degraded, failed, skipped), the failed points by the kind of their
  failure, and the counts of findings;
- the findings;
- per speculative variant of a closed-loop run with an autoregressive baseline, its break-even load: the
  lowest measured concurrency at which it no longer beats autoregressive beyond noise, with its bracket
  (:mod:`orchestrator.analysis.breakeven`, from the winners above);
- per configuration deployed with a batch-size schedule, whether it beats, ties or loses to the best static
  configuration at each load and over the ramp, and the k the engine ran at each concurrency
  (:mod:`orchestrator.analysis.verification`);
- per host with lossless probe answers, the lossless verdict: where the autoregressive baseline differs from
  itself (alone, again, batched) and each configuration lossless, lossy beyond that, or inconclusive
  (:mod:`orchestrator.analysis.lossless`);
- per point with an accept length from any source, that figure from each source (the log's window, the
  ``/metrics`` counters, the responses' own figures), the one reported and their spread
  (:mod:`orchestrator.analysis.agreement`);
- with ``load.decide``, per load: ``decided``, or the budget ran out first, with the seconds and requests the
  extra rounds spent (:mod:`orchestrator.analysis.deciding`).

The sweep's ending, ``report`` (HTML, Markdown, CSV, Parquet, ``--json``), ``recommend`` (an objective's choice
on top of the same rows), ``compare``, ``ls``, every ``--json`` and the notebook render it; where one shows
less it leaves figures out, it never computes its own. The sweep's ending and ``report`` (which write into the
run directory anyway) also keep it there as ``answer.json``, keyed by the files it was made from, so ``ls``
reads the counts without analysing again; reading commands (``ls``, ``recommend``) write nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from orchestrator.analysis.agreement import AcceptLenSources, accept_len_by_source
from orchestrator.analysis.answerfile import ANSWER_FILE, ANSWER_SCHEMA, cached_counts
from orchestrator.analysis.answerfile import fingerprint as _fingerprint
from orchestrator.analysis.breakeven import BreakEven, break_even
from orchestrator.analysis.checks import Finding
from orchestrator.analysis.deciding import decisions
from orchestrator.analysis.lossless import HostVerdict
from orchestrator.analysis.result import Analysis, analyse
from orchestrator.analysis.roles import finite as _num
from orchestrator.analysis.statuses import MEASURED, STATUSES
from orchestrator.analysis.verification import ScheduleVerdict, verdicts
from orchestrator.files import write_atomic

__all__ = [
    "ANSWER_FILE",
    "CONTAMINATING",
    "FIGURES",
    "Answer",
    "Counts",
    "LoadAnswer",
    "PointAnswer",
    "answer",
    "answer_of",
    "cached_counts",
]

#: The checks whose findings taint the run's figures themselves (not one point's reading of them): every
#: recommendation made from the run repeats them (``recommend``, ``recommend --schedule``, text and --json).
CONTAMINATING = ("overlapping_runs",)

#: The figures of a point the answer carries, with where each comes from when the frame does not say.
FIGURES: dict[str, str] = {
    "output_tok_s": "client",
    "per_user_tok_s": "client",
    "requests_per_s": "client",
    "accept_len": "",  # the frame's accept_len_source
    "ttft_ms_p50": "client",
    "ttft_ms_p99": "client",
    "itl_ms_p50": "client",
    "tpot_ms_p50": "client",
    "e2e_ms_p50": "client",
    "draft_tokens_per_draft": "",  # the frame's draft_tokens_per_draft_source: the k the engine ran
    "speedup_vs_ar": "analysis",
    "speedup_vs_linear": "analysis",
    "tokens_per_joule": "telemetry",
    "goodput": "requests",  # with the run's objective.goodput limits (analysis/goodput.py)
}


@dataclass(frozen=True)
class Figure:
    """One figure of one point: value, interval (None where the point has none) and where it comes from."""

    value: float
    lo: float | None
    hi: float | None
    se: float | None
    source: str
    exactness: str | None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (what ``value ± half`` says), None without an interval."""
        return None if self.lo is None or self.hi is None else (self.hi - self.lo) / 2

    @property
    def relative_half_width(self) -> float | None:
        """Half the interval's width relative to the figure (the ending's ``±``: how sure the figure is), None
        without an interval or with a figure of 0."""
        half = self.half_width
        return None if half is None or self.value == 0 else half / self.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "lo": self.lo,
            "hi": self.hi,
            "se": self.se,
            "source": self.source,
            "exactness": self.exactness,
        }


@dataclass(frozen=True)
class PointAnswer:
    host: str
    workload: str
    label: str
    variant: str
    params: dict[str, Any]
    baseline: bool
    mode: str
    load: float
    load_label: str
    status: str
    windows: int
    requests: int | None
    lost_requests: int | None
    why: str | None
    ci_method: str | None
    figures: dict[str, Figure]

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(host, workload, configuration, load): what names a point in every output."""
        return (self.host, self.workload, self.label, self.load_label)

    def value(self, figure: str) -> float | None:
        found = self.figures.get(figure)
        return None if found is None else found.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "workload": self.workload,
            "label": self.label,
            "variant": self.variant,
            "params": self.params,
            "baseline": self.baseline,
            "mode": self.mode,
            "load": self.load,
            "load_label": self.load_label,
            "status": self.status,
            "windows": self.windows,
            "requests": self.requests,
            "lost_requests": self.lost_requests,
            "why": self.why,
            "ci_method": self.ci_method,
            "figures": {name: f.to_dict() for name, f in self.figures.items()},
        }


@dataclass(frozen=True)
class LoadAnswer:
    """The winner at one (host, workload, load), those tied with it and those it beats."""

    host: str
    workload: str
    mode: str
    load: float
    load_label: str
    metric: str
    winner: str
    value: float | None
    lo: float | None
    hi: float | None
    se: float | None
    tied: list[str]
    beats: list[str]
    runner_up: str | None
    margin: float | None
    margin_lo: float | None
    margin_hi: float | None
    #: True: the winner is told apart from the runner-up; False: not beyond noise; None: not judged.
    decided: bool | None
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Counts:
    """Points (a configuration at a load, repeats combined) by status, and how many were planned."""

    planned: int
    ok: int = 0
    degraded: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def measured(self) -> int:
        return self.ok + self.degraded + self.failed + self.skipped

    @property
    def not_measured(self) -> int:
        """Planned points without a figure or a failure of their own yet (a skipped point was not measured)."""
        return max(0, self.planned - self.ok - self.degraded - self.failed)

    @property
    def settled(self) -> bool:
        """No point failed or was degraded: what a sweep's exit 0 needs (degraded points count as failed ones)."""
        return not (self.failed or self.degraded)

    def to_dict(self) -> dict[str, int]:
        return {
            "planned": self.planned,
            "ok": self.ok,
            "degraded": self.degraded,
            "failed": self.failed,
            "skipped": self.skipped,
        }

    def text(self) -> str:
        """``18 points ok, 1 degraded, 2 failed, 0 skipped (of 21 planned)`` (zero kinds left out but ok)."""
        parts = [f"{self.ok} points ok"]
        parts += [
            f"{n} {s}"
            for s, n in (("degraded", self.degraded), ("failed", self.failed), ("skipped", self.skipped))
            if n
        ]
        return ", ".join(parts) + (f" (of {self.planned} planned)" if self.planned else "")


@dataclass
class Answer:
    """A run directory's answer (see the module docstring); ``analysis`` is what it was computed from."""

    analysis: Analysis
    points: list[PointAnswer]
    loads: list[LoadAnswer]
    counts: Counts
    findings: list[Finding] = field(default_factory=list)
    #: Per speculative variant, where it stops beating autoregressive beyond noise (analysis/breakeven.py).
    break_even: list[BreakEven] = field(default_factory=list)
    #: Per configuration deployed with a batch-size schedule, against the best static one (analysis/verification.py).
    schedule_verdicts: list[ScheduleVerdict] = field(default_factory=list)
    #: With ``load.decide``, per load: decided, or the budget ran out, and what was spent (analysis/deciding.py).
    decisions: list[dict[str, Any]] = field(default_factory=list)
    #: Per host, the lossless verdict: the baseline against itself and each configuration (analysis/lossless.py).
    lossless: list[HostVerdict] = field(default_factory=list)
    #: Per point, its accept length from each source that has one (analysis/agreement.py).
    accept_len_sources: list[AcceptLenSources] = field(default_factory=list)
    #: The failed points by the kind of their failure (``start_failed``, ``http_500``, ``unknown``), most first.
    failure_kinds: dict[str, int] = field(default_factory=dict)
    #: The findings by severity (``error``, ``warning``, ``info``).
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    #: The points on the Pareto front of per-user against total throughput (their keys, ``PointAnswer.key``).
    pareto: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.analysis.path

    @property
    def metric(self) -> str:
        return self.analysis.metric

    @property
    def rank_degraded(self) -> bool:
        """Whether degraded points are ranked (``checks.rank_degraded``)."""
        return self.analysis.settings.rank_degraded

    @property
    def confidence(self) -> float:
        return self.analysis.settings.confidence

    def finding_counts(self) -> dict[str, int]:
        return dict(self.findings_by_severity)

    @property
    def contamination(self) -> list[str]:
        """What taints every figure of the run, as its findings say it (:data:`CONTAMINATING`: points measured
        beside another sweep), one sentence each: repeated wherever a recommendation is printed."""
        return [f.message for f in self.findings if f.check in CONTAMINATING]

    def problem(self) -> str | None:
        """What a sweep that ran its plan to the end says when points failed or were degraded, None when none
        did: ``2 of 21 point(s) failed (start_failed x2); 1 of 21 point(s) degraded (too many requests lost; not
        ranked)``."""
        counts = self.counts
        if counts.settled:
            return None
        parts: list[str] = []
        if counts.failed:
            why = ", ".join(f"{kind} x{n}" for kind, n in self.failure_kinds.items())
            parts.append(f"{counts.failed} of {counts.planned} point(s) failed" + (f" ({why})" if why else ""))
        if counts.degraded:
            lost = "too many requests lost; not ranked"
            parts.append(f"{counts.degraded} of {counts.planned} point(s) degraded ({lost})")
        return "; ".join(parts)

    def point(self, host: str, workload: str, label: str, load_label: str) -> PointAnswer | None:
        for p in self.points:
            if p.key == (host, workload, label, load_label):
                return p
        return None

    def to_dict(self) -> dict[str, Any]:
        info = self.analysis.run.info
        return {
            "schema": ANSWER_SCHEMA,
            "run_dir": str(self.path),
            "run_id": info.run_id,
            "experiment": info.experiment,
            "state": info.state,
            "metric": self.metric,
            "confidence": self.analysis.settings.confidence,
            "degraded_requests": self.analysis.settings.degraded_requests,
            "rank_degraded": self.analysis.settings.rank_degraded,
            "counts": self.counts.to_dict(),
            "failure_kinds": self.failure_kinds,
            "finding_counts": self.finding_counts(),
            "points": [p.to_dict() for p in self.points],
            "loads": [lv.to_dict() for lv in self.loads],
            "findings": [f.model_dump() for f in self.findings],
            "break_even": [b.to_dict() for b in self.break_even],
            "schedule_verdicts": [v.to_dict() for v in self.schedule_verdicts],
            "decisions": self.decisions,
            "lossless": [h.to_dict() for h in self.lossless],
            "accept_len_sources": [a.to_dict() for a in self.accept_len_sources],
            "pareto": [list(key) for key in self.pareto],
        }


def findings_text(counts: dict[str, int]) -> str:
    """The counts of findings by severity as every output says them: ``2 errors, 1 warning, 0 notes``."""

    def said(n: int, one: str) -> str:
        return f"{n} {one}" if n == 1 else f"{n} {one}s"

    return ", ".join(
        (
            said(counts.get("error", 0), "error"),
            said(counts.get("warning", 0), "warning"),
            said(counts.get("info", 0), "note"),
        )
    )


def _figures(row: dict[str, Any]) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for name, source in FIGURES.items():
        value = _num(row.get(name))
        if value is None:
            continue
        exactness: str | None = None
        if name == "accept_len":
            source = str(row.get("accept_len_source") or "unknown")
            exactness = row.get("accept_len_exactness") or "exact"
        elif name == "draft_tokens_per_draft":
            source = str(row.get("draft_tokens_per_draft_source") or "unknown")
            exactness = "exact"  # integer counters (orchestrator/analysis/drafts.py)
        elif source in ("client", "requests"):
            exactness = "exact"
        out[name] = Figure(
            value=value,
            lo=_num(row.get(f"{name}_lo")),
            hi=_num(row.get(f"{name}_hi")),
            se=_num(row.get(f"{name}_se")),
            source=source,
            exactness=exactness,
        )
    return out


def _point(row: dict[str, Any], params: list[str]) -> PointAnswer:
    status = str(row.get("status"))
    why = None
    if status != "ok":
        kind, message = row.get("error_kind"), row.get("error_message")
        why = f"{kind}: {message}" if kind and message else (message or kind)
    requests, lost = _num(row.get("requests")), _num(row.get("lost_requests"))
    windows = _num(row.get("windows"))
    return PointAnswer(
        host=str(row.get("host")),
        workload=str(row.get("workload") or ""),
        label=str(row.get("label")),
        variant=str(row.get("variant")),
        params={p: row.get(p) for p in params if row.get(p) is not None and not _isnan(row.get(p))},
        baseline=bool(row.get("baseline")),
        mode=str(row.get("mode")),
        load=float(row.get("load") or 0),
        load_label=str(row.get("load_label")),
        status=status,
        windows=int(windows) if windows is not None else 1,
        requests=int(requests) if requests is not None else None,
        lost_requests=int(lost) if lost is not None else None,
        why=why,
        ci_method=row.get("ci_method") if isinstance(row.get("ci_method"), str) else None,
        figures=_figures(row) if status in ("ok", "degraded") else {},
    )


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _load(row: dict[str, Any], metric: str) -> LoadAnswer:
    decided = row.get("decided")
    return LoadAnswer(
        host=str(row.get("host")),
        workload=str(row.get("workload") or ""),
        mode=str(row.get("mode")),
        load=float(row.get("load") or 0),
        load_label=str(row.get("load_label")),
        metric=metric,
        winner=str(row.get("label")),
        value=_num(row.get(metric)),
        lo=_num(row.get(f"{metric}_lo")),
        hi=_num(row.get(f"{metric}_hi")),
        se=_num(row.get(f"{metric}_se")),
        tied=[str(t) for t in (row.get("tied") or [])],
        beats=[str(t) for t in (row.get("beats") or [])],
        runner_up=str(row["runner_up"]) if isinstance(row.get("runner_up"), str) else None,
        margin=_num(row.get("margin")),
        margin_lo=_num(row.get("margin_lo")),
        margin_hi=_num(row.get("margin_hi")),
        decided=decided if isinstance(decided, bool) else None,
        basis=row["basis"] if isinstance(row.get("basis"), str) else "",
    )


def answer_of(analysis: Analysis) -> Answer:
    """The answer of an analysed run (the one computation every output renders)."""
    frame = analysis.frame
    measured = frame[frame["alias_of"].isna()] if "alias_of" in frame.columns else frame
    # The measured rows as dicts once (a to_dict of the wide frame is about a tenth of a second a thousand rows),
    # held no longer than the three readings of them.
    # (The frame's columns are its records' field names, strings: no copy of each dict with its keys made str.)
    rows = cast(list[dict[str, Any]], measured.to_dict("records"))
    points = [_point(row, analysis.param_columns) for row in rows]
    loads = [_load({str(k): v for k, v in r.items()}, analysis.metric) for r in analysis.best.to_dict("records")]
    by_status = analysis.status_counts()
    counts = Counts(planned=analysis.run.planned_points, **{s: by_status.get(s, 0) for s in STATUSES})
    kinds: dict[str, int] = {}
    for row in rows:
        if row.get("status") == "failed":
            kind = row.get("error_kind")
            kind = kind if isinstance(kind, str) and kind else "unknown"
            kinds[kind] = kinds.get(kind, 0) + 1
    sources = accept_len_by_source([row for row in rows if row.get("status") in MEASURED])
    del rows  # let go before the rest is made: at 20,000 records the peak is near recommend's 1 GB target
    return Answer(
        analysis=analysis,
        points=points,
        loads=loads,
        counts=counts,
        findings=list(analysis.findings),
        break_even=break_even(points, loads, analysis.frame),
        schedule_verdicts=verdicts(points, loads, measured),
        decisions=decisions(analysis),
        lossless=list(analysis.lossless.hosts) if analysis.lossless is not None else [],
        accept_len_sources=sources,
        failure_kinds=dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        findings_by_severity=analysis.counts(),
        pareto=[
            (str(r.get("host")), str(r.get("workload") or ""), str(r.get("label")), str(r.get("load_label")))
            for r in analysis.pareto.to_dict("records")
        ],
    )


def answer(run_dir: str | Path, *, analysis: Analysis | None = None, save: bool = False) -> Answer:
    """Analyse ``run_dir`` (or take its ``analysis``) and make its answer; with ``save``, write ``answer.json``
    into it (a run directory that cannot be written keeps no copy; the answer is returned all the same)."""
    analysis = analysis or analyse(run_dir)
    result = answer_of(analysis)
    if save:
        path = Path(run_dir)
        whole = result.to_dict()
        # What ``cached_counts`` reads comes first, so it reads the file's head, not every point (ls of many
        # runs of thousands of points: bench/RESULTS-scale.md).
        head = {"schema": whole.pop("schema"), "made_from": _fingerprint(path), "counts": whole.pop("counts")}
        payload = {**head, **whole}
        with contextlib.suppress(OSError):  # a new file renamed over it: never written through a link there
            write_atomic(path / ANSWER_FILE, json.dumps(payload, indent=1, default=str) + "\n")
    return result
