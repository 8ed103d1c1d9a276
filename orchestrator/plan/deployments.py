"""The plan: what a sweep will do, as a pure function of a validated Experiment.

Each variant's matrix is expanded (``itertools.product`` in the order the file gives), include/exclude
filters applied, every template rendered, and the result grouped into Deployments: one per distinct rendered
server configuration, so one restart each. Identical configurations (a baseline that also appears in a
matrix, two variants that render the same command) deploy once; the deployment keeps every (variant, params)
it stands for in ``aliases``. Baselines come first, in the order ``baselines`` names them, then the other
variants in file order. Ids are short content hashes: reordering keys in the YAML file, or renaming nothing
that reaches the server, leaves them unchanged, which is what lets ``--resume`` match finished points.
Expanding a matrix and rendering a configuration live in :mod:`orchestrator.experiment.rendering` (the experiment's
validation renders every command too); this module adds the grouping, the ids and the load points.

Repeats (``load.repeats``, ``load.repeats_across_restarts``): a deployment is deployed once per restart round,
all configurations in a round before the next round begins (so drift between rounds touches every
configuration alike); within a deployment, every load is measured once per repeat round, all loads before the
next round. Each repeat is its own load point (its own record, window and requests file), with its own
workload seed so that every window sends its own prompts (``LoadPoint.seed``). Ids stay what they were before
repeats existed for the first repeat of the first restart: ``restart`` and ``repeat`` enter a point's content
only when above 1, ``until`` only when set, so runs made before them still resume.

Workloads (``load.workloads``): each workload is one more load point of every deployment at every load (no
restart), measured in file order within each repeat round (every load of the first workload, then the
next). A point's content then holds its workload's name and source (so changing a workload's file, format,
category or cap re-measures only its points), and its ETA uses the workload's output-length cap. Without
workloads nothing of this enters a point, and the ids are what they were before workloads existed.

No I/O, no SSH, no clock: tests drive this with tables of cases.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.experiment.rendering import expand_matrix, server_config
from orchestrator.experiment.search import admitted
from orchestrator.plan.pace import Pace, pace_of
from orchestrator.quoting import visible

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment

__all__ = [
    "PLAN_SCHEMA_VERSION",
    "Deployment",
    "LoadPoint",
    "Plan",
    "build_plan",
    "content_id",
    "decide_point_ids",
    "decide_rounds",
    "expand_matrix",
    "load_lines",
    "make_deployment",
    "probe_seconds",
    "request_alone_seconds",
    "round_deployment",
    "server_config",
    "window_seed",
]

PLAN_SCHEMA_VERSION = 1

Scalar = str | int | float | bool


def content_id(prefix: str, content: Any) -> str:
    """A short, stable id from canonical JSON of ``content`` (key order never matters)."""
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return f"{prefix}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


class LoadPoint(BaseModel):
    """One client-side setting inside a deployment: a closed-loop concurrency or an open-loop request rate."""

    model_config = ConfigDict(frozen=True)

    id: str
    mode: Literal["concurrency", "rate"]
    concurrency: int | None = None
    rate: float | None = None
    max_in_flight: int | None = None
    requests: int | None = None
    duration_s: float | None = None
    estimated_seconds: float = 0.0
    #: Which measurement of this load this is: its repeat within the deployment and the deployment's restart
    #: round (both from 1).
    repeat: int = 1
    restart: int = 1
    #: The workload seed of this window (None: the experiment's ``load.seed``).
    seed: int | None = None
    #: Adaptive stopping (``load.until``): rel_ci, figure, min_requests; ``requests``/``duration_s`` are the caps.
    until: dict[str, Any] | None = None
    #: The workload (a name of ``load.workloads``) this point sends; None: ``load.prompts``.
    workload: str | None = None

    @property
    def load_label(self) -> str:
        load = f"C={self.concurrency}" if self.mode == "concurrency" else f"rate={self.rate:g}/s"
        return f"{self.workload} {load}" if self.workload else load

    @property
    def label(self) -> str:
        return self.load_label + (f" #{self.repeat}" if self.repeat > 1 else "")


class Alias(BaseModel):
    model_config = ConfigDict(frozen=True)

    variant: str
    params: dict[str, Scalar]


class Deployment(BaseModel):
    """One concrete server configuration: one restart. What a Service applies."""

    model_config = ConfigDict(frozen=True)

    id: str
    variant: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    aliases: list[Alias] = Field(default_factory=list)
    baseline: bool = False
    # The rendered server configuration (what reaches the host). ``command`` is the ExecStart line for a
    # systemd service or the command line for a process service; ``environment`` the Environment= values.
    command: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    config_hash: str
    load_points: list[LoadPoint]
    expected_load_seconds: float = 0.0
    #: What a start is expected to take by the clock, the lossless probe included: the server's own figure where
    #: known (the simulator's, orchestrator/plan/pace.py), else the file's; None: ``expected_load_seconds``, the
    #: file's figure alone (which the GPU-hours keep).
    start_seconds: float | None = None
    #: Which deployment of this configuration this is (``load.repeats_across_restarts``), from 1.
    restart: int = 1

    @property
    def config_label(self) -> str:
        """``variant(k=v, ...)``, a control character in it escaped (``quoting.visible``: shown in a terminal)."""
        if not self.params:
            return visible(self.variant)
        return visible(self.variant + "(" + ", ".join(f"{k}={v}" for k, v in self.params.items()) + ")")

    @property
    def label(self) -> str:
        return self.config_label + (f" [restart {self.restart}]" if self.restart > 1 else "")

    @property
    def wall_start_seconds(self) -> float:
        """The start the ETA counts: the server's own figure where known, else the file's."""
        return self.start_seconds if self.start_seconds is not None else self.expected_load_seconds

    def estimated_seconds(self) -> float:
        """The file's start plus the points (what a restart costs the GPU-hours)."""
        return self.expected_load_seconds + sum(p.estimated_seconds for p in self.load_points)

    def wall_seconds(self) -> float:
        """The clock time this deployment is expected to take: its start (:attr:`wall_start_seconds`) and points."""
        return self.wall_start_seconds + sum(p.estimated_seconds for p in self.load_points)


