"""Recommendations, from a run directory alone: the best configuration per load level, with its interval, the
runner-up and the margin, whether the constraints hold, and what the search did not try.

Every configuration measured at a load level is scored under the experiment's objective at that level alone
(:mod:`orchestrator.search.objective`; a run without an ``objective:`` maximises output tokens/s with no
constraint). Levels are the objective's loads, or every load of the experiment when the objective names none
or the run is a grid: the configuration to run at C=1 may not be the one for C=128. With ``load.workloads``
there is a level per workload and load (``code C=16``), or only the objective's workload for a search. The
best is the feasible configuration with the best figure; the margin over the runner-up is their relative
difference with its interval (:func:`orchestrator.analysis.intervals.difference`), a winner beyond noise only
when the interval excludes zero, and recommended only then: a best not told apart from its runner-up is shown,
never advised. When no configuration meets the constraints at a level, the recommendation says so and names
the nearest configurations (the smallest excess over the limits) instead. The run's contamination
(``Answer.contamination``: points measured beside another sweep) is repeated with the recommendations.

:func:`to_yaml` renders it as an experiment fragment: a ``variants:`` mapping with one variant per recommended
configuration (its own template fields, the parameters as a one-value matrix), with the evidence as comments,
ready to paste into an experiment file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from orchestrator.analysis.frame import config_label
from orchestrator.analysis.intervals import Difference, difference, z_value
from orchestrator.analysis.roles import finite as _finite
from orchestrator.analysis.schedule_fit import MEASURE_LONGER
from orchestrator.errors import StoreError
from orchestrator.search.history import read_history
from orchestrator.search.objective import ConstraintCheck, LevelScore, Measured, Score, load_key, score_records

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.experiment.search import ObjectiveSpec
    from orchestrator.runs.store import Record

__all__ = ["Entry", "LevelRecommendation", "Recommendations", "recommend", "to_yaml"]

NEAREST = 3


def fmt(value: float | None) -> str:
    """A figure as a person reads it: thousands separated above 100, three significant digits below."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class Entry:
    """One configuration's standing at one load level."""

    label: str
    variant: str
    params: dict[str, Any]
    baseline: bool
    score: Score
    #: The figure's interval as the report gives it (the analysis frame's bootstrap interval of the point),
    #: when there is one; otherwise the score's normal interval (value +- z * se).
    interval: tuple[float, float] | None = None

    @property
    def lo(self) -> float | None:
        return self.interval[0] if self.interval is not None else self.score.lo

    @property
    def hi(self) -> float | None:
        return self.interval[1] if self.interval is not None else self.score.hi

    def describe(self, unit: str = "") -> str:
        s = self.score
        if s.value is None:
            return f"{self.label}: not measured"
        interval = f" [{fmt(self.lo)} … {fmt(self.hi)}]" if self.lo is not None and self.hi is not None else ""
        return f"{self.label}: {s.figure} {fmt(s.value)}{unit}{interval}"

    def constraints_text(self) -> str:
        parts = []
        for c in self.score.constraints:
            bound = f"<= {c.max:g}" if c.max is not None else f">= {c.min:g}"
            value = "not measured" if c.value is None else fmt(c.value)
            parts.append(f"{c.figure} {bound}: {c.status} ({value})")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "variant": self.variant,
            "params": self.params,
            "baseline": self.baseline,
            **self.score.to_dict(),
            **({"lo": round(self.interval[0], 4), "hi": round(self.interval[1], 4)} if self.interval else {}),
        }


