"""llama.cpp's ``/metrics``: the shared counter derivation's figures, and how exact the doubles it reads are.

``llama-server`` keeps its counters as ``uint64_t`` (tools/server/server-common.h ``server_metrics``:
``n_draft_tokens``, ``n_draft_accepted``, ``n_draft_verif_steps``, ``predict.count``, ...), but writes them as
doubles: ``server_task_result_metrics::to_metrics`` (tools/server/server-task.cpp, the tree vendored in
llama-cpp-python 0.3.36) casts each to ``double`` in a ``metric_item`` and streams ``item.value`` into a
default ``std::stringstream``, whose precision is 6 significant digits in the ``%g`` style. A count below 10^6
is written in full; one of 10^6 or more is rounded to a step of 10^(e-5) for a value of 10^e .. 10^(e+1)
(``1234567`` is written ``1.23457e+06``, a step of 10). The per-position counters are the exception: the
``uint64_t`` entries of ``n_accepted_per_pos`` are streamed as integers, in full.

So a long-running server's figures are ``rounded`` (orchestrator/engines/integrity.py): each difference of two
scrapes is known to half the step of each, ``resolution`` is the largest step that entered the figure, and
``bounds`` hold every value the printed digits allow. Below 10^6 every figure is ``exact``.

Where an exact reading is among llama.cpp's own outputs, it is taken: the accepted-token total is also the sum
of the per-position counters (tools/server/server-context.cpp ``update_slots`` adds a verified draft's
``n_accepted`` to ``n_draft_accepted`` and 1 to ``n_accepted_per_pos[i]`` for each ``i < n_accepted``, the
vector sized ``common_speculative_n_max``, which bounds every draft; the slot's counts enter ``server_metrics``
together when it is released), and those are written whole. So when the printed total is rounded and the
per-position differences sum to a value its digits allow, d(accepted) is that sum (``details.accepted_source``
``per_position_sum``, the printed difference in ``details.accepted_printed``), and a figure whose other counts
are below 10^6 is ``exact``.
"""

from __future__ import annotations

import math
from typing import Any

from orchestrator.engines.exposition import PromSnapshot, PromWindow
from orchestrator.engines.integrity import exactness

__all__ = ["DIGITS", "PREFIX", "derive", "printed_step"]

PREFIX = "llamacpp:"
#: std::ostream's default precision (to_metrics sets none): significant digits of every double it writes.
DIGITS = 6

_WRITER = (
    "to_metrics (tools/server/server-task.cpp) writes each counter as a double with 6 significant digits "
    "(std::stringstream's default %g)"
)


def printed_step(value: float) -> float:
    """The rounding step of a count as to_metrics writes it: 0 below 10^6 (written in full), else the unit of its
    sixth significant digit."""
    magnitude = abs(value)
    if magnitude < 10**DIGITS:
        return 0.0
    return 10.0 ** (math.floor(math.log10(magnitude)) - (DIGITS - 1))


def _delta(window: PromWindow, after: PromSnapshot, name: str) -> tuple[float, float, float] | None:
    """(difference, its error bound, the largest step) of counter ``name`` over the window."""
    keys = [k for k in window.counters if after.names.get(k) == PREFIX + name]
    if not keys:
        return None
    total = error = step = 0.0
    for key in keys:
        late = after.values[key]
        early = late - window.counters[key]  # the before scrape's value (0 when the counts start at zero)
        steps = (printed_step(late), printed_step(early))
        total += window.counters[key]
        error += sum(steps) / 2
        step = max(step, *steps)
    return total, error, step


def _ratio(
    num: tuple[float, float, float], den: tuple[float, float, float], offset: float
) -> tuple[float, float] | None:
    low_den, high_den = den[0] - den[1], den[0] + den[1]
    if low_den <= 0:
        return None
    return offset + max(num[0] - num[1], 0.0) / high_den, offset + (num[0] + num[1]) / low_den


_SUMMED = (
    "d(accepted) is the per-position counters' sum, streamed as integers in full, which is the accepted total "
    "(tools/server/server-context.cpp update_slots counts each accepted position once; the printed total "
    "d(spec_decode_num_accepted_tokens_total) is rounded, details.accepted_printed)"
)


