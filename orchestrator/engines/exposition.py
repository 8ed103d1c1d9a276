"""Prometheus text exposition (``/metrics``): one scrape parsed, and what two scrapes say about a window.

The shared types every engine's ``/metrics`` derivation reads and fills (:class:`PromSnapshot`,
:class:`PromWindow`); the window itself is cut by :func:`orchestrator.metrics.prometheus.scrape_delta`, and each
engine derives its figures in its own package (``orchestrator/engines/<name>/prometheus.py``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines.integrity import Integrity

__all__ = ["COUNTER_DEFINITIONS", "MAXIMA", "PromSnapshot", "PromWindow", "by_name", "finite", "parse_exposition"]

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_COUNTER_SUFFIXES = ("_bucket", "_count", "_sum")

#: vLLM's and llama.cpp's counters (both engines' names, their own prefix). vLLM's give the window's figures
#: exactly; llama.cpp writes its counters as doubles with 6 significant digits, so from 10^6 on its figures are
#: rounded (orchestrator/engines/llamacpp/prometheus.py). Each record says which (``exactness``).
COUNTER_DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "1 + d(spec_decode_num_accepted_tokens_total) / d(spec_decode_num_drafts_total) "
        "between the scrapes, bonus included; a draft is one step that verified a draft (llama.cpp steps "
        "without a draft are not counted). Exact for vLLM; llama.cpp's counters of 10^6 or more are rounded "
        "to 6 significant digits (exactness says so, with bounds)."
    ),
    "acceptance_rate": "d(accepted tokens) / d(draft tokens), no bonus.",
    "gen_throughput": (
        "d(generation token counter) / elapsed seconds when both are known (vllm:generation_tokens_total, "
        "llamacpp:tokens_predicted_total); none from a window a restart or a counter reset broke."
    ),
}


#: Series an engine declares ``counter`` that hold a running maximum, not a count: they need not go down when the
#: server restarts, so they say nothing of a reset. llama.cpp's ``n_tokens_max`` ("Largest observed sequence
#: length", ``std::max`` in tools/server/server-context.cpp ``metrics_post_decode``; a counter in
#: server-task.cpp ``server_task_result_metrics::to_metrics``).
MAXIMA = frozenset({"llamacpp:n_tokens_max"})


@dataclass(slots=True)
class PromSnapshot:
    """One scrape: value per series (``name{label="v",...}`` with sorted labels) and the declared types."""

    values: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # series -> metric name
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # series -> labels
    types: dict[str, str] = field(default_factory=dict)  # metric family -> counter/gauge/histogram/...
    helps: dict[str, str] = field(default_factory=dict)  # metric family -> HELP text
    lines_skipped: int = 0
    #: Series that came more than once in this scrape -> every value given, in order (the last one is kept in
    #: ``values``): two registries exporting one name, or a broken exporter.
    duplicates: dict[str, list[float]] = field(default_factory=dict)

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
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                snap.types[parts[2]] = parts[3].strip()
            elif len(parts) >= 3 and parts[1] == "HELP":
                snap.helps[parts[2]] = parts[3] if len(parts) == 4 else ""
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
        if key in snap.values:
            snap.duplicates.setdefault(key, [snap.values[key]]).append(value)
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
    definitions: dict[str, str] = field(default_factory=dict)  # figure -> how this engine's is computed
    #: Whether the window is whole, and how exact each figure is (orchestrator/engines/integrity.py): filled by
    #: orchestrator.metrics.prometheus.scrape_delta (a restart, a counter that went down) and each engine's
    #: derivation (``exactness`` per figure, keyed as ``figures()`` and ``per_position_acceptance``).
    integrity: Integrity = field(default_factory=Integrity)
    exactness: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The server's reported settings (engine_info), when the caller knows them: what a figure's meaning depends
    #: on beyond the scrapes (SGLang's --speculative-adaptive). Not written out.
    server_settings: dict[str, Any] = field(default_factory=dict)

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
            "definitions": dict(self.definitions),
            "integrity": self.integrity.to_dict(),
            "exactness": {k: dict(v) for k, v in self.exactness.items()},
        }


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def by_name(values: dict[str, float], names: dict[str, str], name: str) -> float | None:
    picked = [v for k, v in values.items() if names.get(k) == name]
    return sum(picked) if picked else None
