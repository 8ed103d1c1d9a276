"""The plan: what a sweep will do, as a pure function of a validated Experiment.

Each variant's matrix is expanded (``itertools.product`` in the order the file gives), include/exclude
filters applied, every template rendered, and the result grouped into Deployments: one per distinct rendered
server configuration, so one restart each. Identical configurations (a baseline that also appears in a
matrix, two variants that render the same command) deploy once; the deployment keeps every (variant, params)
it stands for in ``aliases``. Baselines come first, in the order ``baselines`` names them, then the other
variants in file order. Ids are short content hashes: reordering keys in the YAML file, or renaming nothing
that reaches the server, leaves them unchanged, which is what lets ``--resume`` match finished points.
Expanding a matrix and rendering a configuration live in :mod:`orchestrator.rendering` (the experiment's
validation renders every command too); this module adds the grouping, the ids and the load points.

No I/O, no SSH, no clock: tests drive this with tables of cases.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.rendering import expand_matrix, server_config

if TYPE_CHECKING:
    from orchestrator.experiment import Experiment

__all__ = [
    "PLAN_SCHEMA_VERSION",
    "Deployment",
    "LoadPoint",
    "Plan",
    "build_plan",
    "content_id",
    "expand_matrix",
    "make_deployment",
    "server_config",
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

    @property
    def label(self) -> str:
        return f"C={self.concurrency}" if self.mode == "concurrency" else f"rate={self.rate:g}/s"


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

    @property
    def label(self) -> str:
        if not self.params:
            return self.variant
        return self.variant + "(" + ", ".join(f"{k}={v}" for k, v in self.params.items()) + ")"

    def estimated_seconds(self) -> float:
        return self.expected_load_seconds + sum(p.estimated_seconds for p in self.load_points)


class Plan(BaseModel):
    """The ordered deployments of one experiment, with totals."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = PLAN_SCHEMA_VERSION
    experiment: str
    deployments: list[Deployment]

    @property
    def restarts(self) -> int:
        return len(self.deployments)

    @property
    def load_point_count(self) -> int:
        return sum(len(d.load_points) for d in self.deployments)

    @property
    def eta_seconds(self) -> float:
        return sum(d.estimated_seconds() for d in self.deployments)

    def totals(self) -> dict[str, Any]:
        return {
            "deployments": len(self.deployments),
            "load_points": self.load_point_count,
            "restarts": self.restarts,
            "eta_seconds": round(self.eta_seconds, 1),
        }

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON shape scripts rely on (``specsweep plan --json``)."""
        return {
            "schema_version": self.schema_version,
            "experiment": self.experiment,
            "deployments": [d.model_dump(mode="json") for d in self.deployments],
            "totals": self.totals(),
        }


def _load_points(experiment: Experiment, deployment_key: str) -> list[LoadPoint]:
    load = experiment.load
    per_user_tok_s = max(experiment.server.expected_tokens_per_second, 1e-6)
    request_seconds = load.max_tokens / per_user_tok_s
    points: list[LoadPoint] = []
    for c in load.concurrency:
        content = {
            "mode": "concurrency",
            "concurrency": c,
            "requests": load.requests,
            "duration": load.duration,
        }
        if load.duration is not None:
            est = load.duration
        else:
            n = load.requests if load.requests is not None else c
            est = math.ceil(n / c) * request_seconds
        est += math.ceil(load.warmup / max(c, 1)) * request_seconds
        points.append(
            LoadPoint(
                id=content_id("p", [deployment_key, content]),
                mode="concurrency",
                concurrency=c,
                requests=load.requests,
                duration_s=load.duration,
                estimated_seconds=round(est, 3),
            )
        )
    for r in load.rates:
        content = {
            "mode": "rate",
            "rate": r,
            "requests": load.requests,
            "duration": load.duration,
            "max_in_flight": load.max_in_flight,
        }
        if load.duration is not None:
            est = load.duration
        else:
            n = load.requests if load.requests is not None else 1
            est = n / r + request_seconds
        points.append(
            LoadPoint(
                id=content_id("p", [deployment_key, content]),
                mode="rate",
                rate=r,
                max_in_flight=load.max_in_flight,
                requests=load.requests,
                duration_s=load.duration,
                estimated_seconds=round(est, 3),
            )
        )
    return points


def make_deployment(
    experiment: Experiment,
    variant: str,
    params: dict[str, Scalar],
    *,
    aliases: list[Alias] | None = None,
    baseline: bool = False,
) -> Deployment:
    """One deployment of ``variant`` with ``params``, with the experiment's load points (playbooks use this)."""
    config = server_config(experiment, variant, params)
    key = content_id("c", config)
    return Deployment(
        id=content_id("d", config),
        variant=variant,
        params=params,
        aliases=aliases or [],
        baseline=baseline,
        command=config["command"],
        environment=config["environment"],
        config_hash=key,
        load_points=_load_points(experiment, key),
        expected_load_seconds=experiment.server.expected_load_time,
    )


def build_plan(experiment: Experiment) -> Plan:
    """Expand, render, deduplicate and order: the Plan of one Experiment."""
    order = list(experiment.baselines) + [v for v in experiment.variants if v not in experiment.baselines]
    by_hash: dict[str, dict[str, Any]] = {}
    for name in order:
        variant = experiment.variants[name]
        for params in expand_matrix(variant):
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
            experiment, entry["variant"], entry["params"], aliases=entry["aliases"], baseline=entry["baseline"]
        )
        for entry in by_hash.values()
    ]
    return Plan(experiment=experiment.name, deployments=deployments)
