"""Prometheus text exposition (``/metrics``) for ``sglang:``, ``vllm:`` and ``llamacpp:`` names.

A window is two scrapes bracketing one load point (plus, optionally, scrapes taken during it). Counters are
read by difference (after - before; a counter that went down was reset, and its after value is the
increase); gauges are sampled: the window value is the mean of the scrapes taken during and at the end of
the window (the ``before`` scrape describes the previous window and only shows up as ``before``).

Derived figures: vLLM and llama.cpp expose ``spec_decode_num_drafts_total``,
``spec_decode_num_draft_tokens_total``, ``spec_decode_num_accepted_tokens_total`` and
``..._accepted_tokens_per_pos_total{position="i"}``, so accept length = 1 + d(accepted) / d(drafts), exact.

SGLang (python/sglang/srt/observability/metrics_collector.py, sglang 0.5.23) exposes, from its tokenizer
process (one per server, every DP group's requests; labels ``model_name``, ``engine_type``), the counters
``sglang:generation_tokens_total`` (+ label ``is_streaming`` from 0.5.17) and ``sglang:spec_verify_calls_total``
(from 0.5.13), both incremented when a request finishes (``observe_one_finished_request``: completion tokens,
and the request's verify calls when > 0). There is no accepted-draft or proposed-draft counter. So window
accept length = d(generation_tokens) / d(spec_verify_calls), bonus included: the same formula as a
``/generate`` response's ``meta_info.spec_accept_length`` (managers/tokenizer_manager.py
``_calculate_spec_decoding_metrics``: completion_tokens / spec_verify_ct), over the requests that finished
between the scrapes. Each scheduler that logs (SchedulerMetricsCollector, labels ``model_name``,
``engine_type``, ``tp_rank``, ``pp_rank``, ``moe_ep_rank`` and ``dp_rank`` when the server has DP ranks)
exports the gauges ``sglang:spec_accept_length``, ``sglang:spec_accept_rate`` and ``sglang:gen_throughput``,
set to its last ``Decode batch`` line's figures (metrics_reporter.py report_decode_stats; gen_throughput
goes to 0 when idle). Series that differ only in ``tp_rank``/``pp_rank``/``moe_ep_rank`` are copies of one
DP group's figures (ATTN_CP ranks up to 0.5.22, PP stages, --enable-metrics-for-all-schedulers; see
lines.py RANK_TAGS); one series per group is read, and groups are combined: throughputs add up, accept
lengths are weighted by each group's verify rate (throughput / accept length). The gauges are the fallback
and the cross-check (``details.gauge_*``).

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import MetricsError
from orchestrator.metrics.sglang import accept_rate_definition

__all__ = [
    "DEFINITIONS",
    "PREFIXES",
    "SGLANG_COPY_LABELS",
    "PromSnapshot",
    "PromWindow",
    "parse_exposition",
    "scrape_delta",
]

PREFIXES = {"sglang": "sglang:", "sim": "sglang:", "vllm": "vllm:", "llamacpp": "llamacpp:"}

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_COUNTER_SUFFIXES = ("_bucket", "_count", "_sum")

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "vLLM / llama.cpp: 1 + d(spec_decode_num_accepted_tokens_total) / d(spec_decode_num_drafts_total) "
        "between the scrapes, bonus included; a draft is one step that verified a draft (llama.cpp steps "
        "without a draft are not counted). SGLang: tokens per verify step, bonus included, the prefill's first "
        "token excluded: (d(sglang:generation_tokens_total) - d(sglang:num_requests_total)) / "
        "d(sglang:spec_verify_calls_total), all series summed, over the requests that finished between the "
        "scrapes (observability/metrics_collector.py observe_one_finished_request increments the three "
        "together: completion tokens, 1, and the request's verify calls when > 0; each completion's first "
        "token comes from prefill). SGLang's own formula, completion tokens / verify calls (as meta_info "
        "spec_accept_length), is details.accept_len_engine. Without the verify counter (SGLang < 0.5.13) the "
        "sglang:spec_accept_length gauges: per DP group the mean of the non-zero samples during and at the "
        "end of the window, groups weighted by verify rate (gen_throughput / accept length)."
    ),
    "acceptance_rate": (
        "vLLM / llama.cpp: d(accepted tokens) / d(draft tokens), no bonus. SGLang (no counter for it): the "
        "sglang:spec_accept_rate gauges, combined over DP groups like accept_len, only when their HELP text "
        "(or the server version given) says drafts only ('accepted drafts / proposed drafts', sglang >= "
        "0.5.11); the older definition ('accepted tokens / total draft tokens', bonus counted) goes to "
        "details.acceptance_rate_incl_bonus, an unknown one to details.gauge_acceptance_rate only."
    ),
    "gen_throughput": (
        "d(generation token counter) / elapsed seconds when both are known (vllm:generation_tokens_total, "
        "sglang:generation_tokens_total, llamacpp:tokens_predicted_total); else for SGLang the "
        "sglang:gen_throughput gauges: per DP group the mean of the non-zero samples, summed over groups "
        "(copies of a group counted once)."
    ),
}

# SGLang's scheduler gauge labels that tell copies of one DP group's figures apart (lines.py RANK_TAGS).
SGLANG_COPY_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank"})
# metrics_collector.py HELP of sglang:spec_accept_rate: 0.5.11+ / <= 0.5.10.
SGLANG_RATE_HELP_DRAFTS_ONLY = "accepted drafts / proposed drafts"
SGLANG_RATE_HELP_INCL_BONUS = "accepted tokens / total draft tokens"


@dataclass(slots=True)
class PromSnapshot:
    """One scrape: value per series (``name{label="v",...}`` with sorted labels) and the declared types."""

    values: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # series -> metric name
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # series -> labels
    types: dict[str, str] = field(default_factory=dict)  # metric family -> counter/gauge/histogram/...
    helps: dict[str, str] = field(default_factory=dict)  # metric family -> HELP text
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


def scrape_delta(
    before_text: str,
    after_text: str,
    engine: str,
    *,
    during: Sequence[str] = (),
    elapsed_s: float | None = None,
    version: str | None = None,
) -> PromWindow:
    """Counters by difference and gauges sampled between two ``/metrics`` scrapes of ``engine``.

    ``version``: the server's engine version when known; for SGLang it says what ``spec_accept_rate`` means
    where the exposition's HELP text does not."""
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
    _derive(window, after, prefix, version)
    return window


