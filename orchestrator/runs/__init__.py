"""The run directory: where a sweep writes everything it learns, and where analysis reads it back.

``store`` (records.jsonl, windows/, requests/, run.json, events; appended and fsynced), ``runref``
(where runs land, and which run ``latest``/``latest~N``/a path means), ``identity`` (what a run is made
of), ``provenance`` (how a run was made).

May use: the experiment file's reader (positions) and the ground. Knows no host, launcher or engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face

if TYPE_CHECKING:
    from orchestrator.runs.store import Record, RunStore

# The face loads on first use (PEP 562): importing one module of the package never imports the others.
_LAZY = {
    "Record": "orchestrator.runs.store",
    "RunStore": "orchestrator.runs.store",
}


__getattr__ = lazy_face(__name__, _LAZY)


__all__ = [
    "Record",
    "RunStore",
]