@dataclass(frozen=True)
class LevelRecommendation:
    load: str
    best: Entry | None
    runner_up: Entry | None
    margin: Difference | None
    #: No configuration met the constraints at this level: the nearest ones, by their excess over the limits.
    nearest: tuple[Entry, ...] = ()
    measured: int = 0

    @property
    def constraints_hold(self) -> bool:
        return self.best is not None

    @property
    def told_apart(self) -> bool:
        """Whether the best is told apart from the runner-up (the margin's interval excludes zero), or has none:
        only then is it recommended (a best within noise of the runner-up is not advice, it is a coin)."""
        if self.best is None:
            return False
        return self.runner_up is None or (self.margin is not None and self.margin.significant is True)

    def statement(self, objective: ObjectiveSpec | None) -> str:
        if self.best is None:
            if not self.measured:
                return f"{self.load}: no configuration was measured"
            limits = _limits_text(objective)
            names = ", ".join(f"{e.label} ({e.constraints_text()})" for e in self.nearest)
            return (
                f"{self.load}: no configuration meets the constraints ({limits}) among the {self.measured} measured;"
                f" the nearest: {names}"
            )
        text = f"{self.load}: best {self.best.describe()}"
        if self.runner_up is not None and self.margin is not None:
            beyond = self.margin.significant
            verdict = "beyond noise" if beyond else "not beyond noise" if beyond is False else "no interval"
            text += (
                f"; runner-up {self.runner_up.label} {fmt(self.runner_up.score.value)}, margin "
                f"{self.margin.relative:+.1%} ({self.margin.describe()}, {verdict})"
            )
        elif self.runner_up is None:
            text += "; no runner-up (one feasible configuration)"
        constraints = self.best.constraints_text()
        if constraints:
            text += f"; constraints: {constraints}"
        if not self.told_apart:
            text += "; not told apart from the runner-up: nothing recommended at this load"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "load": self.load,
            "constraints_hold": self.constraints_hold,
            "best": None if self.best is None else self.best.to_dict(),
            "runner_up": None if self.runner_up is None else self.runner_up.to_dict(),
            "margin": None
            if self.margin is None
            else {
                "relative": round(self.margin.relative, 5),
                "lo": None if self.margin.lo is None else round(self.margin.lo, 5),
                "hi": None if self.margin.hi is None else round(self.margin.hi, 5),
                "significant": self.margin.significant,
            },
            "nearest": [e.to_dict() for e in self.nearest],
            "measured": self.measured,
            "told_apart": self.told_apart,
        }


@dataclass
class Recommendations:
    run_dir: Path
    experiment: str
    run_id: str
    objective: ObjectiveSpec | None
    strategy: str
    levels: list[LevelRecommendation]
    restarts_spent: int
    grid_restarts: int
    candidates: int
    untried: list[str] = field(default_factory=list)
    brief_only: list[str] = field(default_factory=list)
    #: The variant definitions (template fields) of the run's experiment, for the YAML fragment.
    variant_fields: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The run's contamination (``Answer.contamination``), repeated with every recommendation.
    contamination: list[str] = field(default_factory=list)

    def not_tried_statement(self) -> str:
        if not self.untried and self.strategy == "grid":
            return f"every configuration of the grid was measured ({self.grid_restarts}, baselines included)"
        if not self.untried:
            return f"the search measured every one of the {self.candidates} candidates"
        shown = ", ".join(self.untried[:6]) + (", …" if len(self.untried) > 6 else "")
        text = f"not tried: {len(self.untried)} of the {self.candidates} candidates ({shown})"
        if self.brief_only:
            text += f"; measured only briefly (dropped after the first rung): {len(self.brief_only)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "experiment": self.experiment,
            "run_id": self.run_id,
            "strategy": self.strategy,
            "objective": None if self.objective is None else self.objective.model_dump(mode="json", exclude_none=True),
            "restarts_spent": self.restarts_spent,
            "grid_restarts": self.grid_restarts,
            "candidates": self.candidates,
            "untried": self.untried,
            "brief_only": self.brief_only,
            "levels": [lv.to_dict() for lv in self.levels],
            "contamination": list(self.contamination),
        }


def _limits_text(objective: ObjectiveSpec | None) -> str:
    if objective is None or not objective.constraints:
        return "none"
    parts = []
    for name, limit in objective.constraints.items():
        if isinstance(limit, bool):
            parts.append(name if limit else f"not {name}")
        else:
            bounds = [f"<= {limit.max:g}" if limit.max is not None else "", f">= {limit.min:g}" if limit.min else ""]
            parts.append(f"{name} " + " and ".join(b for b in bounds if b))
    return ", ".join(parts)