def _entry(note: str, step: float, bounds: tuple[float, float] | None, *, summed: bool = False) -> dict[str, Any]:
    if step == 0 and summed:
        return exactness("exact", f"{note}: {_SUMMED}; the other counts below 10^6, so written in full ({_WRITER})")
    if step == 0:
        return exactness("exact", f"{note}: every count below 10^6, so written in full ({_WRITER})")
    return exactness(
        "rounded",
        f"{note}: {_WRITER}, so counts of 10^6 or more are rounded (the largest step here {step:g}); each "
        "difference is known to half the step of each scrape's value, and the bounds hold every value the "
        "printed digits allow",
        resolution=step,
        bounds=bounds,
    )


def derive(window: PromWindow, after: PromSnapshot, generated: float | None, version: str | None) -> None:
    """Say how exact each figure the shared derivation gave is (the module docstring)."""
    del generated, version
    drafts = _delta(window, after, "spec_decode_num_drafts_total")
    draft_tokens = _delta(window, after, "spec_decode_num_draft_tokens_total")
    accepted = _delta(window, after, "spec_decode_num_accepted_tokens_total")
    predicted = _delta(window, after, "tokens_predicted_total")
    accepted = _exact_accepted(window, after, accepted, drafts, draft_tokens)
    summed = window.details.get("accepted_source") == "per_position_sum"
    accepted_note = "the per-position counters' sum" if summed else "spec_decode_num_accepted_tokens_total"
    if window.accept_len is not None and drafts is not None and accepted is not None:
        window.exactness["accept_len"] = _entry(
            f"1 + d({accepted_note}) / d(spec_decode_num_drafts_total)",
            max(drafts[2], accepted[2]),
            _ratio(accepted, drafts, 1.0),
            summed=summed,
        )
    if window.acceptance_rate is not None and draft_tokens is not None and accepted is not None:
        window.exactness["acceptance_rate"] = _entry(
            f"d({accepted_note}) / d(spec_decode_num_draft_tokens_total)",
            max(draft_tokens[2], accepted[2]),
            _ratio(accepted, draft_tokens, 0.0),
            summed=summed,
        )
    if window.per_position is not None and drafts is not None:
        window.exactness["per_position_acceptance"] = _entry(
            "d(spec_decode_num_accepted_tokens_per_pos_total{position}) / d(spec_decode_num_drafts_total), the "
            "per-position counts streamed as integers, in full",
            drafts[2],
            None,
        )
    if window.gen_throughput is not None and predicted is not None and window.elapsed_s:
        seconds = window.elapsed_s
        window.exactness["gen_throughput"] = _entry(
            "d(tokens_predicted_total) / the seconds between the scrapes (specsweep's clock)",
            predicted[2],
            (max(predicted[0] - predicted[1], 0.0) / seconds, (predicted[0] + predicted[1]) / seconds),
        )


def _exact_accepted(
    window: PromWindow,
    after: PromSnapshot,
    accepted: tuple[float, float, float] | None,
    drafts: tuple[float, float, float] | None,
    draft_tokens: tuple[float, float, float] | None,
) -> tuple[float, float, float] | None:
    """d(accepted) from the per-position counters (written whole) when the printed total is rounded and their sum
    is a value its digits allow (the module docstring); the figures that use it are computed again from it."""
    keys = [
        k for k in window.counters if after.names.get(k) == PREFIX + "spec_decode_num_accepted_tokens_per_pos_total"
    ]
    if accepted is None or accepted[2] == 0 or not keys:
        return accepted
    total = sum(window.counters[k] for k in keys)
    if abs(total - accepted[0]) > accepted[1] or not float(total).is_integer():
        window.details["accepted_per_position_sum"] = total  # not the total's: kept aside, the rounded total read
        return accepted
    window.details.update({"accepted": total, "accepted_printed": accepted[0], "accepted_source": "per_position_sum"})
    if drafts is not None and drafts[0] > 0 and window.accept_len is not None:
        window.accept_len = 1.0 + total / drafts[0]
    if draft_tokens is not None and draft_tokens[0] > 0 and window.acceptance_rate is not None:
        window.acceptance_rate = total / draft_tokens[0]
    return total, 0.0, 0.0
