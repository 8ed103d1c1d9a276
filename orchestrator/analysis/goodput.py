"""Goodput, a figure of the answer: the requests meeting every per-request latency limit, per second of the window.

Defined as vLLM's ``vllm bench serve --goodput`` and NVIDIA AIPerf define it (vLLM ``vllm/benchmarks/serve.py``
``calculate_metrics``: a request is good when each of its ``ttft``, ``tpot``, ``e2el`` is at most its limit in
ms, ``request_goodput = good_completed / duration``; AIPerf ``aiperf/metrics/types/goodput_metric.py``:
``Goodput = Good request count / Benchmark Duration``). The limits are the experiment's ``objective.goodput``
(``orchestrator/experiment/search.py``); a run without them has no goodput.

:func:`window_goodput` is one window's figure, from its ``requests/<point>.jsonl``, with a binomial standard
error; :func:`with_goodput` adds it to the window frame (``goodput`` and its ``_lo``, ``_hi``, ``_se``), so the
point's figure, its interval and its repeats combined are made as every other figure's
(``orchestrator/analysis/intervals.py``) and every output renders the answer's goodput, never its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.analysis.requests import read_requests
from orchestrator.analysis.roles import finite

__all__ = ["GOODPUT", "goodput_limits", "window_goodput", "with_goodput"]

GOODPUT = "goodput"


def goodput_limits(experiment: Mapping[str, Any]) -> dict[str, float] | None:
    """The run's per-request limits (``objective.goodput``), None when it has none."""
    objective = experiment.get("objective")
    limits = objective.get("goodput") if isinstance(objective, Mapping) else None
    if not isinstance(limits, Mapping) or not limits:
        return None
    return {str(k): float(v) for k, v in limits.items() if finite(v) is not None}


def _good(row: Mapping[str, Any], limits: Mapping[str, float]) -> bool:
    ttft, e2e, tokens = finite(row.get("ttft_ms")), finite(row.get("e2e_ms")), int(row.get("output_tokens") or 0)
    values = {
        "ttft_ms": ttft,
        "e2e_ms": e2e,
        "tpot_ms": (e2e - ttft) / (tokens - 1) if ttft is not None and e2e is not None and tokens > 1 else None,
    }
    return all((v := values.get(k)) is not None and v <= limit for k, limit in limits.items())


def window_goodput(
    rows: Sequence[Mapping[str, Any]], limits: Mapping[str, float], duration_s: float | None
) -> tuple[float, float] | None:
    """(good requests per second, its standard error) of one window's request rows; None without rows or
    duration. The error is binomial on the share of good requests (at least that of one request in n)."""
    if not rows or not duration_s:
        return None
    good = sum(1 for row in rows if row.get("ok") and _good(row, limits))
    n = len(rows)
    share = good / n
    se = math.sqrt(max(share * (1 - share), 1.0 / n) / n) * n / float(duration_s)
    return good / float(duration_s), se


def with_goodput(
    windows: pd.DataFrame, run_path: str | Path, limits: Mapping[str, float] | None, *, z: float
) -> pd.DataFrame:
    """``windows`` with ``goodput`` (and ``goodput_lo``, ``_hi``, ``_se``: a normal interval at ``z``) for each
    ok window that has its requests; unchanged when the run has no goodput limits."""
    needed = ["status", "requests_file", "duration_s"]
    if not limits or windows.empty or any(c not in windows.columns for c in needed):
        return windows
    values: list[float] = []
    errors: list[float] = []
    for row in windows[needed].to_dict("records"):
        found = None
        if row.get("status") == "ok":
            found = window_goodput(
                read_requests(run_path, row.get("requests_file")), limits, finite(row.get("duration_s"))
            )
        values.append(found[0] if found else math.nan)
        errors.append(found[1] if found else math.nan)
    out = windows.copy()
    out[GOODPUT] = values
    out[f"{GOODPUT}_se"] = errors
    out[f"{GOODPUT}_lo"] = [v - z * e for v, e in zip(values, errors, strict=True)]
    out[f"{GOODPUT}_hi"] = [v + z * e for v, e in zip(values, errors, strict=True)]
    return out