class Plan(BaseModel):
    """The ordered deployments of one experiment, with totals."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = PLAN_SCHEMA_VERSION
    experiment: str
    deployments: list[Deployment]
    #: The points the rounds of ``load.decide`` may add (``orchestrator/plan/deciding.py``): planned, but measured
    #: only where a load is not yet decided; not in the totals.
    decide_point_ids: list[str] = Field(default_factory=list)

    @property
    def restarts(self) -> int:
        return len(self.deployments)

    @property
    def load_point_count(self) -> int:
        return sum(len(d.load_points) for d in self.deployments)

    @property
    def points_text(self) -> str:
        """``18 load points``, and with repeats or restart rounds ``(36 measurements ...)``: points as the sweep
        and its answer count them (a configuration at a load), each repeat another measurement of one point."""
        windows = [p for d in self.deployments for p in d.load_points]
        points = sum(1 for p in windows if p.repeat == 1 and p.restart == 1)
        said = f"{points} load points"
        if points == len(windows):
            return said
        return f"{said} ({len(windows)} measurements with their repeats and restarts)"

    @property
    def eta_seconds(self) -> float:
        return sum(d.wall_seconds() for d in self.deployments)

    def totals(self) -> dict[str, Any]:
        return {
            "deployments": len(self.deployments),
            "load_points": self.load_point_count,
            "restarts": self.restarts,
            "eta_seconds": round(self.eta_seconds, 1),
        }

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON shape scripts rely on (``specsweep plan --json``)."""
        out = {
            "schema_version": self.schema_version,
            "experiment": self.experiment,
            "deployments": [d.model_dump(mode="json") for d in self.deployments],
            "totals": self.totals(),
        }
        if self.decide_point_ids:
            out["decide_point_ids"] = list(self.decide_point_ids)
        return out


