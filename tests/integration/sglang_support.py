"""Shared by the real-SGLang tests: where the engine is (``scripts/get-sglang-cpu.sh`` prints ``SGLANG_PYTHON`` and
``SGLANG_MODEL``; scripts/test.sh sets it up beside the suite), and SGLang's own counters over a point's window as
the oracle.

SGLang reports its speculative figures through three channels: the scheduler's ``Decode batch`` lines (ratios with
two decimals, over decode-log intervals; they count drafts accepted past a request's end:
orchestrator/engines/sglang/overshoot.py), the tokenizer's counters on ``/metrics``
(``sglang:generation_tokens_total``, ``sglang:num_requests_total``, ``sglang:spec_verify_calls_total``, all
incremented when a request finishes) and each response's ``meta_info`` / ``sglext.spec_tokens_details`` (integer
counts). Over a window the counters and the responses count the same requests, so accept length and the committed
acceptance rate agree exactly; the log's figures agree within their stated bounds, after the drafts past the ends
(known exactly from the responses) are taken out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.runs.store import Record
from tests.engine_setup import engine_paths as setup_engine_paths

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "get-sglang-cpu.sh"
#: At most one SGLang server at a time in the whole suite (3-4.6 GiB each on two cores): every real-SGLang test
#: module runs in this one pytest-xdist group.
GROUP = "sglang"


def engine_paths() -> tuple[str, str] | str:
    """(SGLANG_PYTHON, SGLANG_MODEL) from the environment, or why the real-SGLang tests skip (tests/engine_setup.py)."""
    return setup_engine_paths("sglang", ("SGLANG_PYTHON", "SGLANG_MODEL"), "scripts/get-sglang-cpu.sh", "config.json")


def paths() -> tuple[str, str]:
    """(SGLANG_PYTHON, SGLANG_MODEL) for a test that runs (tests/conftest.py skipped it otherwise)."""
    found = engine_paths()
    assert not isinstance(found, str), found
    return found


def counter_oracle(record: Record) -> dict[str, Any]:
    """SGLang's counters over the record's window (the deltas of the two scrapes specsweep took around it):
    verify steps, committed tokens (completion tokens less each request's prefill token), committed drafts, and
    the accept length and committed acceptance rate they give."""
    prom = (record.server or {}).get("prometheus") or {}
    details = prom.get("details") or {}
    verifies, generated = details.get("verify_calls"), details.get("generated")
    finished = details.get("finished_requests")
    draft_tokens = details.get("speculative_num_draft_tokens")
    assert verifies and generated and finished and draft_tokens, f"no counters in {record.point_id}: {details}"
    committed = int(generated) - int(finished)
    return {
        "verify_steps": int(verifies),
        "committed_tokens": committed,
        "committed_drafts": committed - int(verifies),
        "proposed_drafts": int(verifies) * (int(draft_tokens) - 1),
        "accept_len": committed / verifies,
        "acceptance_rate": (committed - verifies) / (verifies * (draft_tokens - 1)),
    }


def three_sources(record: Record) -> dict[str, dict[str, Any]]:
    """Accept length and acceptance rate as each source gave them for the record, with the counts behind them."""
    server = record.server or {}
    prom = server.get("prometheus") or {}
    spec = (record.client or {}).get("spec") or {}
    details = server.get("details") or {}
    return {
        "journal": {
            "accept_len": server.get("accept_len"),
            "acceptance_rate": server.get("acceptance_rate"),
            "exactness": server.get("exactness") or {},
            "past_end": details.get("past_end"),
        },
        "prometheus": {
            "accept_len": prom.get("accept_len"),
            "acceptance_rate": prom.get("acceptance_rate"),
            "exactness": prom.get("exactness") or {},
        },
        "responses": {
            "accept_len": spec.get("accept_len"),
            "acceptance_rate": spec.get("acceptance_rate"),
            "counts": (spec.get("verify_steps"), spec.get("proposed_drafts"), spec.get("accepted_drafts")),
        },
    }


def _within(entry: Any, value: float) -> bool:
    bounds = entry.get("bounds") if isinstance(entry, dict) else None
    return isinstance(bounds, list) and len(bounds) == 2 and bounds[0] - 1e-9 <= value <= bounds[1] + 1e-9


def check_speculative_point(record: Record, *, flushed: bool = True) -> dict[str, Any]:
    """One NGRAM point against SGLang's counters over its window (returns what it saw, for the test's report):

    - the responses' accept length, verify steps and (committed) acceptance rate equal the counters' exactly; their
      accepted drafts (SGLang's spec_num_correct_drafts, which counts drafts past a request's end) exceed the
      counters' committed drafts by D >= 0, the drafts the requests discarded at max_new_tokens or a stop;
    - /metrics gives accept length and acceptance rate from the counters, both ``exact`` (never the gauge);
    - the log's figures less the D drafts the responses name (``details.past_end``) hold the counters' values
      within their stated bounds, or the log gave none and the record says why;
    - ``flushed``: the drafter's corpus was emptied before the point and no prompt was sent twice
      (``drafter_corpus`` clean); else the record says the corpus was not emptied."""
    oracle = counter_oracle(record)
    sources = three_sources(record)
    spec = (record.client or {}).get("spec") or {}
    server = record.server or {}
    where = record.point_id
    responses, prom, journal = sources["responses"], sources["prometheus"], sources["journal"]
    assert spec.get("verify_steps") == oracle["verify_steps"], (where, spec, oracle)
    assert spec.get("proposed_drafts") == oracle["proposed_drafts"], (where, spec, oracle)
    assert abs(responses["accept_len"] - oracle["accept_len"]) <= 1e-12 * oracle["accept_len"], (where, responses)
    discarded = int(spec["accepted_drafts"]) - oracle["committed_drafts"]
    assert discarded >= 0, (where, spec, oracle)
    # SGLang's own per-response rate counts the discarded drafts: exactly D / proposed above the counters'; the
    # responses' acceptance_rate is the committed one, the counters' (overshoot.py).
    own = (oracle["committed_drafts"] + discarded) / oracle["proposed_drafts"]
    if discarded:
        assert spec.get("drafts_past_end") == discarded, (where, spec)
        assert abs(spec["acceptance_rate_engine"] - own) <= 1e-12, (where, spec, oracle)
    assert abs(responses["acceptance_rate"] - oracle["acceptance_rate"]) <= 1e-12, (where, responses, oracle)
    for figure in ("accept_len", "acceptance_rate"):
        assert abs(prom[figure] - oracle[figure]) <= 1e-12 * max(1.0, oracle[figure]), (where, figure, prom, oracle)
        assert prom["exactness"][figure]["kind"] == "exact", (where, figure, prom["exactness"])
    log: dict[str, Any] = {"refused": None}
    if journal["accept_len"] is None:
        reasons = [r.get("reason") for r in (server.get("integrity") or {}).get("reasons") or []]
        assert reasons or server.get("open_end"), (where, "no log figure and no reason", server)
        log["refused"] = reasons or server.get("open_end")
    else:
        past_end = journal["past_end"]
        assert past_end is not None and past_end["discarded_drafts"] == discarded, (where, past_end, discarded)
        for figure in ("accept_len", "acceptance_rate"):
            entry = journal["exactness"].get(figure)
            assert _within(entry, oracle[figure]), (where, figure, journal[figure], entry, oracle[figure])
        log.update(
            accept_len=journal["accept_len"],
            printed=past_end["accept_len_printed"],
            kind=journal["exactness"]["accept_len"]["kind"],
        )
    corpus = server.get("drafter_corpus") or {}
    assert corpus.get("keeps_corpus") and corpus.get("clean") is flushed, (where, corpus)
    if not flushed:
        assert "not emptied before the point" in corpus["note"], (where, corpus)
    return {"oracle": oracle, "discarded": discarded, "log": log, "sglang_own_rate": own}
