"""The points of the ``golden`` and ``spec_shape`` checks (orchestrator/analysis/checks.py).

``golden``: a self-drafted chain (SGLang STANDALONE with the target as its draft; orchestrator/sweep/golden.py
writes ``server.golden``) must take the verify steps, and accept the drafts per step, that the model itself
predicts for the same requests; a difference is an error that names the first request and step where they part
(an engine's tree building or verification, or the draft's attention, went wrong). A point the prediction could
not be made for says why (info).

``spec_shape``: the tree the server runs (its reported arguments, as resolved at start-up) must be the tree the
command asked for; an engine that changed it measured another configuration than the one the row names (error).
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

__all__ = ["golden_points", "other_drafter", "shape_points"]

_DRAFT_MODEL = re.compile(r"--speculative[-_]draft[-_]model[-_]path(?:=|\s+)(\S+)")


def other_drafter(linear: pd.DataFrame | None, row: dict[str, Any]) -> bool:
    """The row drafts with another draft model than ``linear`` (the linear baseline's rows on its host) does
    (SGLang's STANDALONE, EAGLE: ``--speculative-draft-model-path``): a chain or tree of another drafter is no shape
    of the baseline's chain, so ``topk1_vs_chain`` and ``tree_below_chain`` leave it alone."""
    if linear is None or linear.empty or "command" not in linear.columns:
        return False
    mine = _DRAFT_MODEL.search(str(row.get("command") or ""))
    theirs = _DRAFT_MODEL.search(str(linear["command"].iloc[0] or ""))
    return mine is not None and theirs is not None and mine.group(1) != theirs.group(1)


AGREE = "server_golden_agree"
SKIPPED = "server_golden_skipped"


def _n(value: Any) -> str:
    return f"{int(value)}" if isinstance(value, int | float) and value == value else "?"


def _f(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) and value == value else "n/a"


def golden_points(ok: pd.DataFrame) -> list[tuple[dict[str, Any], str, str, list[str]]]:
    """(row, severity, message, evidence) for each self-drafted point whose golden figures part from the engine's,
    or could not be computed."""
    out: list[tuple[dict[str, Any], str, str, list[str]]] = []
    if AGREE in ok.columns:
        rows: list[dict[str, Any]] = ok[ok[AGREE].eq(False)].to_dict("records")  # type: ignore[assignment]
        for row in rows:
            differing, total = _n(row.get("server_golden_requests_differing")), _n(row.get("server_golden_requests"))
            measured, predicted = row.get("server_golden_measured_accept_len"), row.get("server_golden_accept_len")
            message = (
                f"the self-drafted chain parts from the model's own prediction in {differing} of {total} requests: "
                f"accept length {_f(measured)} measured, {_f(predicted)} predicted; "
                f"first: {row.get('server_golden_first_difference')}"
            )
            evidence = [
                f"golden verify steps {_n(row.get('server_golden_verify_steps'))}, measured "
                f"{_n(row.get('server_golden_measured_verify_steps'))} over "
                f"{_n(row.get('server_golden_committed_tokens'))} "
                "committed tokens (selfdraft_probe.py, the engine's own transformers)"
            ]
            out.append((row, "error", message, evidence))
    if SKIPPED in ok.columns:
        rows = ok[ok[SKIPPED].notna()].to_dict("records")  # type: ignore[assignment]
        for row in rows:
            out.append((row, "info", f"no golden accept length for this self-drafted point: {row.get(SKIPPED)}", []))
    return out


def shape_points(ok: pd.DataFrame) -> list[tuple[dict[str, Any], str, list[str]]]:
    """(row, message, evidence) for each point whose server runs another tree than its command asked for."""
    column = "server_spec_shape_agree"
    if column not in ok.columns:
        return []
    rows: list[dict[str, Any]] = ok[ok[column].eq(False)].to_dict("records")  # type: ignore[assignment]
    return [
        (
            row,
            f"the server runs {row.get('server_spec_shape_served_label')}, not the "
            f"{row.get('server_spec_shape_configured_label')} its command asked for: the point measured another "
            "configuration than the one it names",
            ["read back from the server's reported arguments (/server_info)"],
        )
        for row in rows
    ]
