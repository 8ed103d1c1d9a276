"""Drafts SGLang accepts past a request's end: in its Decode line and its per-request draft count, not committed.

A verify step accepts a run of up to ``speculative_num_draft_tokens`` tokens per request, drafts and bonus
(speculative/eagle_utils.py ``eagle_sample``, called by speculative/ngram_worker.py
``forward_batch_generation``; neither looks at ``max_new_tokens`` or a stop token). The scheduler then
(python/sglang/srt/managers/scheduler_components/batch_result_processor.py, sglang 0.5.23):

- adds the whole run to the log's interval sums: ``process_batch_result_decode`` (lines 983-991) passes
  ``result.get_num_generated_tokens(batch_size)`` (managers/utils.py 164: ``num_correct_drafts`` + one per
  request) and ``result.num_correct_drafts`` (``_resolve_spec_v2_tokens`` lines 785-788: each request's
  ``accept_lens - 1``) to ``metrics_reporter.update_spec_metrics``, which the ``Decode batch`` line prints as
  ``accept len`` and ``accept rate`` (scheduler_components/metrics_reporter.py ``report_decode_stats``);
- adds the run's drafts to the request's ``spec_num_correct_drafts`` (line 835), which ``meta_info`` and
  ``sglext.spec_tokens_details`` give as ``spec_num_correct_drafts`` and use in ``spec_accept_rate``
  (managers/tokenizer_manager.py ``_calculate_spec_decoding_metrics``);
- and only then appends the run to ``req.output_ids`` (line 1046) and calls ``Req.update_finish_state``
  (managers/schedule_batch.py 2007-2042), which ends the request at ``max_new_tokens`` (``finished_len`` =
  the cap) or at a stop token inside the run. ``output_ids_through_stop`` (schedule_batch.py 1509-1513) cuts
  the run there, so ``completion_tokens`` (scheduler_components/output_streamer.py 490-525), and with it
  ``sglang:generation_tokens_total`` (observability/metrics_collector.py ``observe_one_finished_request``)
  and ``spec_accept_length`` = completion_tokens / spec_verify_ct, count only what the request kept.

So over a window the log's ``accept len`` counts ``D`` tokens more than were committed, ``D`` the drafts each
request's last verify step accepted past its end; at most ``speculative_num_draft_tokens - 1`` per request
(its last step keeps at least one token), in practice a few per request that ends on the length cap (1-2 %
of the accept length at 48-96 tokens per request). Per response ``D`` is exact:
``spec_num_correct_drafts - (completion_tokens - 1 - spec_verify_ct)`` (each verify step commits one token
of its own and the drafts it keeps; the prefill commits the first), which :func:`discarded_drafts` gives and
the sweep subtracts from the log's figures (:func:`correct_log`). Without the responses the log's figures are
labelled ``bounded``: the committed value is at most the printed one, by at most ``(num_draft_tokens - 1) x
requests ending in the window / verify steps``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from orchestrator.engines.integrity import exactness

__all__ = [
    "COMMITTED_NOTE",
    "LOG_NOTE",
    "OVERLAP_NOTE",
    "correct_log",
    "discarded_drafts",
    "label_log",
    "overlap_bounds",
]

#: What the counters' acceptance rate counts, against SGLang's own.
COMMITTED_NOTE = (
    "Drafts committed: SGLang's own 'accept rate' (the Decode line, meta_info spec_accept_rate) also counts "
    "drafts a request's last verify step accepted past max_new_tokens or a stop token, which the request then "
    "discards (orchestrator/engines/sglang/overshoot.py)"
)
#: Why a Decode line's figures read high.
LOG_NOTE = (
    "the Decode line counts every token a verify step accepted, including drafts past max_new_tokens or a stop "
    "token that the request then discards (scheduler_components/batch_result_processor.py "
    "process_batch_result_decode adds the run to the interval's sums before Req.update_finish_state cuts it, "
    "schedule_batch.py; completion_tokens and sglang:generation_tokens_total count only what is kept)"
)


def discarded_drafts(spec: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(D, verify steps)`` over a window's responses (``client.spec``, orchestrator/load/spec.py
    ``summarize_spec``): ``D`` = accepted drafts - (committed tokens - verify steps), the drafts SGLang
    accepted past the requests' ends; None unless every response with verify steps gave its drafts."""
    steps, accepted = spec.get("verify_steps"), spec.get("accepted_drafts")
    length = spec.get("accept_len")
    with_steps, with_drafts = spec.get("responses_with_verify_steps"), spec.get("responses_with_drafts")
    if not isinstance(steps, int) or steps <= 0 or not isinstance(accepted, int) or length is None:
        return None
    if with_steps != with_drafts:
        return None
    committed_tokens = round(float(length) * steps)  # sum of (completion_tokens - 1): accept_len's numerator
    discarded = accepted - (committed_tokens - steps)
    return (discarded, steps) if discarded >= 0 else None


