"""The plan: what a sweep will do, as a pure function of a validated experiment, and how long it will take.

``deployments`` (variants x matrix -> deployments x load points; restarts counted), ``pace`` (the first guess
at a start and a request: the simulator's own figures where the command runs it, else the file's), ``eta`` (the
remaining time, learned from the run itself and from earlier runs of the experiment).

May use: the experiment and the run directory (``eta`` reads earlier runs). Knows no SSH, service or load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face

if TYPE_CHECKING:
    from orchestrator.plan.deployments import Deployment, LoadPoint, Plan, build_plan

# The face loads on first use (PEP 562): importing one module of the package never imports the others.
_LAZY = {
    "Deployment": "orchestrator.plan.deployments",
    "LoadPoint": "orchestrator.plan.deployments",
    "Plan": "orchestrator.plan.deployments",
    "build_plan": "orchestrator.plan.deployments",
}


__getattr__ = lazy_face(__name__, _LAZY)


__all__ = [
    "Deployment",
    "LoadPoint",
    "Plan",
    "build_plan",
]
