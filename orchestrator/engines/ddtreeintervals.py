"""Each DDTree interval's accepted depth against its own commit length, beyond what length caps explain.

A ``DDTREE metrics:`` line averages its interval's (request, step) pairs: ``avg_accepted_depth`` levels walked,
``avg_commit_len`` tokens committed (ddtreelog.py). In a chain the commit is the accepted drafts plus the bonus token,
so a step commits at least its depth; a window's mean can hide intervals where it did not (the field report's
commit-path bug: depth 5.00, commit 2.00). But one step per request may commit less on a healthy server: the
request's last, whose commit its length cap (``max_tokens``) or a stop token cuts while the walk's depth is not
(the simulator's ``SimRequest.generate``, orchestrator/sim/request.py; the single-chain playbook printed
``avg_accepted_drafts=4.20 avg_commit_len=4.00`` on 1 of 58 intervals). So the check bounds what those last
steps can explain (:data:`DEFINITION`):

- a last step commits at least one token and walks at most ``budget`` levels (a tree of ``budget`` drafted
  nodes is at most that deep), so it puts the interval's depth above its commit by at most ``budget - 1``
  tokens; every other step puts it below or level;
- an interval whose per-request excess ``e`` (depth - commit, less the two ``%.2f`` roundings) is above
  ``budget - 1`` is impossible whatever its step count; otherwise it needs at least ``R * e / (budget - 1)``
  requests to end in it, ``R`` its (request, step) pairs: at least ``steps * max(1, bs - 0.5)`` (every step
  serves one request or more; ``bs`` is ``R / steps`` rounded), rounded up (requests end whole);
- each request ends once, so the intervals above their commit length together need no more requests than the
  window's load sent (its measured and warm-up requests).

``steps`` is the interval's decode steps, which the line does not print: SGLang's ``--decode-log-interval``
(the server's reported ``decode_log_interval``) when the window has no more DDTree lines than SGLang
``Decode batch`` lines (a DDTree line follows each: orchestrator/engines/sglang/simdialect.py ``_decode_line``;
SGLang prints one per that many decode batches, metrics_reporter.py report_decode_stats), else 1, which only
weakens the bound. The first line of each DP group of a cut window began before it (the edge of
orchestrator/metrics/window.py) and is not checked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.engines.lines import ranks_info

__all__ = [
    "DEFINITION",
    "LINES_DEFINITION",
    "PRINT_SLACK",
    "check_intervals",
    "flag_lines",
    "flag_window",
    "steps_per_line",
]

#: Both figures are printed with two decimals (``%.2f``): less than both roundings together (0.01, and float
#: noise) is no evidence.
PRINT_SLACK = 0.011
_EXAMPLES = 3

DEFINITION = (
    "DDTree intervals checked one by one (orchestrator/engines/ddtreeintervals.py): an interval whose "
    "avg_accepted_depth is above its avg_commit_len (beyond the %.2f roundings) is explained only by "
    "requests whose last step a length cap or a stop token cut; each such step explains at most budget - "
    "1 tokens of excess, so the interval needs at least steps x max(1, bs - 0.5) x excess / (budget - 1) "
    "requests (rounded up) to end in it. details.ddtree_impossible_intervals counts the intervals no such "
    "end explains: those above budget - 1 per request, or every interval above its commit length when "
    "together they need more requests to end (details.ddtree_ends_needed) than the window's load sent "
    "(details.ddtree_ends_possible). steps: the server's decode_log_interval when each DDTree line "
    "follows a Decode batch line, else 1 (details.ddtree_steps_per_line)."
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value) if abs(value) != float("inf") else None


def steps_per_line(settings: Mapping[str, Any] | None, ddtree_lines: int, decode_lines: int | None) -> int:
    """The decode steps one DDTree line is known to cover at least: the server's ``decode_log_interval`` when
    the window has no more DDTree lines than Decode batch lines (both counted without the window's edge lines),
    else 1."""
    interval = _number((settings or {}).get("decode_log_interval"))
    if interval is None or interval < 1 or decode_lines is None or ddtree_lines > decode_lines:
        return 1
    return int(interval)


def check_intervals(
    lines: Iterable[tuple[Mapping[str, Any], str | None]],
    *,
    requests: float | None,
    steps: int = 1,
    cut: bool = True,
) -> dict[str, Any]:
    """The window's verdict on its DDTree lines (``(values, ranks)`` each, in log order), as
    ``details`` keys: ``ddtree_intervals_checked``, ``ddtree_intervals_above`` (depth above commit beyond the
    rounding), ``ddtree_ends_needed`` (requests those intervals need to end in them), ``ddtree_ends_possible``
    (``requests``, the load's), ``ddtree_steps_per_line``, ``ddtree_impossible_intervals`` and up to three
    ``ddtree_impossible_examples`` (one text, `` | `` between; module docstring). ``cut``: the first line of
    each DP group began before the window and is not checked. ``requests`` None: no bound from the load, only
    the per-request one."""
    seen: set[str] = set()
    checked = above = beyond = 0
    needed = 0.0
    examples: list[str] = []
    above_examples: list[str] = []
    for values, ranks in lines:
        group = ranks_info(ranks or "")[1]
        if cut and group not in seen:
            seen.add(group)
            continue
        seen.add(group)
        depth, commit = _number(values.get("avg_accepted_depth")), _number(values.get("avg_commit_len"))
        if depth is None or commit is None:
            continue
        checked += 1
        excess = depth - commit - PRINT_SLACK
        if excess <= 0:
            continue
        above += 1
        shown = f"bs={values.get('bs')} budget={values.get('budget')} avg_accepted_depth={depth:.2f} "
        shown += f"avg_commit_len={commit:.2f}"
        budget = _number(values.get("budget"))
        if budget is None:
            continue  # how deep a last step can walk is not known: no bound
        allowance = budget - 1
        if allowance <= 0 or excess > allowance:
            beyond += 1
            if len(examples) < _EXAMPLES:
                examples.append(shown)
            continue
        batch = _number(values.get("bs")) or 1.0
        needed += math.ceil(steps * max(1.0, batch - 0.5) * excess / allowance - 1e-9)  # whole requests end
        if len(above_examples) < _EXAMPLES:
            above_examples.append(shown)
    impossible = beyond
    if requests is not None and needed > requests:
        impossible = above
        examples = (examples + above_examples)[:_EXAMPLES]
    return {
        "ddtree_intervals_checked": checked,
        "ddtree_intervals_above": above,
        "ddtree_ends_needed": round(needed, 3),
        "ddtree_ends_possible": requests,
        "ddtree_steps_per_line": steps,
        "ddtree_impossible_intervals": impossible,
        "ddtree_impossible_examples": " | ".join(examples),  # one text: a record's details are flat scalars
    }


LINES_DEFINITION = (
    "details.ddtree_lines_depth_above_commit: the DDTree lines of the window's text (a cut window's edge line "
    "too) whose avg_accepted_depth is above their avg_commit_len beyond the %.2f roundings, each on its own, none "
    "excused (what `specsweep parse` warns of as depth_vs_commit, line by line); "
    "details.ddtree_lines_depth_above_commit_examples shows up to three. Whether length-capped last steps explain "
    "them is details.ddtree_impossible_intervals (the sweep's load known)."
)


def flag_lines(window: Any) -> list[tuple[int, Any]]:
    """The window's DDTree lines whose accepted depth is above their commit length beyond the rounding, as
    ``(index among its DDTree samples, sample)``; their count and examples go into ``window.details``
    (``LINES_DEFINITION``), for a sweep's record and for ``specsweep parse`` alike."""
    from orchestrator.engines.samples import DDTreeSample

    tree = [s for s in window.samples if isinstance(s, DDTreeSample)]
    if not tree:
        return []
    above: list[tuple[int, Any]] = []
    for index, sample in enumerate(tree):
        depth = _number(sample.values.get("avg_accepted_depth"))
        commit = _number(sample.values.get("avg_commit_len"))
        if depth is not None and commit is not None and depth - commit > PRINT_SLACK:
            above.append((index, sample))
    window.details["ddtree_lines_depth_above_commit"] = len(above)
    window.details["ddtree_lines_depth_above_commit_examples"] = " | ".join(
        f"bs={s.values.get('bs')} budget={s.values.get('budget')} "
        f"avg_accepted_depth={s.values['avg_accepted_depth']:.2f} avg_commit_len={s.values['avg_commit_len']:.2f}"
        for _, s in above[:_EXAMPLES]
    )
    window.definitions["ddtree_lines_depth_above_commit"] = LINES_DEFINITION
    return above


def flag_window(window: Any, client: Mapping[str, Any], settings: Mapping[str, Any] | None) -> None:
    """Check each DDTree interval of a sweep's ``window`` (a ``WindowMetrics`` of a cut window) against the
    load that ran in it (``client``: its ``requests`` and ``warmup_requests``) and the server's ``settings``
    (engine_info); the verdict goes into ``window.details`` and its definition into ``window.definitions``. A
    window without DDTree lines is left as it is."""
    from orchestrator.engines.samples import DDTreeSample

    tree = [s for s in window.samples if isinstance(s, DDTreeSample)]
    if not tree:
        return
    flag_lines(window)
    sent = [_number(client.get(key)) for key in ("requests", "warmup_requests")]
    requests = sum(v for v in sent if v is not None) if sent[0] is not None else None
    aligned = bool(window.details.get("window_aligned"))
    decode = _number(window.details.get("decode_lines"))  # the Decode batch lines, edges left out
    edges = 0 if aligned else len({ranks_info(s.ranks or "")[1] for s in tree})
    steps = steps_per_line(settings, len(tree) - edges, int(decode) if decode is not None else None)
    window.details.update(
        check_intervals(((s.values, s.ranks) for s in tree), requests=requests, steps=steps, cut=not aligned)
    )
    window.definitions["ddtree_impossible_intervals"] = DEFINITION
