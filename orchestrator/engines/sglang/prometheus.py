"""SGLang's ``/metrics``: the window's figures from the tokenizer's counters, the scheduler gauges as fallback.

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

How exact each figure is (``exactness``): the counters are integer counts in prometheus_client, written
losslessly (prometheus_client/utils.py ``floatToGoString``), so a figure from their differences is ``exact``. A
gauge holds its group's last decode-log interval only (``report_decode_stats`` sets it every
``--decode-log-interval`` decode batches, 40 by default, about a second at speed; ``gen_throughput`` decays to 0
after 30 s without one, ``_current_gen_throughput``): a figure from gauges is a ``gauge``, the last ~interval's
value at the scrapes, never the window's. That is accept length without the verify counter (SGLang < 0.5.13),
``acceptance_rate`` without the verify counter or without the ``sglang:spec_num_draft_tokens`` gauge (SGLang has
no draft counter; the counters give committed drafts, ``generation_tokens - num_requests - spec_verify_calls``,
and that gauge, set from the draft worker's ``speculative_num_draft_tokens`` with every Decode line, gives the
proposed ones per verify step: metrics_reporter.py ``_active_spec_config_snapshot``), and ``gen_throughput`` when
the window's seconds are not known. In a window that is not whole (orchestrator/metrics/prometheus.py) the gauges
are not read: their samples may span two processes.
"""

from __future__ import annotations

from typing import Any

from orchestrator.engines.exposition import PromSnapshot, PromWindow, by_name
from orchestrator.engines.integrity import exactness
from orchestrator.engines.sglang.log import accept_rate_definition
from orchestrator.engines.sglang.overshoot import COMMITTED_NOTE

__all__ = ["COPY_LABELS", "DEFINITIONS", "PREFIX", "RATE_HELP_DRAFTS_ONLY", "RATE_HELP_INCL_BONUS", "derive"]

PREFIX = "sglang:"

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "SGLang: tokens per verify step, bonus included, the prefill's first "
        "token excluded: (d(sglang:generation_tokens_total) - d(sglang:num_requests_total)) / "
        "d(sglang:spec_verify_calls_total), all series summed, over the requests that finished between the "
        "scrapes (observability/metrics_collector.py observe_one_finished_request increments the three "
        "together: completion tokens, 1, and the request's verify calls when > 0; each completion's first "
        "token comes from prefill). SGLang's own formula, completion tokens / verify calls (as meta_info "
        "spec_accept_length), is details.accept_len_engine. Without sglang:num_requests_total no accept_len (the "
        "counters give SGLang's own only, details.accept_len_engine; a counter comes before a gauge). Without "
        "the verify counter (SGLang < 0.5.13) the "
        "sglang:spec_accept_length gauges: per DP group the mean of the non-zero samples during and at the "
        "end of the window, groups weighted by verify rate (gen_throughput / accept length)."
    ),
    "acceptance_rate": (
        "SGLang: drafts committed per draft proposed, (d(sglang:generation_tokens_total) - "
        "d(sglang:num_requests_total) - d(sglang:spec_verify_calls_total)) / (d(sglang:spec_verify_calls_total) x "
        "(speculative_num_draft_tokens - 1)), the last from the sglang:spec_num_draft_tokens gauge (one value "
        "through the window; metrics_reporter.py _active_spec_config_snapshot): each verify step commits one token "
        "of its own and the drafts it keeps. SGLang's own rate also counts drafts accepted past a request's end "
        "(overshoot.py). Without those, the "
        "sglang:spec_accept_rate gauges (the last decode-log interval only), combined over DP groups like "
        "accept_len, only when their HELP text "
        "(or the server version given) says drafts only ('accepted drafts / proposed drafts', sglang >= "
        "0.5.11); the older definition ('accepted tokens / total draft tokens', bonus counted) goes to "
        "details.acceptance_rate_incl_bonus, an unknown one to details.gauge_acceptance_rate only."
    ),
    "gen_throughput": (
        "d(sglang:generation_tokens_total) / elapsed seconds when both are known; else the "
        "sglang:gen_throughput gauges: per DP group the mean of the non-zero samples, summed over groups "
        "(copies of a group counted once)."
    ),
}

