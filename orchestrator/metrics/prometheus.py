"""Prometheus text exposition (``/metrics``) for ``sglang:``, ``vllm:`` and ``llamacpp:`` names.

A window is two scrapes bracketing one load point (plus, optionally, scrapes taken during it). Counters are
read by difference (after - before; a counter that went down was reset, and its after value is the
increase); gauges are sampled: the window value is the mean of the scrapes taken during and at the end of
the window (the ``before`` scrape describes the previous window and only shows up as ``before``).

Derived figures: vLLM and llama.cpp expose ``spec_decode_num_drafts_total``,
``spec_decode_num_draft_tokens_total``, ``spec_decode_num_accepted_tokens_total`` and
``..._accepted_tokens_per_pos_total{position="i"}``, so accept length = 1 + d(accepted) / d(drafts), exact.
SGLang exposes gauges ``sglang:spec_accept_length``, ``sglang:spec_accept_rate`` and
``sglang:gen_throughput``, each describing the last decode-log interval before the scrape (0 when none ran:
zeros are left out of the window value); the simulator adds counters ``sglang:spec_verify_steps_total``,
``sglang:spec_draft_tokens_total`` and ``sglang:spec_accepted_tokens_total`` (bonus excluded), used like
vLLM's when present.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import MetricsError

__all__ = ["PREFIXES", "PromSnapshot", "PromWindow", "parse_exposition", "scrape_delta"]

PREFIXES = {"sglang": "sglang:", "sim": "sglang:", "vllm": "vllm:", "llamacpp": "llamacpp:"}

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_COUNTER_SUFFIXES = ("_bucket", "_count", "_sum")

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "vLLM / llama.cpp: 1 + d(spec_decode_num_accepted_tokens_total) / d(spec_decode_num_drafts_total) "
        "between the scrapes, bonus included; a draft is one step that verified a draft (llama.cpp steps "
        "without a draft are not counted). Simulator: 1 + d(sglang:spec_accepted_tokens_total) / "
        "d(sglang:spec_verify_steps_total). SGLang: mean of the non-zero sglang:spec_accept_length gauge "
        "samples during and at the end of the window (each value covers the last decode-log interval)."
    ),
    "acceptance_rate": (
        "vLLM / llama.cpp / simulator: d(accepted tokens) / d(draft tokens), no bonus. SGLang: mean of the "
        "non-zero sglang:spec_accept_rate gauge samples."
    ),
    "gen_throughput": (
        "d(generation token counter) / elapsed seconds when both are known (vllm:generation_tokens_total, "
        "sglang:generation_tokens_total, llamacpp:tokens_predicted_total); else for SGLang the mean of the "
        "non-zero sglang:gen_throughput gauge samples (summed over DP ranks)."
    ),
}


@dataclass(slots=True)
class PromSnapshot:
    """One scrape: value per series (``name{label="v",...}`` with sorted labels) and the declared types."""

    values: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # series -> metric name
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # series -> labels
    types: dict[str, str] = field(default_factory=dict)  # metric family -> counter/gauge/histogram/...
    lines_skipped: int = 0

    def kind(self, name: str) -> str:
        """``counter`` or ``gauge`` for a sample name, from its TYPE line or, lacking one, its suffix."""
        declared = self.types.get(name)
        if declared is not None:
            return "counter" if declared == "counter" else "gauge"
        if name.endswith("_total") and self.types.get(name[: -len("_total")]) == "counter":
            return "counter"
        for suffix in _COUNTER_SUFFIXES:
            if name.endswith(suffix) and self.types.get(name[: -len(suffix)]) in ("histogram", "summary"):
                return "counter"
        return "counter" if name.endswith("_total") else "gauge"


def parse_exposition(text: str, prefix: str = "") -> PromSnapshot:
    """Parse exposition text, keeping series whose name starts with ``prefix``; bad lines are counted."""
    snap = PromSnapshot()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                snap.types[parts[2]] = parts[3]
            continue
        match = _SAMPLE.match(line)
        if match is None:
            snap.lines_skipped += 1
            continue
        name = match.group("name")
        if not name.startswith(prefix) or name.endswith("_created"):
            continue  # another engine's or the process's series; *_created are creation timestamps
        try:
            value = float(match.group("value"))
        except ValueError:
            snap.lines_skipped += 1
            continue
        labels = dict(_LABEL.findall(match.group("labels") or ""))
        key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
        snap.values[key] = value
        snap.names[key] = name
        snap.labels[key] = labels
    return snap


@dataclass(slots=True)
class PromWindow:
    """What two (or more) scrapes say about one window."""

    engine: str
    counters: dict[str, float] = field(default_factory=dict)  # series -> increase over the window
    gauges: dict[str, dict[str, float | int | None]] = field(default_factory=dict)  # series -> before/after/mean...
    resets: list[str] = field(default_factory=list)
    accept_len: float | None = None
    acceptance_rate: float | None = None
    gen_throughput: float | None = None
    per_position: list[float] | None = None
    elapsed_s: float | None = None
    lines_skipped: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def figures(self) -> dict[str, float | None]:
        return {
            "accept_len": self.accept_len,
            "acceptance_rate": self.acceptance_rate,
            "gen_throughput": self.gen_throughput,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "source": "prometheus",
            **self.figures(),
            "per_position_acceptance": self.per_position,
            "elapsed_s": self.elapsed_s,
            "counters": dict(self.counters),
            "gauges": {k: dict(v) for k, v in self.gauges.items()},
            "resets": list(self.resets),
            "lines_skipped": self.lines_skipped,
            "details": dict(self.details),
            "definitions": dict(DEFINITIONS),
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _by_name(values: dict[str, float], names: dict[str, str], name: str) -> float | None:
    picked = [v for k, v in values.items() if names.get(k) == name]
    return sum(picked) if picked else None


def _primary(labels: dict[str, str]) -> bool:
    # SGLang labels each scheduler's gauges with tp_rank; only one TP rank per DP group carries the figures.
    return labels.get("tp_rank", "0") == "0"


def scrape_delta(
    before_text: str,
    after_text: str,
    engine: str,
    *,
    during: Sequence[str] = (),
    elapsed_s: float | None = None,
) -> PromWindow:
    """Counters by difference and gauges sampled between two ``/metrics`` scrapes of ``engine``."""
    prefix = PREFIXES.get(engine)
    if prefix is None:
        raise MetricsError(f"unknown engine {engine!r} for Prometheus metrics; expected one of {sorted(PREFIXES)}")
    before = parse_exposition(before_text, prefix)
    after = parse_exposition(after_text, prefix)
    middle = [parse_exposition(t, prefix) for t in during]
    window = PromWindow(engine=engine, elapsed_s=elapsed_s if elapsed_s and elapsed_s > 0 else None)
    window.lines_skipped = before.lines_skipped + after.lines_skipped + sum(m.lines_skipped for m in middle)
    for key, value in after.values.items():
        name = after.names[key]
        if after.kind(name) == "counter":
            start = before.values.get(key, 0.0)
            if value < start:
                window.resets.append(key)
                start = 0.0
            window.counters[key] = value - start
        else:
            samples = [m.values[key] for m in middle if key in m.values] + [value]
            finite = [v for v in samples if math.isfinite(v)]
            nonzero = [v for v in finite if v != 0]
            window.gauges[key] = {
                "before": _finite(before.values.get(key)),
                "after": _finite(value),
                "mean": sum(finite) / len(finite) if finite else None,
                "mean_nonzero": sum(nonzero) / len(nonzero) if nonzero else None,
                "min": min(finite) if finite else None,
                "max": max(finite) if finite else None,
                "samples": len(samples),
            }
    _derive(window, after, prefix)
    return window


def _derive(window: PromWindow, after: PromSnapshot, prefix: str) -> None:
    names = after.names
    drafts = _by_name(window.counters, names, f"{prefix}spec_decode_num_drafts_total")
    draft_tokens = _by_name(window.counters, names, f"{prefix}spec_decode_num_draft_tokens_total")
    accepted = _by_name(window.counters, names, f"{prefix}spec_decode_num_accepted_tokens_total")
    if drafts is None and accepted is None:  # the simulator's SGLang-style counters (bonus excluded)
        drafts = _by_name(window.counters, names, f"{prefix}spec_verify_steps_total")
        draft_tokens = _by_name(window.counters, names, f"{prefix}spec_draft_tokens_total")
        accepted = _by_name(window.counters, names, f"{prefix}spec_accepted_tokens_total")
    if accepted is not None and drafts:
        window.accept_len = 1.0 + accepted / drafts
    if accepted is not None and draft_tokens:
        window.acceptance_rate = accepted / draft_tokens
    per_pos: dict[int, float] = {}
    for key, delta in window.counters.items():
        if names.get(key) == f"{prefix}spec_decode_num_accepted_tokens_per_pos_total":
            try:
                position = int(after.labels[key].get("position", ""))
            except ValueError:
                continue
            per_pos[position] = per_pos.get(position, 0.0) + delta
    if per_pos and drafts:
        window.per_position = [per_pos.get(i, 0.0) / drafts for i in range(max(per_pos) + 1)]
    generated = None
    for counter in ("generation_tokens_total", "tokens_predicted_total"):
        generated = _by_name(window.counters, names, prefix + counter)
        if generated is not None:
            break
    if generated is not None and window.elapsed_s:
        window.gen_throughput = generated / window.elapsed_s
    window.details = {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "generated": generated}
    gauge_means: dict[str, list[float]] = {}
    for key, stats in window.gauges.items():
        # 0 means "no decode interval since the gauge was set" (idle, or speculation off), not a value.
        mean = stats["mean_nonzero"]
        if isinstance(mean, float | int) and _primary(after.labels[key]):
            gauge_means.setdefault(names[key], []).append(float(mean))
    lengths = gauge_means.get(f"{prefix}spec_accept_length")
    rates = gauge_means.get(f"{prefix}spec_accept_rate")
    throughputs = gauge_means.get(f"{prefix}gen_throughput")
    if window.accept_len is None and lengths:
        window.accept_len = sum(lengths) / len(lengths)  # mean over DP groups
    if window.acceptance_rate is None and rates:
        window.acceptance_rate = sum(rates) / len(rates)
    if window.gen_throughput is None and throughputs:
        window.gen_throughput = sum(throughputs)  # DP groups serve different requests: their rates add up
