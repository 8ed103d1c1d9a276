"""The ``objective:`` and ``search:`` sections of an experiment file, and the checks a schema cannot make.

    objective:
      maximize: output_tok_s            # or minimize: ...; output_tok_s | per_user_tok_s | goodput | tokens_per_joule
      at: {concurrency: 16}             # or {rate: 4}, or {mix: [{concurrency: 1, weight: 1}, {concurrency: 16}]}
      constraints:                      # every one must hold at every load of ``at``
        itl_ms_p99: {max: 50}
        ttft_ms_p99: {max: 2000}
        accept_len: {min: 2.5}
        lossless: true                  # the configuration's answers match the autoregressive baseline's
      goodput: {ttft_ms: 2000, tpot_ms: 50}   # the per-request limits of ``goodput`` (vLLM's --goodput keys)
    search:
      strategy: successive-halving      # grid | random | successive-halving | bayesian
      budget: {restarts: 20}            # or {gpu_hours: 10}; every restart counts, baselines included
      seed: 0
      gpus: 8                           # GPUs one deployment holds (GPU-hours = restart seconds x gpus / 3600)
      where: ["budget >= topk"]         # pruning rules over a variant's matrix keys

Goodput is defined as vLLM's ``vllm bench serve --goodput`` and NVIDIA AIPerf define it: the requests that meet
*every* latency limit, per second of the window (vLLM ``vllm/benchmarks/serve.py`` ``calculate_metrics``: a
request is good when each of its ``ttft``, ``tpot``, ``e2el`` is at most its limit in ms, and
``request_goodput = good_completed / duration``; AIPerf ``aiperf/metrics/types/goodput_metric.py``:
``Goodput = Good request count / Benchmark Duration``, ``good_request_count_metric.py`` counting the requests
that satisfy all SLO thresholds).
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CONSTRAINT_FIGURES",
    "GOAL_FIGURES",
    "BudgetSpec",
    "LimitSpec",
    "LoadAtSpec",
    "MixEntry",
    "ObjectiveSpec",
    "SearchSpec",
    "admitted",
    "search_problems",
    "suggest",
]

#: What an objective may maximise or minimise: a window's figure (``client``), goodput (from its requests) or
#: tokens per joule (its GPU telemetry).
GoalFigure = Literal[
    "output_tok_s", "per_user_tok_s", "goodput", "tokens_per_joule", "accept_len",
    "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99", "e2e_ms_p50", "e2e_ms_p99",
]  # fmt: skip
GOAL_FIGURES: tuple[str, ...] = get_args(GoalFigure)
#: What a constraint may limit (``lossless`` is a yes/no of its own).
CONSTRAINT_FIGURES = (
    "output_tok_s", "per_user_tok_s", "goodput", "tokens_per_joule", "accept_len",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99",
    "tpot_ms_p50", "e2e_ms_p50", "e2e_ms_p99", "error_rate",
)  # fmt: skip
_GOODPUT_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
_RULE = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*|-?\d+(?:\.\d+)?)\s*(<=|>=|==|!=|<|>)\s*([A-Za-z_][A-Za-z0-9_]*|-?\d+(?:\.\d+)?)\s*$"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LimitSpec(_Strict):
    """A bound on one figure: ``max`` (at most), ``min`` (at least), or both."""

    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _one(self) -> LimitSpec:
        if self.max is None and self.min is None:
            raise ValueError("a constraint needs max or min")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is above max {self.max:g}")
        return self


class MixEntry(_Strict):
    concurrency: int | None = Field(None, ge=1, le=100000)  # as load.concurrency's
    rate: float | None = Field(None, gt=0)
    weight: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _one(self) -> MixEntry:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a mix entry names one load: concurrency or rate")
        return self


class LoadAtSpec(_Strict):
    """Which load the objective is read at: one concurrency, one rate, or a weighted mix of loads."""

    concurrency: int | None = Field(None, ge=1, le=100000)  # as load.concurrency's
    rate: float | None = Field(None, gt=0)
    mix: list[MixEntry] | None = None
    #: With ``load.workloads``: the workload the objective is read on (a search scores one workload).
    workload: str | None = None

    @model_validator(mode="after")
    def _one(self) -> LoadAtSpec:
        given = [x is not None for x in (self.concurrency, self.rate, self.mix)]
        if sum(given) != 1:
            raise ValueError("at: names one of concurrency, rate or mix")
        if self.mix is not None and not self.mix:
            raise ValueError("at.mix is empty")
        return self

    def loads(self) -> list[tuple[str, float, float]]:
        """``(mode, value, weight)`` of every load, weights summing to 1."""
        if self.concurrency is not None:
            return [("concurrency", float(self.concurrency), 1.0)]
        if self.rate is not None:
            return [("rate", float(self.rate), 1.0)]
        entries = self.mix or []
        total = sum(e.weight for e in entries)
        return [
            ("concurrency", float(e.concurrency), e.weight / total)
            if e.concurrency is not None
            else ("rate", float(e.rate or 0.0), e.weight / total)
            for e in entries
        ]


class ObjectiveSpec(_Strict):
    """What "best" means: a figure to maximise or minimise at a load, under constraints."""

    maximize: GoalFigure | None = None
    minimize: GoalFigure | None = None
    at: LoadAtSpec | None = None
    constraints: dict[str, LimitSpec | bool] = Field(default_factory=dict)
    goodput: dict[str, float] | None = None

    @model_validator(mode="after")
    def _check(self) -> ObjectiveSpec:
        if (self.maximize is None) == (self.minimize is None):
            raise ValueError("an objective names one of maximize or minimize")
        for name, limit in self.constraints.items():
            if name == "lossless":
                if not isinstance(limit, bool):
                    raise ValueError("constraints.lossless is true or false")
                continue
            if name not in CONSTRAINT_FIGURES:
                raise ValueError(f"unknown constraint {name!r}" + suggest(name, [*CONSTRAINT_FIGURES, "lossless"]))
            if isinstance(limit, bool):
                raise ValueError(f"constraints.{name} is a bound: {{max: N}} or {{min: N}}")
        if self.goodput is not None:
            for key, value in self.goodput.items():
                if key not in _GOODPUT_KEYS:
                    raise ValueError(f"goodput limits are {', '.join(_GOODPUT_KEYS)}, not {key!r}")
                if value <= 0:
                    raise ValueError(f"goodput.{key} must be positive")
        uses_goodput = self.figure == "goodput" or "goodput" in self.constraints
        if uses_goodput and not self.goodput:
            raise ValueError("goodput needs its per-request limits: goodput: {ttft_ms: ..., tpot_ms: ...}")
        return self

    @property
    def figure(self) -> str:
        return str(self.maximize or self.minimize)

    @property
    def sense(self) -> Literal["max", "min"]:
        return "max" if self.maximize is not None else "min"

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` beats ``b`` under this objective."""
        return a > b if self.sense == "max" else a < b