def _until(experiment: Experiment) -> dict[str, Any] | None:
    until = experiment.load.until
    if until is None:
        return None
    return {"rel_ci": until.rel_ci, "figure": until.figure, "min_requests": until.min_requests}


def window_seed(seed: int, restart: int, repeat: int, repeats: int) -> int:
    """The workload seed of one window: the load's own for the first, then one more per window, so every
    repeat and restart sends its own prompts (and the same ones on every configuration)."""
    return seed + (restart - 1) * repeats + (repeat - 1)


def _workloads(experiment: Experiment) -> list[tuple[str | None, dict[str, Any] | None, int]]:
    """(name, identity in a point's content, output-length cap) of each workload; one unnamed without any."""
    load = experiment.load
    if not load.workloads:
        return [(None, None, load.max_tokens)]
    return [
        (name, {"name": name, **spec.model_dump(mode="json")}, spec.max_tokens or load.max_tokens)
        for name, spec in load.workloads.items()
    ]


def load_lines(warmup: int, points: Iterable[LoadPoint], *, window: str = "") -> list[str]:
    """A dry run's lines for a deployment's loads: the warm-up, then each point (``window``: how its log window
    is read, when the launcher says)."""
    out = [f"warm up: {warmup} requests at C=1"] if warmup else []
    for point in points:
        size = f"{point.requests} requests" if point.requests else f"{point.duration_s:g}s"
        out.append(f"load {point.label}: {size} ({point.id})" + (f"; its window: {window}" if window else ""))
    return out


def _load_points(
    experiment: Experiment, deployment_key: str, restart: int = 1, pace: Pace | None = None
) -> list[LoadPoint]:
    points: list[LoadPoint] = []
    load = experiment.load
    pace = pace if pace is not None else pace_of(experiment)
    for repeat in range(1, load.repeats + 1):
        for index, (workload, identity, cap) in enumerate(_workloads(experiment)):
            warm = repeat == 1 and index == 0  # the deployment warms up once, before its first point
            points += _round_points(experiment, deployment_key, restart, repeat, workload, identity, cap, warm, pace)
    return points


def _round_points(
    experiment: Experiment,
    deployment_key: str,
    restart: int,
    repeat: int,
    workload: str | None,
    identity: dict[str, Any] | None,
    max_tokens: int,
    warm: bool,
    pace: Pace,
) -> list[LoadPoint]:
    load = experiment.load
    until = _until(experiment)
    requests, duration = load.requests, load.duration
    if load.until is not None:
        requests, duration = load.until.max_requests, load.until.max_duration
        # An adaptive point stops between its minimum and its cap: the estimate guesses twice the minimum.
        guess = 2 * load.until.min_requests if requests is None else min(2 * load.until.min_requests, requests)
    points: list[LoadPoint] = []

    def content_of(base: dict[str, Any], repeat: int) -> dict[str, Any]:
        content = dict(base)
        if identity is not None:
            content["workload"] = identity
        if until is not None:
            content["until"] = until
        if repeat > 1:
            content["repeat"] = repeat
        if restart > 1:
            content["restart"] = restart
        return content

    seed = window_seed(load.seed, restart, repeat, load.repeats)
    extra: dict[str, Any] = {
        "repeat": repeat,
        "restart": restart,
        "seed": None if seed == load.seed else seed,
        "until": until,
        "workload": workload,
    }
    for c in load.concurrency:
        content = {"mode": "concurrency", "concurrency": c, "requests": requests, "duration": duration}
        request_seconds = pace.request_seconds(max_tokens, c)  # per user: slower as C grows on the simulator
        if until is not None:
            est = math.ceil(guess / c) * request_seconds
            est = min(est, duration) if duration is not None else est
        elif duration is not None:
            est = duration
        else:
            n = requests if requests is not None else c
            est = math.ceil(n / c) * request_seconds
        if warm:
            est += math.ceil(load.warmup / max(c, 1)) * request_seconds
        points.append(
            LoadPoint(
                id=content_id("p", [deployment_key, content_of(content, repeat)]),
                mode="concurrency",
                concurrency=c,
                requests=requests,
                duration_s=duration,
                estimated_seconds=round(est, 3),
                **extra,
            )
        )
    for r in load.rates:
        content = {
            "mode": "rate",
            "rate": r,
            "requests": requests,
            "duration": duration,
            "max_in_flight": load.max_in_flight,
        }
        request_seconds = pace.request_seconds(max_tokens, 1)
        # Little's law: about rate x request time requests run at once (at most max_in_flight).
        running = max(1, math.ceil(r * request_seconds))
        if load.max_in_flight is not None:
            running = min(running, load.max_in_flight)
        request_seconds = pace.request_seconds(max_tokens, running)
        if until is not None:
            est = guess / r + request_seconds
            est = min(est, duration) if duration is not None else est
        elif duration is not None:
            est = duration
        else:
            n = requests if requests is not None else 1
            est = n / r + request_seconds
        points.append(
            LoadPoint(
                id=content_id("p", [deployment_key, content_of(content, repeat)]),
                mode="rate",
                rate=r,
                max_in_flight=load.max_in_flight,
                requests=requests,
                duration_s=duration,
                estimated_seconds=round(est, 3),
                **extra,
            )
        )
    return points