# SGLang's scheduler gauge labels that tell copies of one DP group's figures apart (lines.py RANK_TAGS).
COPY_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank"})
# metrics_collector.py HELP of sglang:spec_accept_rate: 0.5.11+ / <= 0.5.10.
RATE_HELP_DRAFTS_ONLY = "accepted drafts / proposed drafts"
RATE_HELP_INCL_BONUS = "accepted tokens / total draft tokens"


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
        group = tuple(sorted((k, v) for k, v in labels.items() if k not in COPY_LABELS))
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


def derive(window: PromWindow, after: PromSnapshot, generated: float | None, version: str | None) -> None:
    """SGLang: the tokenizer's counters first (exact), the scheduler gauges as fallback and cross-check."""
    prefix = PREFIX
    verifies = by_name(window.counters, after.names, f"{prefix}spec_verify_calls_total")
    finished = by_name(window.counters, after.names, f"{prefix}num_requests_total")
    gauges = window.integrity.whole  # a broken window's gauge samples may span two processes
    lengths = _group_means(window, after, f"{prefix}spec_accept_length") if gauges else {}
    rates = _group_means(window, after, f"{prefix}spec_accept_rate") if gauges else {}
    throughputs = _group_means(window, after, f"{prefix}gen_throughput") if gauges else {}
    gauge_len = _combine_lengths(lengths, throughputs)
    gauge_rate = _combine_lengths(rates, throughputs) if rates else None
    gauge_throughput = sum(throughputs.values()) if throughputs else None
    help_text = after.helps.get(f"{prefix}spec_accept_rate", "")
    if RATE_HELP_DRAFTS_ONLY in help_text:
        rate_definition = "drafts_only"
    elif RATE_HELP_INCL_BONUS in help_text:
        rate_definition = "incl_bonus"
    else:  # no HELP (or prometheus_client's "Multiprocess metric"): the version decides, if given
        rate_definition = accept_rate_definition(version)
    engine_len = generated / verifies if verifies and generated is not None else None
    idle = _idle(verifies, generated, finished)
    source = None
    if idle is not None:
        # The counters are there and say no verify step (or no request) entered the window: no accept length
        # or rate, whatever the gauges hold (the last decode-log interval before the window).
        window.details["no_figure"] = {"accept_len": idle, "acceptance_rate": idle}
    elif verifies and generated is not None and finished is not None:
        window.accept_len = (generated - finished) / verifies
        source = "counters"
    elif verifies and generated is not None:
        # No sglang:num_requests_total: the counters give SGLang's own accept length (completion tokens / verify
        # calls, details.accept_len_engine, exact) but not the committed one, which leaves out each request's
        # prefill token. A counter in any definition comes before a gauge: no accept_len from the gauges.
        window.details.setdefault("no_figure", {})["accept_len"] = (
            "no sglang:num_requests_total counter: the committed accept length, (d(generation_tokens) - "
            "d(num_requests)) / d(spec_verify_calls), is not known; SGLang's own definition, d(generation_tokens) "
            "/ d(spec_verify_calls), is details.accept_len_engine (exact), the gauges details.gauge_accept_len"
        )
    elif gauge_len is not None:
        window.accept_len = gauge_len
        source = "gauges"
    draft_tokens, draft_note = _draft_tokens(window, after)
    adaptive = window.server_settings.get("speculative_adaptive")
    rate_source = None
    counted = source == "counters" and verifies and generated is not None and finished is not None
    if counted and verifies and generated is not None and finished is not None:
        # Committed drafts per verify step, from the counters alone: exact whatever the draft length.
        window.details["committed_drafts_per_verify"] = (generated - finished - verifies) / verifies
    if counted and adaptive and verifies and generated is not None and finished is not None:
        # --speculative-adaptive: the draft length changes per batch and no counter counts proposed drafts; the
        # gauge is the draft worker's length at the last Decode line only (ADAPTIVE_NOTE).
        window.details.setdefault("no_figure", {})["acceptance_rate"] = ADAPTIVE_NOTE
        window.details["acceptance_rate_if_gauge_held"] = (
            (generated - finished - verifies) / (verifies * (draft_tokens - 1)) if draft_tokens else None
        )
    elif counted and verifies and generated is not None and finished is not None and draft_tokens:
        # Committed drafts: each verify step commits one token of its own (the bonus, or the target's token
        # where every draft was rejected) and the drafts it accepted; the prefill commits the first token.
        window.acceptance_rate = (generated - finished - verifies) / (verifies * (draft_tokens - 1))
        rate_source = "counters" if adaptive is False else "counters_and_gauge"
    elif idle is None and gauge_rate is not None and rate_definition == "drafts_only":
        window.acceptance_rate = gauge_rate
        rate_source = "gauges"
    throughput_source = "counters" if window.gen_throughput is not None else None
    if window.gen_throughput is None and generated == 0:
        window.gen_throughput = 0.0  # no token counted: 0 tok/s over any seconds, not the last interval's gauge
        throughput_source = "counters"
    elif window.gen_throughput is None and gauge_throughput is not None and idle is None:
        window.gen_throughput = gauge_throughput  # DP groups serve different requests: their rates add up
        throughput_source = "gauges"
    window.details["verify_calls"] = verifies
    _exactness(window, after, source, throughput_source, rate_source)
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
            "acceptance_rate_source": rate_source,
            "speculative_num_draft_tokens": draft_tokens,
        }
    )
    if draft_note is not None and source == "counters":
        window.details["no_counter_rate"] = draft_note
    if rate_definition == "incl_bonus":
        window.details["acceptance_rate_incl_bonus"] = gauge_rate


