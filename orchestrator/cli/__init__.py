"""The console: the ``specsweep`` command line, one module per command (``commands/``), and what it draws.

``app`` (the Typer application and :func:`main`, which turns every ``SpecsweepError`` into one line and
its exit code), ``console`` (the rich consoles), ``progress`` (a sweep's events as bars or lines),
``summary`` (the ending: every point beside its baselines, the best configuration at each load),
``textfit`` (tables that read at any width).

May use: every stage below it. Nothing imports the console (the top layer, kept by import-linter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face

if TYPE_CHECKING:
    from orchestrator.cli.app import app, main

# The face loads on first use (PEP 562): importing one module of the package never imports the others.
_LAZY = {
    "app": "orchestrator.cli.app",
    "main": "orchestrator.cli.app",
}


__getattr__ = lazy_face(__name__, _LAZY)


__all__ = [
    "app",
    "main",
]