def _lossless_seconds(experiment: Experiment, variant: str, baseline: bool, pace: Pace) -> float:
    """What the lossless probe adds to a deployment, after its points (orchestrator/sweep/lossless.py):
    its prompts one at a time, three passes for the autoregressive baseline (twice alone, then batched)."""
    lossless = experiment.lossless
    if not lossless.enabled or not experiment.baselines:
        return 0.0
    names = list(experiment.baselines)
    ar = next((b for b in names if b.lower().split("-")[0].split("_")[0] in ("ar", "autoregressive")), names[0])
    each = lossless.prompts * pace.request_seconds(lossless.max_tokens or experiment.load.max_tokens, 1)
    return 3 * each if baseline and variant == ar else each


def probe_seconds(experiment: Experiment, deployment: Deployment) -> float:
    """What the lossless probe adds to ``deployment``'s start at the plan's pace (what a sweep's ETA scales by the
    engine's observed speed, orchestrator/plan/eta.py)."""
    pace = pace_of(experiment, deployment.command)
    return _lossless_seconds(experiment, deployment.variant, deployment.baseline, pace)


def request_alone_seconds(experiment: Experiment, deployment: Deployment, max_tokens: int) -> float:
    """The plan's seconds of one request of ``max_tokens`` sent alone to ``deployment`` (a warm-up request, a
    lossless probe's answer): what the engine's observed speed is held against (orchestrator/plan/eta.py)."""
    return pace_of(experiment, deployment.command).request_seconds(max_tokens, 1)


def make_deployment(
    experiment: Experiment,
    variant: str,
    params: dict[str, Scalar],
    *,
    aliases: list[Alias] | None = None,
    baseline: bool = False,
    restart: int = 1,
) -> Deployment:
    """One deployment of ``variant`` with ``params``, with the experiment's load points (playbooks use this);
    ``restart`` says which deployment of the configuration it is (its id and its points' ids carry it above 1)."""
    config = server_config(experiment, variant, params)
    key = content_id("c", config)
    pace = pace_of(experiment, config["command"])
    checks = _lossless_seconds(experiment, variant, baseline, pace)
    return Deployment(
        id=content_id("d", config) if restart == 1 else content_id("d", [config, {"restart": restart}]),
        variant=variant,
        params=params,
        aliases=aliases or [],
        baseline=baseline,
        command=config["command"],
        environment=config["environment"],
        config_hash=key,
        load_points=_load_points(experiment, key, restart, pace),
        expected_load_seconds=experiment.server.expected_load_time,
        start_seconds=pace.start_seconds + checks if pace.own or checks else None,
        restart=restart,
    )