_EXACT = "integer counts of prometheus_client counters (written losslessly by floatToGoString)"

#: Why an adaptive server's /metrics give no acceptance rate (SGLang 0.5.23).
ADAPTIVE_NOTE = (
    "Under --speculative-adaptive the draft worker's step count, and with it its speculative_num_draft_tokens, "
    "changes per batch (speculative/adaptive_runtime_state.py activate_step_by_batch and on_verify_complete, "
    "candidates per batch size in adaptive_spec_params.py), while the sglang:spec_num_draft_tokens gauge holds only "
    "its value at each Decode line (metrics_reporter.py _active_spec_config_snapshot) and no counter counts the "
    "drafts proposed: the drafts committed per verify step are exact (details.committed_drafts_per_verify), the "
    "drafts proposed are not known, so no acceptance rate from /metrics (the log's accept rate weighs each "
    "interval's own draft count)"
)
_MISSING = object()


def _idle(verifies: float | None, generated: float | None, finished: float | None) -> str | None:
    """Why the window has no accept length although a counter is there, or None when it may have one.

    ``observe_one_finished_request`` adds a request's verify calls when it finishes, so a difference of 0 is a
    window with no verify step among the requests that finished in it: an answer, not a missing counter. Without
    the verify counter (< 0.5.13), a window in which no request finished (``generation_tokens`` and
    ``num_requests`` unchanged) is idle too: its gauges still hold the interval before it."""
    if verifies == 0:
        return (
            "no verify steps in the window: d(sglang:spec_verify_calls_total) = 0 (no request with verify calls "
            "finished between the scrapes); the spec gauges hold the last decode-log interval before it, not read"
        )
    if verifies is None and generated == 0 and finished in (0, None):
        return (
            "no request finished in the window: d(sglang:generation_tokens_total) = 0 (no verify counter, "
            "SGLang < 0.5.13); the spec gauges hold the last decode-log interval before it, not read"
        )
    return None


def _samples(window: PromWindow, after: PromSnapshot, name: str) -> int:
    counts = [int(v.get("samples") or 0) for k, v in window.gauges.items() if after.names.get(k) == name]
    return max(counts, default=0)


def _gauge_note(window: PromWindow, after: PromSnapshot, name: str, what: str) -> str:
    n = _samples(window, after, f"{PREFIX}{name}")
    return (
        f"{what}: the {PREFIX}{name} gauges, each DP group's value for its last decode-log interval only "
        "(metrics_reporter.py report_decode_stats sets it every --decode-log-interval decode batches, about the "
        f"last second), the mean of the non-zero values of {n} scrape(s) during and at the end of the window: the "
        "last ~interval's value, not a figure of the whole window"
    )