def _derive(window: PromWindow, after: PromSnapshot, prefix: str, version: str | None = None) -> None:
    names = after.names
    drafts = _by_name(window.counters, names, f"{prefix}spec_decode_num_drafts_total")
    draft_tokens = _by_name(window.counters, names, f"{prefix}spec_decode_num_draft_tokens_total")
    accepted = _by_name(window.counters, names, f"{prefix}spec_decode_num_accepted_tokens_total")
    # vLLM V0 (<= 0.9.2, vllm/engine/metrics.py PrometheusStatLogger) adds its cumulative spec counts to these
    # counters every interval, so their differences are no window's counts: V0 is told by its emitted-tokens
    # counter, and its spec counters are not read (the V0 log line is, metrics/vllm.py).
    v0 = prefix == "vllm:" and _by_name(after.values, names, "vllm:spec_decode_num_emitted_tokens_total") is not None
    if v0:
        drafts = draft_tokens = accepted = None
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
    if per_pos and drafts and not v0:
        window.per_position = [per_pos.get(i, 0.0) / drafts for i in range(max(per_pos) + 1)]
    generated = None
    for counter in ("generation_tokens_total", "tokens_predicted_total"):
        generated = _by_name(window.counters, names, prefix + counter)
        if generated is not None:
            break
    if generated is not None and window.elapsed_s:
        window.gen_throughput = generated / window.elapsed_s
    window.details = {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "generated": generated}
    if v0:
        window.details["vllm_v0_spec_counters"] = "not read: V0 adds cumulative counts to them every interval"
    if prefix == "sglang:":
        _derive_sglang(window, after, generated, version)


