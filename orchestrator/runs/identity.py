"""What a run is made of, as a run directory keeps it: the resolved experiment, its file, and its hosts.

Resuming (``orchestrator.sweep.resume``), reusing baselines (``orchestrator.sweep.baselines``) and opening a run
(``orchestrator.sweep.opening``) all compare a stored run with the current experiment in these terms, so they live
here, below all three: this module imports none of them (and the experiment model only for its types).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment

__all__ = ["experiment_file", "host_identities", "host_table", "resolved_experiment"]


def resolved_experiment(experiment: Experiment) -> dict[str, Any]:
    """The experiment as it will run, with defaults filled in and secrets redacted."""
    return experiment.model_dump(mode="json", exclude_none=True)


def experiment_file(experiment: Experiment) -> str | None:
    """The experiment file's absolute path, as runs record it."""
    return str(experiment.source.resolve()) if experiment.source is not None else None


def host_table(resolved: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """display name -> (kind, how it is reached), from a resolved experiment (stored or current)."""
    specs = resolved.get("hosts") or ([resolved["host"]] if resolved.get("host") else [{"kind": "local"}])
    out: dict[str, tuple[str, str]] = {}
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        kind = str(spec.get("kind", "local"))
        reach = str(spec.get("ssh", "this machine")) if kind == "ssh" else "this machine"
        name = spec.get("name") or (spec.get("ssh") if kind == "ssh" else "local")
        out[str(name)] = (kind, reach)
    return out


def host_identities(resolved: dict[str, Any]) -> list[str]:
    """``name (how it is reached)`` for every host of a resolved experiment (stored or current), in order."""
    return [
        f"{name} ({reach if kind == 'ssh' else 'this machine'})" for name, (kind, reach) in host_table(resolved).items()
    ]
