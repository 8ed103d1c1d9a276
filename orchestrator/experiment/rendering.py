"""Rendering server configurations: a variant's matrix expanded, and what each (variant, params) renders.

Both the experiment's validation (every rendered command must be usable when the file is loaded) and the plan
(one deployment per distinct rendered configuration) need these, so they live below both: this module imports
neither. It reads the model through the small protocols below, which the experiment's classes satisfy.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from orchestrator.templates import render

__all__ = ["expand_matrix", "server_config"]

Scalar = str | int | float | bool


class VariantLike(Protocol):
    """What matrix expansion reads of a variant (``orchestrator.experiment.variants.Variant``)."""

    @property
    def matrix(self) -> Mapping[str, Sequence[Scalar]]: ...

    @property
    def include(self) -> Sequence[Mapping[str, Scalar]]: ...

    @property
    def exclude(self) -> Sequence[Mapping[str, Scalar]]: ...


class ServiceLike(Protocol):
    """What rendering reads of a service spec (``orchestrator.experiment.service`` service specs)."""

    @property
    def kind(self) -> str: ...

    @property
    def environment(self) -> Mapping[str, str]: ...

    def render_command(self, values: dict[str, Scalar]) -> str | None: ...

    def identity(self) -> dict[str, Any]: ...


class ExperimentLike(Protocol):
    """What rendering reads of an experiment (``orchestrator.experiment.schema.Experiment``)."""

    @property
    def service(self) -> ServiceLike: ...

    def template_values(self, variant_name: str, params: dict[str, Scalar]) -> dict[str, Scalar]: ...


def expand_matrix(variant: VariantLike) -> list[dict[str, Scalar]]:
    """All parameter combinations of one variant, in file order, after include/exclude.

    ``exclude`` entries drop every combination that matches all their keys; ``include`` entries add a
    combination (or, when an entry matches existing keys partially, it is appended as its own point).
    """
    keys = list(variant.matrix)
    combos: list[dict[str, Scalar]] = [
        dict(zip(keys, values, strict=True)) for values in itertools.product(*(variant.matrix[k] for k in keys))
    ]
    if not keys:
        combos = [{}]

    def matches(combo: dict[str, Scalar], rule: Mapping[str, Scalar]) -> bool:
        return all(k in combo and combo[k] == v for k, v in rule.items())

    combos = [c for c in combos if not any(matches(c, rule) for rule in variant.exclude)]
    for extra in variant.include:
        if extra not in combos:
            combos.append(dict(extra))
    return combos


def server_config(experiment: ExperimentLike, variant_name: str, params: dict[str, Scalar]) -> dict[str, Any]:
    """The rendered server-side configuration of one (variant, params): what decides a restart."""
    values = experiment.template_values(variant_name, params)
    service = experiment.service
    rendered: dict[str, Any] = {"kind": service.kind}
    rendered["command"] = service.render_command(values)  # a unit file's values escaped per setting
    rendered["environment"] = {k: render(v, values) for k, v in service.environment.items()}
    rendered.update(service.identity())
    return rendered
