"""Every request of a point, from its ``requests/<point>.jsonl``: the full distributions behind a record.

A point's requests file (written by the sweep, ``orchestrator/load/records.py`` ``request_row``) holds one
line per measured request: when it was sent, its TTFT and end-to-end time, every gap between its
token-bearing chunks with the tokens of each chunk, its output tokens, the engine's per-response speculative
figures and its error. :func:`figures_from_requests` recomputes a record's client figures from those lines by
the definitions of ``orchestrator/load/stats.py`` (same order, same arithmetic), so they agree exactly:
a reader can trust the file to compute distributions of their own. :func:`request_samples` gives the samples
the report's CDF plots draw (TTFT and inter-token latency per request, in ms).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.engines.responses import SpecFigures
from orchestrator.load.spec import summarize_spec
from orchestrator.load.stats import distribution

__all__ = ["figures_from_requests", "read_requests", "request_samples", "samples_by_load", "samples_frame"]


def read_requests(run_path: str | Path, requests_file: str | None) -> list[dict[str, Any]]:
    """The lines of one point's requests file (``Record.requests_file``, relative to the run directory); none
    when the point has no file or it cannot be read (a run made before requests files existed)."""
    if not requests_file:
        return []
    from orchestrator.errors import StoreError
    from orchestrator.runs.store import RunStore

    try:
        return [row for row in RunStore.open(run_path).read_lines(requests_file) if isinstance(row, dict)]
    except StoreError:
        return []


def _spec(row: dict[str, Any]) -> SpecFigures | None:
    spec = row.get("spec")
    return SpecFigures.from_dict(spec) if isinstance(spec, dict) else None


def _itl_seconds(rows: Iterable[dict[str, Any]]) -> np.ndarray:
    """Every inter-token gap (seconds) of the streamed requests, in the order the window's figures pool them."""
    values: list[float] = []
    for row in rows:
        if not row.get("streamed", True):
            continue
        for gap, tokens in zip(row.get("chunk_gaps_s") or [], (row.get("chunk_tokens") or [])[1:], strict=False):
            values.extend([gap / tokens] * tokens)
    return np.asarray(values, dtype=float)


def figures_from_requests(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's client figures that its requests determine: counts, tokens, errors, finish reasons, the
    TTFT, inter-token and end-to-end distributions and the per-response speculative summary."""
    ok = [r for r in rows if r.get("ok")]
    errors = Counter(r.get("error_kind") or "unknown" for r in rows if not r.get("ok"))
    inputs = [r["input_tokens"] for r in ok if r.get("input_tokens") is not None]
    spec = summarize_spec((_spec(r), int(r.get("output_tokens") or 0)) for r in ok)
    return {
        "requests": len(rows),
        "completed": len(ok),
        "errors": len(rows) - len(ok),
        "errors_by_kind": dict(sorted(errors.items())),
        "output_tokens": sum(int(r.get("output_tokens") or 0) for r in ok),
        "input_tokens": sum(inputs) if inputs else None,
        "ttft_ms": distribution(r["ttft_s"] for r in ok if r.get("ttft_s") is not None),
        "itl_ms": distribution(_itl_seconds(ok)),
        "e2e_ms": distribution(r["e2e_s"] for r in ok if r.get("e2e_s") is not None),
        "finish_reasons": dict(sorted(Counter(r.get("finish_reason") or "none" for r in ok).items())),
        "spec_accept_len": spec["accept_len"],
        "spec_acceptance_rate": spec["acceptance_rate"],
    }


def request_samples(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """TTFT (one per successful request) and inter-token latency (one per token gap) samples, in ms."""
    ok = [r for r in rows if r.get("ok")]
    ttft = np.asarray([r["ttft_s"] for r in ok if r.get("ttft_s") is not None], dtype=float) * 1000.0
    return {"ttft_ms": ttft, "itl_ms": _itl_seconds(ok) * 1000.0}


def _point_samples(run_path: str | Path, frame: pd.DataFrame) -> Iterator[tuple[Any, Any, Any, str, np.ndarray]]:
    """(label, workload, load label, figure, samples) of each successful point of ``frame`` with a requests file,
    in the frame's order, each figure's samples non-empty."""
    if frame.empty or "requests_file" not in frame.columns:
        return
    measured = frame[(frame["status"] == "ok") & frame["alias_of"].isna()]
    for row in measured.to_dict("records"):
        files = row.get("requests_files") or [row.get("requests_file")]
        rows: list[dict[str, Any]] = []
        for name in files:
            rows += read_requests(run_path, name if isinstance(name, str) else None)
        for figure, values in request_samples(rows).items():
            if values.size:
                yield row.get("label"), row.get("workload") or "", row.get("load_label"), figure, values


def samples_frame(run_path: str | Path, frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, figure, sample) for the successful points of ``frame`` that have a requests file:
    ``label workload load_label figure value`` (``figure`` is ``ttft_ms`` or ``itl_ms``)."""
    columns = ["label", "workload", "load_label", "figure", "value"]
    found = list(_point_samples(run_path, frame))
    if not found:
        return pd.DataFrame(columns=columns)
    sizes = [values.size for *_key, values in found]
    out: dict[str, Any] = {}
    for index, name in enumerate(columns[:-1]):
        cells = np.empty(len(found), dtype=object)
        cells[:] = [point[index] for point in found]
        out[name] = np.repeat(cells, sizes)
    out["value"] = np.concatenate([values for *_key, values in found]).astype(float, copy=False)
    return pd.DataFrame(out, columns=columns)


def samples_by_load(run_path: str | Path, frame: pd.DataFrame) -> dict[Any, dict[tuple[str, Any], list[np.ndarray]]]:
    """The samples of :func:`samples_frame` by load label, then by (figure, configuration label), each point's
    in the frame's order: what the latency CDFs draw, without a row per sample (a frame of 5 million rows and
    its copy by load were most of the report's memory at 4,875 real-sized points: bench/RESULTS-scale.md)."""
    out: dict[Any, dict[tuple[str, Any], list[np.ndarray]]] = {}
    for label, _workload, load_label, figure, values in _point_samples(run_path, frame):
        out.setdefault(load_label, {}).setdefault((figure, label), []).append(values)
    return out
