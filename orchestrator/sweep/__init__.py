"""The sweep loop: open or resume a run, launch each deployment, measure each load point in its exact window,
store it, restore on the way out.

``runner`` (:func:`run_sweep`, the loop), ``measure`` (one point: window, load, scrape, parse, record),
``schedule`` (which deployment a slot runs next), ``opening``/``resume``/``baselines`` (a new run, a
resumed one, baselines reused from an earlier run), ``policy`` (when going on would only waste hosts),
``lossless`` (the probe that collects each configuration's temperature-0 answers), ``frame`` (the
skeleton every run shares), ``events`` (what a sweep reports, to one observer), ``dryrun``.

May use: launchers, hosts and services (through launchers), load, metrics, engines, analysis, search
(which decides what to deploy next), plan, runs, experiment and the ground. The console sits above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face

if TYPE_CHECKING:
    from orchestrator.sweep.runner import run_sweep

# The face loads on first use (PEP 562): importing one module of the package never imports the others.
_LAZY = {
    "run_sweep": "orchestrator.sweep.runner",
}


__getattr__ = lazy_face(__name__, _LAZY)


__all__ = [
    "run_sweep",
]