class BudgetSpec(_Strict):
    restarts: int | None = Field(None, ge=1)
    gpu_hours: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one(self) -> BudgetSpec:
        if (self.restarts is None) == (self.gpu_hours is None):
            raise ValueError("a budget is restarts: N or gpu_hours: H")
        return self


class SearchSpec(_Strict):
    """How to find the best configuration without the whole grid (``orchestrator/search``)."""

    strategy: Literal["grid", "random", "successive-halving", "bayesian"] = "grid"
    budget: BudgetSpec | None = None
    seed: int = 0
    gpus: int = Field(1, ge=1, le=100000)
    where: list[str] = Field(default_factory=list)
    #: Successive halving: keep the best 1/eta of a rung, measure them eta times longer.
    eta: int = Field(3, ge=2, le=10)

    @model_validator(mode="after")
    def _check(self) -> SearchSpec:
        if self.strategy != "grid" and self.budget is None:
            raise ValueError(f"strategy {self.strategy} needs a budget: {{restarts: N}} or {{gpu_hours: H}}")
        for rule in self.where:
            if not _RULE.match(rule):
                raise ValueError(f"where rule {rule!r} is not 'KEY OP VALUE' (OP: < <= > >= == !=)")
        return self


def parse_rule(rule: str) -> tuple[str, str, str]:
    """``"budget >= topk"`` -> ``("budget", ">=", "topk")`` (validated by :class:`SearchSpec`)."""
    match = _RULE.match(rule)
    if match is None:
        raise ValueError(rule)
    return match.group(1), match.group(2), match.group(3)