def correct_log(window: Any, spec: Mapping[str, Any]) -> None:
    """The log's accept length and acceptance rate (``window``: a WindowMetrics) less what the window's requests
    discarded past their ends, when the responses say it (:func:`discarded_drafts`); else the log's figures are
    labelled bounded by how much they may read high (:func:`label_log`). The responses' own ``acceptance_rate``
    (``spec``, the client's summary, changed in place) becomes the committed one too, SGLang's kept as
    ``acceptance_rate_engine`` and the count as ``drafts_past_end``: all three sources then count drafts as the
    counters do."""
    if window.accept_len is None:
        return
    found = discarded_drafts(spec)
    if found is None:
        label_log(window)
        return
    discarded, steps = found
    shift = discarded / steps
    proposed = spec.get("proposed_drafts")
    rate_shift = shift * steps / proposed if isinstance(proposed, int) and proposed > 0 else None
    already = "acceptance_rate_engine" in spec  # the summary gave the committed rate (load/spec.py)
    if (
        isinstance(spec, MutableMapping)
        and rate_shift is not None
        and spec.get("acceptance_rate") is not None
        and not already
    ):
        # The responses' rate as the counters count it (drafts committed); SGLang's own beside it.
        spec["acceptance_rate_engine"] = spec["acceptance_rate"]
        spec["acceptance_rate"] = spec["acceptance_rate"] - rate_shift
        spec["drafts_past_end"] = discarded
        definitions = spec.get("definitions")
        if isinstance(definitions, MutableMapping):
            definitions["acceptance_rate"] = (
                "(sum of accepted drafts - drafts past the requests' ends) / sum of proposed drafts: "
                f"{COMMITTED_NOTE}; "
                "SGLang's own spec_num_correct_drafts / spec_num_proposed_drafts is acceptance_rate_engine"
            )
    window.details["past_end"] = {
        "discarded_drafts": discarded,
        "verify_steps": steps,
        "accept_len_printed": window.accept_len,
        "acceptance_rate_printed": window.acceptance_rate,
        "from": "the window's responses: spec_num_correct_drafts - (completion_tokens - 1 - spec_verify_ct)",
    }
    window.accept_len -= shift
    if window.acceptance_rate is not None and rate_shift is not None:
        window.acceptance_rate -= rate_shift
    rows = spec.get("requests_with_verify_steps")
    per_step = proposed / steps if isinstance(proposed, int) and proposed > 0 else None
    for figure, amount, floor in (("accept_len", shift, 1.0), ("acceptance_rate", rate_shift, 0.0)):
        entry = window.exactness.get(figure)
        if not isinstance(entry, dict) or amount is None or getattr(window, figure) is None:
            continue
        bounds = entry.get("bounds")
        # Every verify step commits at least one token (accept length >= 1, rate >= 0).
        moved = (max(floor, bounds[0] - amount), bounds[1] - amount) if isinstance(bounds, list | tuple) else None
        overlap = ""
        if moved is not None and isinstance(bounds, list | tuple):
            wide = overlap_bounds(
                figure, (bounds[0], bounds[1]), discarded, steps, rows, per_step, proposed if rate_shift else None
            )
            if wide is not None:
                moved = (max(floor, min(moved[0], wide[0])), max(moved[1], wide[1]))
                overlap = f"; {OVERLAP_NOTE}"
            if not moved[0] <= getattr(window, figure) <= moved[1]:
                setattr(window, figure, min(max(getattr(window, figure), moved[0]), moved[1]))
        window.exactness[figure] = exactness(
            "bounded" if overlap else entry["kind"],
            f"{entry['note']}; less {amount:.6g}: {discarded} drafts accepted past the requests' ends over "
            f"{steps} verify steps, from the window's responses ({LOG_NOTE}){overlap}",
            resolution=entry.get("resolution"),
            bounds=moved,
        )