def _draft_tokens(window: PromWindow, after: PromSnapshot) -> tuple[int | None, str | None]:
    """``speculative_num_draft_tokens`` through the window, from the ``sglang:spec_num_draft_tokens`` gauges
    (metrics_collector.py; set with each Decode line from ``_active_spec_config_snapshot``,
    metrics_reporter.py report_decode_stats), or (None, why not): it must be one value > 1 at both scrapes and
    in between (an adaptive drafter that changes it in the window has no single denominator)."""
    name = f"{PREFIX}spec_num_draft_tokens"
    seen: set[float] = set()
    for key, stats in window.gauges.items():
        if after.names.get(key) != name:
            continue
        seen.update(v for k in ("before", "after", "min", "max") if isinstance(v := stats.get(k), int | float) and v)
    if not seen:
        return None, f"no {name} gauge with a value (speculation off, or SGLang older than 0.5.23)"
    if len(seen) > 1:
        return None, f"{name} changed in the window ({', '.join(f'{v:g}' for v in sorted(seen))}): no one denominator"
    value = next(iter(seen))
    if not float(value).is_integer() or value <= 1:
        return None, f"{name} = {value:g}: no drafts proposed per verify step"
    return int(value), None


def _exactness(
    window: PromWindow,
    after: PromSnapshot,
    length_source: str | None,
    rate_source: str | None,
    acceptance_source: str | None = None,
) -> None:
    """``exactness`` of each figure derive gave: the counters' figures exact, the gauges' a last-interval gauge."""
    if window.accept_len is not None:
        window.exactness["accept_len"] = (
            exactness(
                "exact",
                f"(d(generation_tokens) - d(num_requests)) / d(spec_verify_calls) over the requests that finished "
                f"between the scrapes: {_EXACT}",
            )
            if length_source == "counters"
            else exactness(
                "gauge",
                _gauge_note(
                    window,
                    after,
                    "spec_accept_length",
                    "no verify counter (< 0.5.13)"
                    if window.details.get("verify_calls", _MISSING) is None
                    else "no sglang:generation_tokens_total or sglang:num_requests_total counter",
                ),
            )
        )
    if window.acceptance_rate is not None:
        window.exactness["acceptance_rate"] = (
            exactness(
                "exact",
                "(d(generation_tokens) - d(num_requests) - d(spec_verify_calls)) / (d(spec_verify_calls) x "
                f"(speculative_num_draft_tokens - 1)), drafts committed per draft proposed: {_EXACT}; "
                "speculative_num_draft_tokens from the sglang:spec_num_draft_tokens gauge, one value through "
                f"the window. {COMMITTED_NOTE}",
            )
            if acceptance_source == "counters"
            else exactness(
                "gauge",
                "(d(generation_tokens) - d(num_requests) - d(spec_verify_calls)) / (d(spec_verify_calls) x "
                "(speculative_num_draft_tokens - 1)): the numerator exact, the denominator the "
                "sglang:spec_num_draft_tokens gauge, the draft worker's length at each scrape's last Decode line, "
                "taken to hold through the window: the server's settings were not given to say it does not adapt "
                f"(--speculative-adaptive). {ADAPTIVE_NOTE}",
            )
            if acceptance_source == "counters_and_gauge"
            else exactness(
                "gauge",
                _gauge_note(
                    window,
                    after,
                    "spec_accept_rate",
                    "no verify counter or no sglang:spec_num_draft_tokens gauge to divide by",
                ),
            )
        )
    if window.gen_throughput is not None:
        window.exactness["gen_throughput"] = (
            exactness(
                "exact",
                f"d(sglang:generation_tokens_total) / the seconds between the scrapes (specsweep's clock): {_EXACT}"
                + ("; no token counted in the window, so 0 over any seconds" if window.gen_throughput == 0 else ""),
            )
            if rate_source == "counters"
            else exactness(
                "gauge",
                _gauge_note(window, after, "gen_throughput", "the window's seconds not given")
                + ", summed over DP groups",
            )
        )
