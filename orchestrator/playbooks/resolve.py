"""A playbook against its experiment: the exact deployments and load points each step will run.

``resolve(playbook, experiment)`` checks what needs the experiment (variants exist, parameters are the
variant's matrix keys, a measured load is one point), renders every configuration with the same functions a
sweep uses (``make_deployment``), and returns a ``Program``: the steps with their deployments and points, and
the ``Plan`` stored in the run directory. Point ids are the ids a sweep of the same experiment gives the same
(configuration, load), so a later sweep can reuse what a playbook measured (``baselines_from``).

Pure: no I/O, no host. ``apply_vars`` and ``select_host`` prepare the experiment first (``--var``, ``--host``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from orchestrator.errors import ConfigError
from orchestrator.experiment.hosts import LocalHostSpec, SSHHostSpec
from orchestrator.experiment.schema import Experiment
from orchestrator.experiment.validation import suggest
from orchestrator.plan.deployments import Deployment, LoadPoint, Plan, content_id, make_deployment
from orchestrator.playbooks.schema import (
    BaselinesStep,
    DeployStep,
    DoctorStep,
    ExpectStep,
    LoadSpec,
    LoadStep,
    MeasureStep,
    MetricRef,
    Playbook,
    RestoreStep,
    ShellStep,
    SmokeStep,
    step_kind,
)

__all__ = ["Program", "ResolvedStep", "apply_vars", "resolve", "select_host"]

Scalar = str | int | float | bool


@dataclass(frozen=True)
class ResolvedStep:
    """One step, ready to run: ``text`` says what it does in one line."""

    index: int
    kind: str
    text: str
    step: BaseModel
    deployment: Deployment | None = None  # deploy
    points: tuple[LoadPoint, ...] = ()  # load
    groups: tuple[tuple[Deployment, tuple[LoadPoint, ...]], ...] = ()  # baselines: each baseline and its points


@dataclass(frozen=True)
class Program:
    playbook: Playbook
    experiment: Experiment
    steps: list[ResolvedStep]
    plan: Plan
    measured: dict[str, int] = field(default_factory=dict)  # measurement name -> index of its load step

    def deployment(self, deployment_id: str) -> Deployment:
        return next(d for d in self.plan.deployments if d.id == deployment_id)


def apply_vars(
    experiment: Experiment, overrides: dict[str, Scalar], *, playbook: Playbook | None = None, origin: str = "--var"
) -> Experiment:
    """The experiment with some of its ``vars`` replaced. Only existing vars may be set: a typo would
    otherwise change nothing silently. With ``playbook``, errors point at its ``vars`` key."""
    if not overrides:
        return experiment
    for name in overrides:
        if name not in experiment.vars:
            known = sorted(experiment.vars)
            message = f"{name!r} is not a var of experiment {experiment.name!r}" + (
                suggest(name, known).replace("valid keys", "its vars") if known else " (it has no vars)"
            )
            if playbook is not None:
                raise playbook.error(("vars", name), message)
            raise ConfigError(message, key=f"{origin} {name}")
    return experiment.model_copy(update={"vars": {**experiment.vars, **overrides}})


def select_host(experiment: Experiment, name: str | None) -> Experiment:
    """The experiment reduced to one host: ``name`` (a host's display name), or the first one."""
    specs: list[SSHHostSpec | LocalHostSpec] = experiment.host_specs()
    if name is None:
        chosen = specs[0]
    else:
        names = [s.display_name for s in specs]
        if name not in names:
            raise ConfigError(f"no host named {name!r} in experiment {experiment.name!r}" + suggest(name, names))
        chosen = specs[names.index(name)]
    if experiment.hosts is None and experiment.host is chosen:
        return experiment
    return experiment.model_copy(update={"host": chosen, "hosts": None})


# ---------------------------------------------------------------------------------------------- resolving


class _Collector:
    """Deployments by configuration hash, with the points every step asks of them, in first-use order."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self.base: dict[str, Deployment] = {}
        self.points: dict[str, list[LoadPoint]] = {}

    def deployment(self, variant: str, params: dict[str, Scalar]) -> Deployment:
        dep = make_deployment(self.experiment, variant, params, baseline=variant in self.experiment.baselines)
        known = self.base.setdefault(dep.config_hash, dep)
        self.points.setdefault(dep.config_hash, [])
        return known

    def add(self, dep: Deployment, point: LoadPoint, index: int) -> LoadPoint:
        taken = {p.id for p in self.points[dep.config_hash]}
        if point.id in taken:  # the same load of the same configuration again: keep both records apart
            point = point.model_copy(update={"id": f"{point.id}-s{index}"})
        self.points[dep.config_hash].append(point)
        return point

    def final(self, dep: Deployment) -> Deployment:
        return dep.model_copy(update={"load_points": list(self.points[dep.config_hash])})


def _one_point(experiment: Experiment, dep: Deployment, spec: LoadSpec) -> LoadPoint:
    """The LoadPoint of an explicit load step, with the id a sweep would give the same point."""
    load = experiment.load
    requests = spec.requests
    duration = spec.duration
    if requests is None and duration is None:
        requests, duration = load.requests, load.duration
    if spec.concurrency is not None:
        content: dict[str, Any] = {
            "mode": "concurrency",
            "concurrency": spec.concurrency,
            "requests": requests,
            "duration": duration,
        }
    else:
        content = {
            "mode": "rate",
            "rate": spec.rate,
            "requests": requests,
            "duration": duration,
            "max_in_flight": load.max_in_flight,
        }
    point_id = content_id("p", [dep.config_hash, content])
    for known in dep.load_points:  # the experiment's own point: same id, keep its estimate
        if known.id == point_id:
            return known
    per_request = load.max_tokens / max(experiment.server.expected_tokens_per_second, 1e-6)
    if duration is not None:
        estimate = duration
    elif spec.concurrency is not None:
        estimate = math.ceil((requests or spec.concurrency) / spec.concurrency) * per_request
    else:
        estimate = (requests or 1) / float(spec.rate or 1.0) + per_request
    return LoadPoint(
        id=point_id,
        mode=content["mode"],
        concurrency=spec.concurrency,
        rate=spec.rate,
        max_in_flight=load.max_in_flight if spec.rate is not None else None,
        requests=requests,
        duration_s=duration,
        estimated_seconds=round(estimate, 3),
    )


def _check_params(playbook: Playbook, experiment: Experiment, index: int, variant: str, params: dict[str, Any]) -> None:
    path: tuple[Any, ...] = ("steps", index, "deploy")
    if variant not in experiment.variants:
        raise playbook.error(
            (*path, "variant"),
            f"experiment {experiment.name!r} has no variant {variant!r}" + suggest(variant, list(experiment.variants)),
        )
    keys = list(experiment.variants[variant].matrix)
    for key in params:
        if key not in keys:
            hint = suggest(key, keys) if keys else f": variant {variant!r} has no matrix, so it takes no params"
            raise playbook.error((*path, "params", key), f"{key!r} is not a matrix key of variant {variant!r}" + hint)
    missing = [k for k in keys if k not in params]
    if missing:
        raise playbook.error(
            (*path, "params") if params else (*path, "variant"),
            f"variant {variant!r} needs params for its matrix keys: missing {', '.join(missing)}",
        )


def _labels(points: tuple[LoadPoint, ...] | list[LoadPoint]) -> str:
    return ", ".join(p.label for p in points)


def resolve(playbook: Playbook, experiment: Experiment) -> Program:
    """Render every step against ``experiment``; ``ConfigError`` (located in the playbook) for a step the
    experiment cannot satisfy."""
    collector = _Collector(experiment)
    # First pass: deployments and their points (a deployment's final point list spans all its steps).
    current: Deployment | None = None
    step_deps: dict[int, Deployment] = {}
    step_points: dict[int, list[LoadPoint]] = {}
    step_groups: dict[int, list[tuple[Deployment, list[LoadPoint]]]] = {}
    last_load: int | None = None
    measured: dict[str, int] = {}
    for index, step in enumerate(playbook.steps):
        if isinstance(step, DeployStep):
            spec = step.deploy
            _check_params(playbook, experiment, index, spec.variant, spec.params)
            current = collector.deployment(spec.variant, dict(spec.params))
            step_deps[index] = current
        elif isinstance(step, LoadStep):
            assert current is not None  # the schema checked a deploy comes first
            wanted = (
                list(current.load_points)
                if step.load.experiment_points
                else [_one_point(experiment, current, step.load)]
            )
            step_points[index] = [collector.add(current, p, index) for p in wanted]
            last_load = index
        elif isinstance(step, MeasureStep):
            assert last_load is not None
            if len(step_points[last_load]) != 1:
                raise playbook.error(
                    ("steps", index, "measure"),
                    f"the load before this step runs the experiment's {len(step_points[last_load])} load points "
                    f"({_labels(step_points[last_load])}); a measurement is one point: give that load a concurrency",
                )
            measured[step.measure] = last_load
        elif isinstance(step, BaselinesStep):
            if not experiment.baselines:
                raise playbook.error(("steps", index), f"experiment {experiment.name!r} names no baselines")
            found: list[tuple[Deployment, list[LoadPoint]]] = []
            for name in experiment.baselines:
                base = collector.deployment(name, {})
                found.append((base, [collector.add(base, p, index) for p in base.load_points]))
            step_groups[index] = found
            current = found[-1][0]
            last_load = None
        elif isinstance(step, RestoreStep):
            current, last_load = None, None
    finals = {h: collector.final(d) for h, d in collector.base.items()}
    steps: list[ResolvedStep] = []
    for index, step in enumerate(playbook.steps):
        kind = step_kind(step)
        dep = finals[step_deps[index].config_hash] if index in step_deps else None
        text = kind
        points: tuple[LoadPoint, ...] = ()
        groups: tuple[tuple[Deployment, tuple[LoadPoint, ...]], ...] = ()
        if isinstance(step, DeployStep) and dep is not None:
            text = f"deploy {dep.label}"
        elif isinstance(step, LoadStep):
            points = tuple(step_points[index])
            text = f"load {_labels(points)}" + (
                f" ({points[0].requests} requests)" if len(points) == 1 and points[0].requests else ""
            )
        elif isinstance(step, MeasureStep):
            text = f"measure {step.measure}"
        elif isinstance(step, BaselinesStep):
            groups = tuple((finals[d.config_hash], tuple(p)) for d, p in step_groups[index])
            text = "baselines " + ", ".join(d.label for d, _ in groups) + f" at {_labels(groups[0][1])}"
        elif isinstance(step, ExpectStep):
            text = "expect " + describe_expectation(step.expect)
        elif isinstance(step, RestoreStep):
            text = "restore the host"
        elif isinstance(step, SmokeStep):
            n = step.smoke.requests
            text = f"smoke: {n} request{'s' if n > 1 else ''} to the server as it runs now"
        elif isinstance(step, DoctorStep):
            text = "doctor: the host's checks"
        elif isinstance(step, ShellStep):
            text = f"shell: {step.shell.command}"
        steps.append(
            ResolvedStep(index=index, kind=kind, text=text, step=step, deployment=dep, points=points, groups=groups)
        )
    plan = Plan(experiment=experiment.name, deployments=list(finals.values()))
    return Program(playbook=playbook, experiment=experiment, steps=steps, plan=plan, measured=measured)


def describe_expectation(spec: Any) -> str:
    """``tree.accept_len equal linear.accept_len (±10%)``, or ``depth_vs_commit on tree``."""
    if spec.check is not None:
        names = spec.of_names
        return f"{spec.check} on " + (", ".join(names) if names else "every point so far")
    target = f"{spec.to.of}.{spec.to.metric or spec.metric}" if isinstance(spec.to, MetricRef) else f"{spec.to:g}"
    sign = {"equal": "±", "at_most": "+", "at_least": "-"}[spec.compare]
    tol = f" ({sign}{spec.tolerance * 100:g}%)" if spec.tolerance else ""
    return f"{spec.of}.{spec.metric} {spec.compare} {target}{tol}"