def suggest(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for the nearest of ``choices`` (empty when none is near)."""
    near = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


Scalar = str | int | float | bool
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _operand(text: str, params: Mapping[str, Scalar]) -> Any:
    if text in params:
        return params[text]
    try:
        return float(text)
    except ValueError:
        return None


def admitted(rules: Sequence[str], params: Mapping[str, Scalar]) -> bool:
    """Whether ``params`` passes every ``where`` rule; a rule naming a key the combination lacks does not apply."""
    for rule in rules:
        left, op, right = parse_rule(rule)
        a, b = _operand(left, params), _operand(right, params)
        if a is None or b is None:
            continue
        try:
            if not _OPS[op](a, b):
                return False
        except TypeError:
            continue  # text against a number: the rule is about another variant's keys
    return True


def search_problems(exp: Any) -> list[tuple[tuple[Any, ...], str]]:
    """What the schema cannot see: the objective's loads are among the experiment's, a search has an
    objective, a where rule names matrix keys, the budget affords the baselines."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    objective: ObjectiveSpec | None = getattr(exp, "objective", None)
    search: SearchSpec | None = getattr(exp, "search", None)
    if search is not None and objective is None:
        problems.append((("search",), "a search needs an objective: objective: {maximize: output_tok_s, at: ...}"))
    if objective is not None:
        at = objective.at
        if at is None:
            if len(exp.load.concurrency) + len(exp.load.rates) != 1:
                problems.append(
                    (("objective",), "objective.at is needed when load has more than one level: at: {concurrency: N}")
                )
        else:
            for index, (mode, value, _w) in enumerate(at.loads()):
                levels = exp.load.concurrency if mode == "concurrency" else exp.load.rates
                if not any(float(v) == value for v in levels):
                    where: tuple[Any, ...] = (
                        ("objective", "at", mode) if at.mix is None else ("objective", "at", "mix", index)
                    )
                    listed = ", ".join(f"{v:g}" for v in levels) or "none"
                    field = "concurrency" if mode == "concurrency" else "rates"
                    problems.append(
                        (
                            where,
                            f"{mode} {value:g} is not a load of the experiment (load.{field}: {listed})",
                        )
                    )
        workloads = sorted(exp.load.workloads or {})
        named = at.workload if at is not None else None
        if named is not None and named not in workloads:
            message = (
                f"workload {named!r} is not one of load.workloads ({', '.join(workloads)})" + suggest(named, workloads)
                if workloads
                else f"objective.at.workload {named!r} needs load.workloads"
            )
            problems.append((("objective", "at", "workload"), message))
        elif named is None and len(workloads) > 1 and search is not None and search.strategy != "grid":
            problems.append(
                (
                    ("objective", "at"),
                    "a search scores one workload: name it, at: {..., workload: NAME} (one of "
                    + ", ".join(workloads)
                    + ")",
                )
            )
        if objective.constraints.get("lossless") is True and not exp.lossless.enabled:
            problems.append(
                (
                    ("objective", "constraints", "lossless"),
                    "constraints.lossless needs the lossless check (lossless: {prompts: N})",
                )
            )
    if search is not None:
        keys = {k for name, v in exp.variants.items() if name not in exp.baselines for k in v.matrix}
        for index, rule in enumerate(search.where):
            left, _op, right = parse_rule(rule)
            for side in (left, right):
                if (side[0].isalpha() or side[0] == "_") and side not in keys:
                    message = f"where rule {rule!r}: {side!r} is not a matrix key" + suggest(side, sorted(keys))
                    problems.append((("search", "where", index), message))
        if search.strategy != "grid" and exp.load.repeats_across_restarts > 1:
            problems.append(
                (
                    ("load", "repeats_across_restarts"),
                    f"a {search.strategy} search deploys each candidate once per measurement (its longer "
                    "measurements are restarts of their own); repeats_across_restarts is for the grid: drop it, "
                    "or use load.repeats",
                )
            )
        restarts = search.budget.restarts if search.budget is not None else None
        if restarts is not None and search.strategy != "grid" and restarts <= len(exp.baselines):
            message = f"a budget of {restarts} restart(s) leaves none for a candidate after the baselines"
            problems.append((("search", "budget", "restarts"), message))
    return problems