def _run_experiment(run_dir: Path) -> Experiment:
    from orchestrator.errors import ConfigError
    from orchestrator.experiment.schema import parse_experiment
    from orchestrator.runs.store import RunStore

    store = RunStore.open(run_dir)
    try:
        return parse_experiment(store.experiment(), {}, str(run_dir / "experiment.yaml"), read_secrets=False)
    except ConfigError as exc:
        raise StoreError(f"the run's experiment.yaml no longer validates: {exc}") from None


def _levels(experiment: Experiment) -> list[tuple[str, float, str | None]]:
    """``(mode, value, workload)`` of every level a recommendation is made for: one per workload of
    ``load.workloads`` (the configuration to run on code may not be the one for chat), else workload None."""
    objective = experiment.objective
    searched = experiment.search is not None and experiment.search.strategy != "grid"
    workloads: list[str | None] = list(experiment.load.workloads or {}) or [None]
    if objective is not None and objective.at is not None and searched:
        if objective.at.workload is not None:
            workloads = [objective.at.workload]
        return [(m, v, w) for w in workloads for m, v, _ in objective.at.loads()]
    levels = [("concurrency", float(c)) for c in experiment.load.concurrency]
    levels += [("rate", float(r)) for r in experiment.load.rates]
    return [(m, v, w) for w in workloads for m, v in levels]


