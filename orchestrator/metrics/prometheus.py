"""Two ``/metrics`` scrapes of one engine: counters by difference, gauges sampled, the engine's figures derived.

A window is two scrapes bracketing one load point (plus, optionally, scrapes taken during it). Counters are
read by difference (after - before; a counter that went down was reset, and its after value is the
increase); gauges are sampled: the window value is the mean of the scrapes taken during and at the end of
the window (the ``before`` scrape describes the previous window and only shows up as ``before``).

Derived figures: vLLM and llama.cpp expose ``spec_decode_num_drafts_total``,
``spec_decode_num_draft_tokens_total``, ``spec_decode_num_accepted_tokens_total`` and
``..._accepted_tokens_per_pos_total{position="i"}``, so accept length = 1 + d(accepted) / d(drafts), exact.

Each engine derives its figures in its own package: ``orchestrator/engines/<name>/prometheus.py`` (SGLang's
counters and gauges, vLLM V0's cumulative counters).

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchestrator.engines.exposition import PromSnapshot, PromWindow, by_name, finite, parse_exposition
from orchestrator.engines.registry import engine_names, get_engine, is_engine
from orchestrator.errors import MetricsError

if TYPE_CHECKING:
    from orchestrator.engines.base import Engine

__all__ = ["PromSnapshot", "PromWindow", "parse_exposition", "scrape_delta"]


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
    spec = get_engine(engine) if is_engine(engine) else None
    prefix = spec.prometheus_prefix if spec is not None else None
    if spec is None or prefix is None:
        names = [name for name in engine_names() if get_engine(name).prometheus_prefix]
        raise MetricsError(f"unknown engine {engine!r} for Prometheus metrics; expected one of {sorted(names)}")
    before = parse_exposition(before_text, prefix)
    after = parse_exposition(after_text, prefix)
    middle = [parse_exposition(t, prefix) for t in during]
    window = PromWindow(engine=engine, elapsed_s=elapsed_s if elapsed_s and elapsed_s > 0 else None)
    window.definitions = dict(spec.prometheus_definitions)
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
            kept = [v for v in samples if math.isfinite(v)]
            nonzero = [v for v in kept if v != 0]
            window.gauges[key] = {
                "before": finite(before.values.get(key)),
                "after": finite(value),
                "mean": sum(kept) / len(kept) if kept else None,
                "mean_nonzero": sum(nonzero) / len(nonzero) if nonzero else None,
                "min": min(kept) if kept else None,
                "max": max(kept) if kept else None,
                "samples": len(samples),
            }
    _derive(window, after, spec, version)
    return window


def _derive(window: PromWindow, after: PromSnapshot, engine: Engine, version: str | None = None) -> None:
    names = after.names
    prefix = engine.prometheus_prefix or ""
    drafts = by_name(window.counters, names, f"{prefix}spec_decode_num_drafts_total")
    draft_tokens = by_name(window.counters, names, f"{prefix}spec_decode_num_draft_tokens_total")
    accepted = by_name(window.counters, names, f"{prefix}spec_decode_num_accepted_tokens_total")
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
        generated = by_name(window.counters, names, prefix + counter)
        if generated is not None:
            break
    if generated is not None and window.elapsed_s:
        window.gen_throughput = generated / window.elapsed_s
    window.details = {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "generated": generated}
    engine.derive_prometheus(window, after, generated, version)
