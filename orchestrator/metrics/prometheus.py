"""Two ``/metrics`` scrapes of one engine: counters by difference, gauges sampled, the engine's figures derived.

A window is two scrapes bracketing one load point (plus, optionally, scrapes taken during it). Counters are
read by difference (after - before); gauges are sampled: the window value is the mean of the scrapes taken
during and at the end of the window (the ``before`` scrape describes the previous window and only shows up as
``before``).

A window is whole when it covers one process and its counters only rose (``integrity``,
orchestrator/engines/integrity.py; docs/engines.md, "Whole windows"). Every scrape of the window (``before``,
``during``, ``after``) is compared with the one before it:

- ``process_start_time_seconds`` (prometheus_client's process collector, ``prometheus_client/process_collector.py``
  ``ProcessCollector.collect``: the process's start from ``/proc/self/stat`` and the boot time read once, so one
  process exports one value; written without the engine's prefix, so read from the raw text) that differs is a
  ``restart``. vLLM exports it when its API server uses prometheus_client's default registry
  (vllm/v1/metrics/prometheus.py ``get_prometheus_registry``: not with ``PROMETHEUS_MULTIPROC_DIR``); SGLang
  never (sglang/srt/utils/common.py ``add_prometheus_middleware``: a ``MultiProcessCollector`` registry only);
  llama.cpp has no such series (tools/server/server-task.cpp ``server_task_result_metrics::to_metrics``).
- A counter series that went down, or that was above zero and is gone, is a ``counter_reset`` naming it.

Each scrape is also read for what makes any difference over it meaningless: a series that came twice in one
scrape (``duplicate_series``, the same name and labels with two values: two registries exporting one name;
whichever value were kept, a figure from it could be 0 tok/s marked exact) and a counter that is NaN or
infinite (``non_finite``: its difference is not a number; it is left out of ``counters``). Either gives no
figure, not even since a restart.

No figure comes from a window that breaks either, with one exception: when a restart is shown by
``process_start_time_seconds`` and every counter that could show it went down with it (every series above zero
in the scrape before the restart), the after values are the counts of the new process since its start, and the
figures that come from counters are given from them, ``integrity.part = "since_restart"``. The throughput is
then not given (the seconds between the restart and the after scrape are not known), nor any gauge figure (its
samples span both processes). Counters that went down without a restart shown, or a restart with only some
counters down (``inconsistent``: a counter that stayed up either restarted above its old value or was carried
over by a kept ``PROMETHEUS_MULTIPROC_DIR``, and the two cannot be told apart), give no figure at all.

Each engine derives its figures in its own package (``orchestrator/engines/<name>/prometheus.py``: SGLang's
counters and gauges, vLLM's counters, llama.cpp's rounded doubles) and says how exact each is (``exactness``).

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.engines.exposition import MAXIMA, PromSnapshot, PromWindow, by_name, finite, parse_exposition
from orchestrator.engines.registry import engine_names, get_engine, is_engine
from orchestrator.errors import MetricsError

if TYPE_CHECKING:
    from orchestrator.engines.base import Engine

__all__ = ["PROCESS_START", "PromSnapshot", "PromWindow", "parse_exposition", "process_start", "scrape_delta"]

#: prometheus_client's process collector (process_collector.py ProcessCollector, namespace ""): the process's
#: start time, seconds since the epoch.
PROCESS_START = "process_start_time_seconds"
_NAMED = 6  # series named in a counter_reset's detail; the rest are counted


def process_start(text: str) -> float | None:
    """``process_start_time_seconds`` of one scrape's raw text, or None when it has none."""
    snap = parse_exposition(text, PROCESS_START)
    values = [v for k, v in snap.values.items() if snap.names[k] == PROCESS_START and math.isfinite(v)]
    return values[0] if len(values) == 1 else None


