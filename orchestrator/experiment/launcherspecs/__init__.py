"""The ``launcher:`` section: one spec model per launcher kind, found in this package, none named here.

Each module of this package declares its launcher's spec, a subclass of :class:`LauncherSpecBase` with a
``kind: Literal[...]`` of its own (``slurm.py``, ``kubernetes.py``); :data:`LauncherSpec`, the pydantic
discriminated union the :class:`~orchestrator.experiment.schema.Experiment` model validates ``launcher:``
with, is built from every one of them. A new launcher is its spec module here and its launcher in
``orchestrator/launchers/``: the schema, the checks and the errors (``unknown kind 'x' (expected one of:
...)``, with the nearest kind) need no new branch.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from orchestrator.experiment.launcherspecs.base import LauncherSpecBase, spec_classes

__all__ = ["LauncherSpec", "LauncherSpecBase", "launcher_kinds"]


def _load_specs() -> tuple[type[LauncherSpecBase], ...]:
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module != "base":
            importlib.import_module(f"{__name__}.{module}")
    return spec_classes()


_SPECS = _load_specs()


def launcher_kinds() -> list[str]:
    """The ``kind``s ``launcher:`` accepts, in the order of the modules that declare them."""
    return [cls.spec_kind() for cls in _SPECS]


if TYPE_CHECKING:
    LauncherSpec = LauncherSpecBase
else:
    _UNION: Any = _SPECS[0] if len(_SPECS) == 1 else Union[_SPECS]  # noqa: UP007 - built at run time
    LauncherSpec = Annotated[_UNION, Field(discriminator="kind")]