def _group_means(window: PromWindow, after: PromSnapshot, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Per SGLang DP group (the labels but the copy labels), the window mean of one copy's non-zero samples
    of gauge ``name`` (the copy with the lowest tp_rank / pp_rank; every copy holds the same figures)."""
    picked: dict[tuple[tuple[str, str], ...], tuple[tuple[int, ...], float]] = {}
    for key, stats in window.gauges.items():
        if after.names.get(key) != name:
            continue
        labels = after.labels[key]
        # 0 means "no decode interval since the gauge was set" (idle, or speculation off), not a value.
        mean = stats["mean_nonzero"]
        if not isinstance(mean, float | int):
            continue
        group = tuple(sorted((k, v) for k, v in labels.items() if k not in SGLANG_COPY_LABELS))
        order = tuple(_rank(labels.get(k)) for k in ("tp_rank", "pp_rank", "moe_ep_rank"))
        if group not in picked or order < picked[group][0]:
            picked[group] = (order, float(mean))
    return {group: value for group, (_, value) in picked.items()}


def _rank(text: str | None) -> int:
    try:
        return int(text) if text is not None else -1
    except ValueError:
        return 1 << 30


def _combine_lengths(lengths: dict[Any, float], throughputs: dict[Any, float]) -> float | None:
    """Accept length over DP groups: tokens / verify steps, each group's verify rate being its throughput /
    its accept length; the plain mean when a group has no throughput."""
    if not lengths:
        return None
    if all(throughputs.get(g, 0) > 0 for g in lengths):
        tokens = sum(throughputs[g] for g in lengths)
        verifies = sum(throughputs[g] / length for g, length in lengths.items() if length > 0)
        if verifies > 0:
            return tokens / verifies
    return sum(lengths.values()) / len(lengths)


def _derive_sglang(window: PromWindow, after: PromSnapshot, generated: float | None, version: str | None) -> None:
    """SGLang: the tokenizer's counters first (exact), the scheduler gauges as fallback and cross-check."""
    prefix = "sglang:"
    verifies = _by_name(window.counters, after.names, f"{prefix}spec_verify_calls_total")
    finished = _by_name(window.counters, after.names, f"{prefix}num_requests_total")
    lengths = _group_means(window, after, f"{prefix}spec_accept_length")
    rates = _group_means(window, after, f"{prefix}spec_accept_rate")
    throughputs = _group_means(window, after, f"{prefix}gen_throughput")
    gauge_len = _combine_lengths(lengths, throughputs)
    gauge_rate = _combine_lengths(rates, throughputs) if rates else None
    gauge_throughput = sum(throughputs.values()) if throughputs else None
    help_text = after.helps.get(f"{prefix}spec_accept_rate", "")
    if SGLANG_RATE_HELP_DRAFTS_ONLY in help_text:
        rate_definition = "drafts_only"
    elif SGLANG_RATE_HELP_INCL_BONUS in help_text:
        rate_definition = "incl_bonus"
    else:  # no HELP (or prometheus_client's "Multiprocess metric"): the version decides, if given
        rate_definition = accept_rate_definition(version)
    engine_len = generated / verifies if verifies and generated is not None else None
    source = None
    if verifies and generated is not None and finished is not None:
        window.accept_len = (generated - finished) / verifies
        source = "counters"
    elif gauge_len is not None:
        window.accept_len = gauge_len
        source = "gauges"
    if gauge_rate is not None and rate_definition == "drafts_only":
        window.acceptance_rate = gauge_rate
    if window.gen_throughput is None and gauge_throughput is not None:
        window.gen_throughput = gauge_throughput  # DP groups serve different requests: their rates add up
    window.details.update(
        {
            "verify_calls": verifies,
            "finished_requests": finished,
            "accept_len_engine": engine_len,
            "accept_len_source": source,
            "gauge_accept_len": gauge_len,
            "gauge_acceptance_rate": gauge_rate,
            "gauge_gen_throughput": gauge_throughput,
            "gauge_groups": len(throughputs or lengths),
            "acceptance_rate_definition": rate_definition if gauge_rate is not None else None,
        }
    )
    if rate_definition == "incl_bonus":
        window.details["acceptance_rate_incl_bonus"] = gauge_rate