def recommend(run_dir: str | Path, *, analysis: Any = None) -> Recommendations:
    """The recommendations of one run directory (see the module docstring); ``analysis``: the run's, when the
    caller has it (the report), so its answer is not made twice."""
    from orchestrator.analysis.roles import baseline_roles
    from orchestrator.experiment.search import ObjectiveSpec
    from orchestrator.plan.deployments import build_plan
    from orchestrator.runs.store import ResumeState, RunStore
    from orchestrator.search.driver import lossless_verdicts, search_plan, uses_search

    run_dir = Path(run_dir)
    experiment = _run_experiment(run_dir)
    store = RunStore.open(run_dir)
    grid = build_plan(experiment)
    plan = search_plan(experiment, grid) if uses_search(experiment) else grid
    objective = experiment.objective or ObjectiveSpec(maximize="output_tok_s")
    ar = baseline_roles(list(experiment.baselines)).ar
    tie_margin = experiment.checks.lossless_tie_margin
    lossless = (
        lossless_verdicts(run_dir, plan, ar, tie_margin) if objective.constraints.get("lossless") is True else None
    )

    # The rows are the run's answer (orchestrator/analysis/answer.py): one per point, its windows combined and
    # its interval made the one way every output shows; the objective only chooses among them.
    from orchestrator.analysis.answer import answer as run_answer

    the_answer = run_answer(run_dir, analysis=analysis)
    analysis = the_answer.analysis
    # Read after the answer is made: its reading of every record is over by then, so the two are not held at
    # once (recommend of 20,000 records: bench/RESULTS-scale.md).
    frame = analysis.frame
    frame = frame[frame["alias_of"].isna() & frame["status"].isin(analysis.ranked_statuses)]
    level = analysis.settings.confidence
    from_rows = _row_figures(objective, frame)
    # The figures come from the answer's rows: the records are read for their identities only (their figures,
    # most of a real record's memory, dropped as each is read), unless the objective's figure needs the windows.
    records: list[Record] = list(ResumeState.from_records(store.records(figures=not from_rows)).latest.values())
    # Each point's row by (configuration, mode, load, workload), found once: a filter of the whole frame per
    # configuration and level made recommend quadratic in points (bench/RESULTS-scale.md).
    row_of: dict[tuple[str, str, float, str], int] = {}
    keys = zip(
        frame["label"],
        frame["mode"],
        frame["load"].astype(float),
        frame["workload"].fillna("").astype(str),
        strict=True,
    )
    for index, found in enumerate(keys):
        row_of.setdefault(found, index)
    by_config: dict[str, list[Record]] = {}
    for record in records:
        by_config.setdefault(record.config_hash, []).append(record)
    levels: list[LevelRecommendation] = []
    for mode, value, workload in _levels(experiment):
        entries: list[Entry] = []
        load = load_key(mode, value)
        key = f"{workload} {load}" if workload else load
        for records_of in by_config.values():
            first = records_of[0]
            at_level = [
                r
                for r in records_of
                if load_key(r.mode, r.concurrency if r.mode == "concurrency" else r.rate) == load
                and getattr(r, "workload", None) == workload
            ]
            label = config_label(first.variant, dict(first.params))
            position = row_of.get((label, mode, float(value), workload or ""))
            if not at_level or position is None:
                continue
            point = frame.iloc[position]
            if from_rows:
                score = score_row(point, objective, load, level, lossless, [r.deployment_id for r in at_level])
            else:  # a figure the answer has no column for (error_rate): the objective's own, from the windows
                score = score_records(
                    at_level, objective, [(mode, value, 1.0)], run_dir=run_dir, level=level, lossless=lossless
                )
            interval = _row_interval(point, score.figure)
            entries.append(Entry(label, first.variant, dict(first.params), first.baseline, score, interval))
        ranked = sorted(entries, key=lambda e: e.score.rank_key())
        feasible = [e for e in ranked if e.score.feasible]
        if feasible:
            best = feasible[0]
            runner = feasible[1] if len(feasible) > 1 else None
            margin = None
            if runner is not None:
                a, b = best.score, runner.score
                # The answer's rule (orchestrator/analysis/compare.py, significance): the same difference.
                margin = difference(a.value, a.se, b.value, b.se, level=level)
            levels.append(LevelRecommendation(key, best, runner, margin, (), len(entries)))
        else:
            nearest = tuple(sorted(ranked, key=lambda e: (e.score.violation, -e.score.gain()))[:NEAREST])
            levels.append(LevelRecommendation(key, None, None, None, nearest, len(entries)))

    candidates = [d for d in grid.deployments if d.restart == 1 and not d.baseline]
    measured = {r.config_hash for r in records}
    # And by what it is (variant and parameters, aliases too): a run an older version made has other hashes
    # for the same configurations, which it did measure (it ranks them above).
    measured_labels = {config_label(r.variant, r.params) for r in records} | {
        config_label(str(a.get("variant")), a.get("params") or {}) for r in records for a in r.aliases
    }
    history = read_history(run_dir)
    rungs: dict[str, int] = {}
    for row in history:
        rungs[str(row.get("config_hash"))] = max(rungs.get(str(row.get("config_hash")), 0), int(row.get("rung") or 0))
    untried = [
        d.config_label for d in candidates if d.config_hash not in measured and d.config_label not in measured_labels
    ]
    strategy = experiment.search.strategy if experiment.search is not None else "grid"
    brief = []
    if strategy == "successive-halving":
        brief = [d.config_label for d in candidates if d.config_hash in measured and rungs.get(d.config_hash, 0) == 0]
    spent = len({r.deployment_id for r in records})
    return Recommendations(
        run_dir=run_dir,
        experiment=experiment.name,
        run_id=store.run_id,
        objective=experiment.objective,
        strategy=strategy,
        levels=levels,
        restarts_spent=spent,
        grid_restarts=len([d for d in grid.deployments if d.restart == 1]),
        candidates=len(candidates),
        untried=untried,
        brief_only=brief,
        variant_fields={name: v.template_fields for name, v in experiment.variants.items()},
        contamination=the_answer.contamination,
    )


def _row_figures(objective: ObjectiveSpec, frame: Any) -> bool:
    """Whether the answer's rows hold the objective's figure and every constrained one (goodput they do, when
    the run has its limits: orchestrator/analysis/goodput.py; error_rate they do not)."""
    names = [objective.figure, *(n for n in objective.constraints if n != "lossless")]
    return all(name in frame.columns for name in names)


def _row_value(row: Any, figure: str) -> Measured | None:
    value, se = _finite(row.get(figure)), _finite(row.get(f"{figure}_se"))
    return None if value is None else Measured(value, se)


