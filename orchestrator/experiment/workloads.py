"""The experiment's workloads (``load.workloads``) as load-generator sources, and their checks.

``workload_sources(experiment)`` maps each workload name to the
:class:`~orchestrator.load.datasets.WorkloadSource` its points send (a relative file path resolved against the
experiment file, the output-length cap defaulting to ``load.max_tokens``). ``check_workloads`` reads each
source once while the experiment is validated, so a missing file, an unknown builtin set, a format the file
does not have or a category with no rows is a ``ConfigError`` naming the file, line and key before anything
is deployed; the load generator reads the file again at each point (it may run on another process).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import LoadError
from orchestrator.load.datasets import CategoryError, WorkloadSource

# The experiment calls check_workloads while it validates itself, so this module names its types without
# importing them (orchestrator.experiment.schema.Experiment, orchestrator.experiment.load.WorkloadSpec).
Experiment = Any
WorkloadSpec = Any

__all__ = ["check_workloads", "resolve_source", "workload_cap", "workload_sources"]


def resolve_source(spec: str, base: Path | None) -> str:
    """``spec`` with a relative file path made absolute against ``base`` (the experiment file's folder)."""
    if spec.startswith(("builtin:", "synthetic:")):
        return spec
    path = Path(spec).expanduser()
    if not path.is_absolute() and base is not None:
        return str((base / path).resolve())
    return str(path)


def workload_cap(experiment: Experiment, name: str) -> int:
    """The output-length cap of workload ``name``: its own ``max_tokens``, else ``load.max_tokens``."""
    spec = (experiment.load.workloads or {})[name]
    return spec.max_tokens or experiment.load.max_tokens


def _source(experiment: Experiment, name: str, spec: WorkloadSpec, base: Path | None) -> WorkloadSource:
    return WorkloadSource(
        spec=resolve_source(spec.source, base),
        format=spec.format,
        category=spec.category,
        max_tokens=spec.max_tokens or experiment.load.max_tokens,
        name=name,
    )


def workload_sources(experiment: Experiment, base: Path | None = None) -> dict[str, WorkloadSource]:
    """name -> source, in file order (empty without ``load.workloads``)."""
    if base is None and experiment.source is not None:
        base = experiment.source.parent
    return {name: _source(experiment, name, spec, base) for name, spec in (experiment.load.workloads or {}).items()}


def check_workloads(experiment: Experiment, base: Path) -> list[tuple[tuple[Any, ...], str]]:
    """(key path, message) for every workload (or the plain ``load.prompts``) whose prompts cannot be read."""
    from orchestrator.load.workloads import load_workload

    problems: list[tuple[tuple[Any, ...], str]] = []
    prompts = experiment.load.prompts
    if not experiment.load.workloads and prompts:
        # the one prompt set of a load without workloads: read now, not at the first point after a restart
        try:
            load_workload(resolve_source(prompts, base), experiment.load.seed)
        except LoadError as exc:
            message = _plain(exc).replace(resolve_source(prompts, base), prompts)
            if "does not exist" in message:
                message = (
                    f"the prompts file {prompts!r} does not exist (relative paths start at the experiment file's "
                    "folder; or use builtin:chat, builtin:code, synthetic:in=N,out=M, ...)"
                )
            problems.append((("load", "prompts"), message))
    for name, spec in (experiment.load.workloads or {}).items():
        where: tuple[Any, ...] = ("load", "workloads", name)
        source = _source(experiment, name, spec, base)
        try:
            load_workload(source)
        except CategoryError as exc:
            problems.append(((*where, "category"), _plain(exc).replace(source.spec, spec.source)))
        except LoadError as exc:
            message = _plain(exc).replace(source.spec, spec.source)  # the path as the file writes it
            if "does not exist" in message:
                message = (
                    f"workload {name!r}: file {spec.source!r} does not exist (relative paths start at the "
                    "experiment file's folder; or use builtin:code, builtin:math, builtin:chat, ...)"
                )
            problems.append((where, message))
    return problems


def _plain(exc: LoadError) -> str:
    text = str(exc)
    return text[len("load: ") :] if text.startswith("load: ") else text
