"""Which kind of specsweep file a YAML document is, from its top-level keys, and the command that takes it.

An experiment (``sweep``, ``plan``, ``doctor``, ...) has ``variants``, ``service``, ``server`` or ``load``; a
playbook (``specsweep playbook``) has ``steps``. A file given to the wrong command says which one it is and
which command takes it, instead of listing the keys the other kind lacks.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["EXPERIMENT_KEYS", "PLAYBOOK_KEYS", "file_kind", "wrong_kind_message"]

Kind = Literal["experiment", "playbook"]

#: Keys only an experiment has at its top level.
EXPERIMENT_KEYS = ("variants", "service", "server", "load", "baselines", "engine")
#: Keys only a playbook has at its top level.
PLAYBOOK_KEYS = ("steps",)


def file_kind(data: Any) -> Kind | None:
    """``experiment`` or ``playbook`` when the document's top-level keys say so unambiguously, else None."""
    if not isinstance(data, dict):
        return None
    experiment = any(key in data for key in EXPERIMENT_KEYS)
    playbook = any(key in data for key in PLAYBOOK_KEYS)
    if playbook and not experiment:
        return "playbook"
    if experiment and not playbook:
        return "experiment"
    return None


def wrong_kind_message(found: Kind, file: str) -> str:
    """What to say when a ``found`` file is given to a command that takes the other kind."""
    if found == "playbook":
        return (
            f"this is a playbook (it has steps:), not an experiment: run it with `specsweep playbook {file}`; "
            "`specsweep validate` checks either kind"
        )
    return (
        f"this is an experiment (it has variants, service, server, load), not a playbook: run it with "
        f"`specsweep sweep {file}`, or give it to a playbook with `specsweep playbook PLAYBOOK --experiment {file}`; "
        "`specsweep validate` checks either kind"
    )