def scrape_delta(
    before_text: str,
    after_text: str,
    engine: str,
    *,
    during: Sequence[str] = (),
    elapsed_s: float | None = None,
    version: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> PromWindow:
    """Counters by difference and gauges sampled between two ``/metrics`` scrapes of ``engine``; a window that
    is not whole gives no figure, or those of its part since a restart (the module docstring).

    ``version``: the server's engine version when known; for SGLang it says what ``spec_accept_rate`` means
    where the exposition's HELP text does not. ``settings``: the server's reported settings (engine_info), when
    known; for SGLang whether it adapts its draft length (``speculative_adaptive``)."""
    spec = get_engine(engine) if is_engine(engine) else None
    prefix = spec.prometheus_prefix if spec is not None else None
    if spec is None or prefix is None:
        names = [name for name in engine_names() if get_engine(name).prometheus_prefix]
        raise MetricsError(f"unknown engine {engine!r} for Prometheus metrics; expected one of {sorted(names)}")
    before = parse_exposition(before_text, prefix)
    after = parse_exposition(after_text, prefix)
    middle = [parse_exposition(t, prefix) for t in during]
    window = PromWindow(engine=engine, elapsed_s=elapsed_s if elapsed_s and elapsed_s > 0 else None)
    window.server_settings = dict(settings or {})
    window.definitions = dict(spec.prometheus_definitions)
    window.lines_skipped = before.lines_skipped + after.lines_skipped + sum(m.lines_skipped for m in middle)
    since_restart = _check_window(window, [before, *middle, after], [before_text, *during, after_text])
    not_counted = _check_series(window, [before, *middle, after])
    if since_restart and {"duplicate_series", "non_finite"} & set(window.integrity.names()):
        since_restart = False  # not even the part since the restart is whole
        window.integrity.part = None
    for key, value in after.values.items():
        name = after.names[key]
        if after.kind(name) == "counter":
            if key in not_counted:
                continue  # no difference over a NaN or infinite count (integrity says which: _check_series)
            start = before.values.get(key, 0.0)
            if since_restart or value < start:
                start = 0.0  # the counts since the counter restarted
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
    if window.integrity.whole or since_restart:
        _derive(window, after, spec, version)
    _withhold(window, since_restart)
    return window


def _counter_values(snap: PromSnapshot) -> dict[str, float]:
    """The counts of one scrape (series of counter type, but the running maxima some engines declare so)."""
    return {
        k: v
        for k, v in snap.values.items()
        if snap.kind(snap.names[k]) == "counter" and snap.names[k] not in MAXIMA and math.isfinite(v)
    }


def _maxima(snap: PromSnapshot) -> dict[str, float]:
    """The running maxima of one scrape (``MAXIMA``: llama.cpp's ``n_tokens_max``), finite values only."""
    return {k: v for k, v in snap.values.items() if snap.names.get(k) in MAXIMA and math.isfinite(v)}


def _check_window(window: PromWindow, snaps: list[PromSnapshot], texts: list[str]) -> bool:
    """Fill ``window.integrity`` and ``window.resets`` from consecutive scrapes; True when the figures come from
    the after scrape alone, the counts since a restart (the module docstring)."""
    integrity = window.integrity
    starts = [process_start(t) for t in texts]
    down_all: list[str] = []
    restarts: list[str] = []
    partial: list[str] = []
    previous: dict[str, float] | None = None
    previous_start: float | None = None
    previous_maxima: dict[str, float] = {}
    for i, snap in enumerate(snaps):
        counters = _counter_values(snap)
        maxima = _maxima(snap)
        start = starts[i]
        if previous is not None:
            # A series above zero that is gone went down to zero (a new process has not made it yet).
            down = [k for k, v in previous.items() if v > 0 and counters.get(k, 0.0) < v]
            could = [k for k, v in previous.items() if v > 0]
            restarted = start is not None and previous_start is not None and start != previous_start
            # A running maximum (MAXIMA) that went down while no counter did: one process never lowers it, so a
            # new process runs whose counters grew past the old ones (llama.cpp exports no start time). With
            # counters down too, a reset and a restart look alike: counter_reset below says so.
            lowered = [
                f"{k} went from {v:g} to {maxima[k]:g}" for k, v in previous_maxima.items() if maxima.get(k, v) < v
            ]
            if restarted:
                restarts.append(f"{PROCESS_START} went from {previous_start!r} to {start!r}")
            elif lowered and not down:
                restarted = True
                restarts.append(
                    f"{'; '.join(lowered[:_NAMED])}: a running maximum that one process never lowers (a new process)"
                )
            if restarted:
                if len(down) != len(could):
                    partial.append(
                        f"a restart with {len(down)} of the {len(could)} counters above zero gone down: the others "
                        "restarted above their old values or were carried over, which the scrapes cannot tell apart"
                    )
            elif down and len(down) != len(could):
                partial.append(
                    f"only {len(down)} of the {len(could)} counters above zero went down: a difference over them "
                    "mixes counts from before and after the reset"
                )
            down_all += [k for k in down if k not in down_all]
        previous = counters
        previous_start = start if start is not None else previous_start
        previous_maxima = maxima
    window.resets = list(down_all)
    if restarts:
        integrity.broken("restart", "; ".join(restarts))
    if down_all:
        named = ", ".join(down_all[:_NAMED]) + (f" and {len(down_all) - _NAMED} more" if len(down_all) > _NAMED else "")
        integrity.broken("counter_reset", f"{len(down_all)} counter series went down between scrapes: {named}")
    for detail in partial:
        integrity.broken("inconsistent", detail)
    since_restart = bool(restarts) and not partial
    integrity.part = "since_restart" if since_restart else None
    return since_restart


def _check_series(window: PromWindow, snaps: list[PromSnapshot]) -> set[str]:
    """Mark the window not whole when a scrape holds one series twice (``duplicate_series``: which value is the
    count cannot be told, and one of them taken as it were gave an exact-looking figure, 0 tok/s) or a counter
    whose value is NaN or infinite (``non_finite``: it was dropped, and its figure with it, without a word).
    Returns the counter series with a value that is not finite, which give no difference."""
    duplicated: dict[str, list[float]] = {}
    for snap in snaps:
        for key, values in snap.duplicates.items():
            duplicated.setdefault(key, values)
    if duplicated:
        shown = [f"{key} ({' and '.join(f'{v:g}' for v in values)})" for key, values in duplicated.items()]
        more = f" and {len(shown) - _NAMED} more" if len(shown) > _NAMED else ""
        window.integrity.broken(
            "duplicate_series",
            f"{len(shown)} series came twice in one scrape: {', '.join(shown[:_NAMED])}{more}",
        )
    bad: dict[str, float] = {}
    for snap in snaps:
        for key, value in snap.values.items():
            if not math.isfinite(value) and snap.kind(snap.names[key]) == "counter" and key not in bad:
                bad[key] = value
    if bad:
        shown = [f"{key} = {value}" for key, value in bad.items()]
        more = f" and {len(shown) - _NAMED} more" if len(shown) > _NAMED else ""
        window.integrity.broken(
            "non_finite", f"{len(shown)} counter series were NaN or infinite: {', '.join(shown[:_NAMED])}{more}"
        )
    return set(bad)


def _withhold(window: PromWindow, since_restart: bool) -> None:
    """No figure from a window that is not whole: none at all, or (since a restart) those from counters only."""
    figures = ("accept_len", "acceptance_rate", "gen_throughput", "per_position_acceptance")
    if window.integrity.whole:
        window.exactness = {k: v for k, v in window.exactness.items() if _value(window, k) is not None}
        return
    if not since_restart:
        window.accept_len = window.acceptance_rate = window.gen_throughput = None
        window.per_position = None
        window.exactness = {}
        window.details = {"withheld": "the window is not whole (integrity): no figure comes from it"}
        return
    window.gen_throughput = None  # the seconds between the restart and the after scrape are not known
    for figure in figures:
        entry = window.exactness.get(figure)
        if entry is not None and entry.get("kind") == "gauge":
            _set(window, figure, None)  # a gauge's samples span both processes
    kept: dict[str, dict[str, object]] = {}
    for figure in figures:
        entry = window.exactness.get(figure)
        if entry is None or _value(window, figure) is None:
            continue
        note = str(entry.get("note") or "")
        kept[figure] = {**entry, "note": note + "; over the part since the restart: the after scrape's counts"}
    window.exactness = kept
    window.details = {k: v for k, v in window.details.items() if not k.startswith("gauge_")}
    window.details["since_restart"] = (
        "the figures are the new process's counts since its start (the after scrape alone); no throughput (the "
        "seconds from the restart to the after scrape are not known), no gauge figure (its samples span both "
        "processes)"
    )
    if window.details.get("accept_len_source") == "gauges":
        window.details["accept_len_source"] = None


def _value(window: PromWindow, figure: str) -> object:
    return window.per_position if figure == "per_position_acceptance" else getattr(window, figure, None)


def _set(window: PromWindow, figure: str, value: None) -> None:
    if figure == "per_position_acceptance":
        window.per_position = value
    else:
        setattr(window, figure, value)


def _no_steps(prefix: str, drafts: float | None, draft_tokens: float | None) -> dict[str, str]:
    """Why a figure is absent when its counter is there but did not move: a window with no verify step (no draft
    proposed) has no accept length and no acceptance rate, and no gauge stands in for them (vLLM and llama.cpp
    export none for these figures)."""
    absent: dict[str, str] = {}
    if drafts == 0:
        why = f"no verify steps in the window: d({prefix}spec_decode_num_drafts_total) = 0"
        absent["accept_len"] = absent["per_position_acceptance"] = why
    if draft_tokens == 0:
        absent["acceptance_rate"] = f"no draft tokens in the window: d({prefix}spec_decode_num_draft_tokens_total) = 0"
    return absent


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
    if generated is not None and window.elapsed_s and window.integrity.whole:
        window.gen_throughput = generated / window.elapsed_s
    window.details = {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "generated": generated}
    absent = _no_steps(prefix, drafts, draft_tokens)
    if absent:
        window.details["no_figure"] = absent
    engine.derive_prometheus(window, after, generated, version)
