"""The experiment file: a YAML document validated, with file:line:column, before anything touches a host.

``schema`` (the top :class:`Experiment` model, :func:`load_experiment`), its sections' pydantic models in ``hosts``
(``host:``, ``hosts:``), ``launcherspecs`` (``launcher:``, one spec per kind), ``service`` (``service:``,
``server:``, ``parsers:``, secrets), ``variants``, ``load`` (``load:``, ``lossless:``, ``telemetry:``) and
``search`` (the ``objective:`` and ``search:`` sections), built of ``common`` (the strict base model, durations,
patterns); ``checks`` (what a schema cannot see, across sections), ``validation`` (pydantic errors as
file:line:column, the nearest valid key), ``yamlsource`` (positions of every key), ``rendering`` (what each variant
renders, with the ground's ``templates`` for ``{budget}`` fields), ``durations``, ``workloads`` (``load.workloads``
as load-generator sources), ``starter`` (``specsweep init``).

May use: the engines' registry (the ``engine:`` choices), the load generator's settings and workloads,
and the ground (``errors``, ``quoting``, ``templates``). Knows no host, service, launcher or run directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment, load_experiment

# The face loads on first use (PEP 562): importing one module of the package never imports the others.
_LAZY = {
    "Experiment": "orchestrator.experiment.schema",
    "load_experiment": "orchestrator.experiment.schema",
}


__getattr__ = lazy_face(__name__, _LAZY)


__all__ = [
    "Experiment",
    "load_experiment",
]
