"""Secrets written inline in an experiment file, named with their file:line for a warning.

The run's files hold them redacted (orchestrator/redaction.py), but the experiment file itself holds them in
clear, and so does any copy of it: ``specsweep validate`` and ``specsweep sweep`` say where each one is and how
to give it by reference instead (``{secret_env: NAME}`` or ``{secret_file: PATH}``,
orchestrator/experiment/service.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.experiment.yamlsource import Positions, locate
from orchestrator.redaction import inline_secrets

__all__ = ["inline_secret_warnings"]


def inline_secret_warnings(data: Any, positions: Positions, file: str | Path) -> list[str]:
    """One line per secret written inline in the document ``data`` read from ``file`` (never the value)."""
    out = []
    for path, what in inline_secrets(data):
        line, column = locate(positions, path)
        where = f"{file}:{line}:{column}" if line is not None else str(file)
        key = ".".join(str(part) for part in path)
        out.append(
            f"{where}: {key}: {what} written inline; specsweep writes it redacted into the run's files, but this "
            "file holds it in clear: give it as {secret_env: NAME} or {secret_file: PATH}"
        )
    return out
