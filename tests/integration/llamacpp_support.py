"""Shared by the llama.cpp sweep tests (local process service and systemd over SSH): where the engine is, and
the figures its three reporting channels share, like with like.

llama.cpp reports acceptance through the journal (one ``draft acceptance`` line per request), ``/metrics``
counters and each response's ``timings``. They share:

- ``accept_len``, llama.cpp's mean length, 1 + accepted / steps that verified a draft: journal (steps
  recovered from each line's ``mean len``) and counters (``spec_decode_num_drafts_total``). The timings
  have no step count, so they cannot give it; the journal cannot either when a request accepted nothing.
- ``acceptance_rate``, accepted / drafted tokens: all three.
- ``tokens_per_pass``, tokens / (tokens - accepted), tokens per target forward pass including the prompt's
  pass and steps without a draft: all three (journal: ``eval time`` tokens; counters:
  ``tokens_predicted_total``; timings: completion tokens).

The first two come from the runner's own comparison (``server.sources``), the third is computed here.
"""

from __future__ import annotations

import functools
import shlex
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.runs.store import Record
from tests.engine_setup import wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "get-llama-server.sh"


@functools.cache
def built_paths() -> tuple[str, str] | str:
    """(llama-server, model) from ``get-llama-server.sh --print``, or why they are not available. Where
    scripts/test.sh builds llama.cpp beside the suite, this waits for that build first (tests/engine_setup.py)."""
    stage = wait_for("llama")
    if stage is not None and not stage.ok:
        return stage.reason
    proc = subprocess.run(["bash", str(SCRIPT), "--print"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return "llama-server or its model is not built: run scripts/get-llama-server.sh"
    values = {k: shlex.split(v)[0] for k, _, v in (line.partition("=") for line in proc.stdout.splitlines())}
    return values["LLAMA_SERVER"], values["LLAMA_MODEL"]


def paths() -> tuple[str, str]:
    """(llama-server, model) for a test that runs (tests/conftest.py skipped it otherwise)."""
    found = built_paths()
    assert not isinstance(found, str), found
    return found


def _per_pass(tokens: Any, accepted: Any) -> float | None:
    if not isinstance(tokens, int | float) or not isinstance(accepted, int | float) or tokens <= accepted:
        return None
    return float(tokens) / float(tokens - accepted)


def shared_figures(record: Record) -> dict[str, dict[str, float]]:
    """Figure -> {source: value} for every figure at least two of the sources have (see the docstring)."""
    server = record.server or {}
    spec = (record.client or {}).get("spec") or {}
    out: dict[str, dict[str, float]] = {}
    compared = (server.get("sources") or {}).get("figures") or {}
    for figure in ("accept_len", "acceptance_rate"):
        values = dict((compared.get(figure) or {}).get("values") or {})
        if len(values) >= 2:
            out[figure] = values
    details = server.get("details") or {}
    counters = (server.get("prometheus") or {}).get("counters") or {}
    per_pass = {
        "journal": _per_pass(details.get("eval_tokens"), details.get("accepted")),
        "prometheus": _per_pass(
            counters.get("llamacpp:tokens_predicted_total"),
            counters.get("llamacpp:spec_decode_num_accepted_tokens_total"),
        ),
        "responses": spec.get("tokens_per_pass"),
    }
    known = {source: float(v) for source, v in per_pass.items() if v is not None}
    if len(known) >= 2:
        out["tokens_per_pass"] = known
    return out


def disagreements(record: Record, tolerance: float) -> list[str]:
    """Every shared figure whose sources are more than ``tolerance`` apart (relative to the largest)."""
    problems = []
    for figure, values in shared_figures(record).items():
        top = max(values.values())
        if any(abs(v - top) > tolerance * top for v in values.values()):
            problems.append(f"{record.variant}{record.params} C={record.concurrency} {figure}: {values}")
    return problems