#: Why a reconciled log figure's bounds are wider than its printed ones less the drafts past the ends.
OVERLAP_NOTE = (
    "under the overlap schedule (SGLang's default on GPUs) a request that finished in one batch's result is already "
    "in the next batch: that batch's verify tick for its row enters the Decode line's sums (batch_result_processor.py "
    "process_batch_result_decode passes batch.batch_size() and the whole batch's num_correct_drafts to "
    "update_spec_metrics) but not the request's own counts (_resolve_spec_v2_tokens skips a finished req), so the "
    "line holds up to one extra verify step per request with verify steps, committing nothing, its bonus token "
    "and 0 to (num draft tokens - 1) drafts: the bounds take every such count (the responses give neither)"
)


def overlap_bounds(
    figure: str,
    printed: tuple[float, float],
    discarded: int,
    steps: int,
    rows: Any,
    per_step: float | None,
    proposed: int | None,
) -> tuple[float, float] | None:
    """The committed figure's bounds when up to ``rows`` extra verify ticks (one per finished request, the overlap
    schedule: OVERLAP_NOTE) entered the log's sums: F extra ticks of 1 token plus C drafts each (0 <= C <= F x
    ``per_step``, the drafts a verify step proposes) besides the ``discarded`` drafts past the ends. With the log's
    value L = (T + discarded + F + C) / (steps + F) for accept length (rate: (Dc + discarded + C) / (proposed +
    F x per_step)), the committed T / steps is largest at F = rows, C = 0 and smallest at F = rows, C = F x per_step
    (L <= 1 + per_step). None when a count is missing."""
    if not isinstance(rows, int) or rows <= 0 or per_step is None:
        return None
    low, high = printed
    if figure == "accept_len":
        top = (high * (steps + rows) - discarded - rows) / steps
        bottom = (low * (steps + rows) - discarded - rows * (1 + per_step)) / steps
        return min(bottom, low - discarded / steps), max(top, high - discarded / steps)
    if proposed is None or proposed <= 0:
        return None
    extra = rows * per_step
    top = (high * (proposed + extra) - discarded) / proposed
    bottom = (low * (proposed + extra) - discarded - extra) / proposed
    return min(bottom, low - discarded / proposed), max(top, high - discarded / proposed)


def label_log(window: Any) -> None:
    """No responses to say what was discarded: the log's accept length and rate become ``bounded`` below by
    what the window's requests may have discarded (at most num_draft_tokens - 1 each; every verify step
    commits at least one token, so the committed accept length is at least 1)."""
    for figure, floor in (("accept_len", 1.0), ("acceptance_rate", 0.0)):
        entry = window.exactness.get(figure)
        value = getattr(window, figure)
        if not isinstance(entry, dict) or value is None:
            continue
        bounds = entry.get("bounds")
        high = bounds[1] if isinstance(bounds, list | tuple) and len(bounds) == 2 else value
        window.exactness[figure] = exactness(
            "bounded",
            f"{entry['note']}; and {LOG_NOTE}: the committed value is at most the printed one, lower by the "
            "drafts discarded per verify step, at most (speculative_num_draft_tokens - 1) x requests ending in "
            "the window / verify steps (neither is in the log; the responses give them: "
            "orchestrator/engines/sglang/overshoot.py)",
            bounds=(floor, high),
        )