def build_plan(experiment: Experiment) -> Plan:
    """Expand, render, deduplicate and order: the Plan of one Experiment."""
    order = list(experiment.baselines) + [v for v in experiment.variants if v not in experiment.baselines]
    by_hash: dict[str, dict[str, Any]] = {}
    rules = experiment.search.where if experiment.search is not None else []
    for name in order:
        variant = experiment.variants[name]
        for params in expand_matrix(variant):
            if rules and name not in experiment.baselines and not admitted(rules, params):
                continue  # pruned by the search's ``where`` rules (orchestrator/search/space.py)
            config = server_config(experiment, name, params)
            key = content_id("c", config)
            if key in by_hash:
                by_hash[key]["aliases"].append(Alias(variant=name, params=params))
                continue
            by_hash[key] = {
                "variant": name,
                "params": params,
                "config": config,
                "aliases": [],
                "baseline": name in experiment.baselines,
            }
    deployments = [
        make_deployment(
            experiment,
            entry["variant"],
            entry["params"],
            aliases=entry["aliases"],
            baseline=entry["baseline"],
            restart=restart,
        )
        for restart in range(1, experiment.load.repeats_across_restarts + 1)
        for entry in by_hash.values()
    ]
    plan = Plan(experiment=experiment.name, deployments=deployments)
    if experiment.load.decide is not None:
        plan = plan.model_copy(update={"decide_point_ids": decide_point_ids(experiment, plan)})
    return plan


# -- the rounds of load.decide (orchestrator/plan/deciding.py has their budget) ------------------------------


def decide_rounds(experiment: Experiment) -> tuple[int, str]:
    """How many extra rounds ``load.decide`` allows at most, and what sets it (``max_rounds`` or
    ``max_requests``: its windows of ``load.requests`` beyond the planned ones)."""
    decide, load = experiment.load.decide, experiment.load
    if decide is None:
        return 0, "max_rounds"
    if decide.max_requests is not None and load.requests:
        by_requests = max(decide.max_requests // load.requests - load.repeats, 0)
        if by_requests < decide.max_rounds:
            return by_requests, "max_requests"
    return decide.max_rounds, "max_rounds"


def round_deployment(
    experiment: Experiment, deployment: Deployment, round_: int, wanted: Callable[[LoadPoint], bool]
) -> Deployment:
    """``deployment`` once more for extra round ``round_`` (from 1) of ``load.decide``, with the points of repeat
    ``load.repeats + round_`` that ``wanted`` keeps: the points a larger ``load.repeats`` would have planned, in a
    deployment with an id of its own (it is a restart the plan did not hold) and the same configuration hash."""
    repeat = experiment.load.repeats + round_
    points: list[LoadPoint] = []
    for index, (workload, identity, cap) in enumerate(_workloads(experiment)):
        made = _round_points(
            experiment,
            deployment.config_hash,
            deployment.restart,
            repeat,
            workload,
            identity,
            cap,
            index == 0,
            pace_of(experiment, deployment.command),
        )
        points += [p for p in made if wanted(p)]
    return deployment.model_copy(
        update={"id": content_id("d", [deployment.id, {"decide_round": round_}]), "load_points": points}
    )


def decide_point_ids(experiment: Experiment, plan: Plan) -> list[str]:
    """The ids of every point the rounds of ``load.decide`` may measure (planned: a resume and the analysis
    know them)."""
    rounds, _by = decide_rounds(experiment)
    return [
        p.id
        for number in range(1, rounds + 1)
        for d in plan.deployments
        for p in round_deployment(experiment, d, number, lambda _p: True).load_points
    ]