def score_row(
    row: Any,
    objective: ObjectiveSpec,
    load: str,
    level: float,
    lossless: Mapping[str, bool | None] | None,
    deployments: list[str],
) -> Score:
    """The objective's score of one point of the answer: its figure and standard error as the answer has them
    (no pooling of its own), each constraint judged on the point's own interval (the answer's ``lo`` … ``hi``)."""
    from orchestrator.experiment.search import LimitSpec
    from orchestrator.search.objective import check_constraint, lossless_check

    z = z_value(level)
    main = _row_value(row, objective.figure)
    checks: list[ConstraintCheck] = []
    for name, limit in objective.constraints.items():
        if name == "lossless":
            if limit is True:
                checks.append(lossless_check([(lossless or {}).get(d) for d in deployments]))
            continue
        assert isinstance(limit, LimitSpec)
        checks.append(check_constraint(name, limit, _row_value(row, name), z, _row_interval(row, name)))
    windows = _finite(row.get("windows"))
    lv = LevelScore(load, main.value if main else None, main.se if main else None, int(windows or 1), tuple(checks))
    return Score(
        objective.figure, objective.sense, main.value if main else None, main.se if main else None, level, (lv,)
    )


def _row_interval(row: Any, figure: str) -> tuple[float, float] | None:
    """The interval the answer gives ``figure`` of one point (``<figure>_lo`` … ``_hi``)."""
    low, high = _finite(row.get(f"{figure}_lo")), _finite(row.get(f"{figure}_hi"))
    return (low, high) if low is not None and high is not None else None


def _variant_name(entry: Entry, loads: list[str]) -> str:
    suffix = "-".join(
        load.replace(" ", "-").replace("C=", "c").replace("rate=", "r").replace("/s", "").replace(".", "_")
        for load in loads
    )
    return f"{entry.variant}-best-{suffix}"


def _comment(text: str) -> list[str]:
    return ["# " + line for line in text.splitlines()]


def to_yaml(recs: Recommendations) -> str:
    """The recommendations as an experiment fragment (``variants:``), the evidence in comments."""
    lines = [f"# specsweep recommend: {recs.experiment}, run {recs.run_id} ({recs.strategy})"]
    objective = recs.objective
    if objective is not None:
        at = ", ".join(load_key(m, v) for m, v, _ in objective.at.loads()) if objective.at else "every load"
        if objective.at is not None and objective.at.workload is not None:
            at += f" on workload {objective.at.workload}"
        lines.append(
            f"# objective: {'maximize' if objective.sense == 'max' else 'minimize'} {objective.figure} at {at}; "
            f"constraints: {_limits_text(objective)}"
        )
    lines.append(f"# restarts spent: {recs.restarts_spent} (the grid: {recs.grid_restarts})")
    lines += [f"# contaminated: {c}" for c in recs.contamination]
    for level in recs.levels:
        lines += _comment(level.statement(objective))
    lines += _comment(recs.not_tried_statement())
    # One variant per recommended configuration (told apart from its runner-up), named for every load it is best at.
    chosen: dict[str, tuple[Entry, list[str]]] = {}
    for level in recs.levels:
        if level.best is None or not level.told_apart:
            continue
        chosen.setdefault(level.best.label, (level.best, []))[1].append(level.load)
    variants: dict[str, dict[str, Any]] = {}
    for entry, loads in chosen.values():
        body: dict[str, Any] = dict(recs.variant_fields.get(entry.variant, {}))
        if entry.params:
            body["matrix"] = {k: [v] for k, v in entry.params.items()}
        variants[_variant_name(entry, loads)] = body
    if not variants:
        if any(level.best is not None for level in recs.levels):
            lines.append(
                "# no configuration to recommend: at no load is the best told apart from the runner-up; "
                + MEASURE_LONGER
            )
        else:
            lines.append("# no configuration to recommend: no load level has one that meets the constraints")
        lines.append("variants: {}")
        return "\n".join(lines) + "\n"
    text = yaml.safe_dump({"variants": variants}, sort_keys=False, width=1000, default_flow_style=None)
    lines.append(text.rstrip())
    return "\n".join(lines) + "\n"
