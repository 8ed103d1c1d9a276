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


def _entry(note: str, step: float, bounds: tuple[float, float] | None) -> dict[str, Any]:
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
    if window.accept_len is not None and drafts is not None and accepted is not None:
        window.exactness["accept_len"] = _entry(
            "1 + d(spec_decode_num_accepted_tokens_total) / d(spec_decode_num_drafts_total)",
            max(drafts[2], accepted[2]),
            _ratio(accepted, drafts, 1.0),
        )
    if window.acceptance_rate is not None and draft_tokens is not None and accepted is not None:
        window.exactness["acceptance_rate"] = _entry(
            "d(spec_decode_num_accepted_tokens_total) / d(spec_decode_num_draft_tokens_total)",
            max(draft_tokens[2], accepted[2]),
            _ratio(accepted, draft_tokens, 0.0),
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
