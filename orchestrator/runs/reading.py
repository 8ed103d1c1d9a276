"""Reading what a run directory holds, which anyone may have written: paths confined to the run, JSON that
cannot exhaust the parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError

__all__ = ["confined", "parse_json"]


def confined(run_dir: str | Path, relative: str) -> Path:
    """``run_dir / relative`` when it names a file inside the run directory (after every ``..`` and symbolic
    link is resolved), else a StoreError: a record's ``window_file`` or ``requests_file`` is text anyone can
    write, and a forged ``../../etc/shadow`` must never be read, nor copied into a new run."""
    base = Path(run_dir).resolve()
    target = (base / relative).resolve()
    if Path(relative).is_absolute() or not target.is_relative_to(base) or target == base:
        raise StoreError(f"{run_dir}: {relative!r} is not a file of this run directory")
    return target


def parse_json(text: str) -> Any:
    """``json.loads`` of text a run directory holds, which anyone may have written: a document nested deeper
    than the parser's recursion (``[[[[...`` a million deep) is a ``json.JSONDecodeError`` like any other bad
    line, never a ``RecursionError`` that ends a command with an internal error."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text[:80], 0) from None
