"""Consistency checks: every number a run produced, tested against physics and against the other numbers.

Each check is a named function from a ``CheckContext`` to a list of ``Finding`` (check, point, severity,
message, evidence). Severities: ``error`` (impossible, or the point failed), ``warning`` (suspicious, or not a
stable figure), ``info`` (what could not be checked, and why). ``CHECKS`` lists them in report order; the
experiment's ``checks.disabled`` turns any of them off by name. Tolerances come from ``checks:`` in the stored
experiment (``CheckSettings``), with the defaults below.

Alias rows (a configuration the plan merged into another's deployment) are the same measurement, so checks
look at measured rows only and a finding is never reported twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from orchestrator.analysis.agreement import (
    MIN_WINDOW_LINES,
    counts_agree,
    disagreements,
    record_disagreement_figures,
    token_disagreements,
    uncompared_throughput,
)
from orchestrator.analysis.busy import busy_points
from orchestrator.analysis.checkbase import (
    _EVIDENCE_LINES,
    _PRINT_SLACK,
    _RESTART_SUFFIX,
    SEVERITY_ORDER,
    CheckContext,
    CheckSettings,
    Finding,
    Severity,
    _f,
    _finding,
    _metric_lines,
    _rows,
)
from orchestrator.analysis.corpus import corpus_points
from orchestrator.analysis.drafts import command_schedule, k_used
from orchestrator.analysis.golden import golden_points, other_drafter, shape_points
from orchestrator.analysis.roles import expected_chain_range, finite
from orchestrator.analysis.statuses import MEASURED

__all__ = [
    "CHECKS",
    "CheckContext",
    "CheckSettings",
    "Finding",
    "Severity",
    "findings_frame",
    "run_checks",
]

# ---- the checks ---------------------------------------------------------------------------------------------


def failed_points(ctx: CheckContext) -> list[Finding]:
    """A failed point is an error with its reason and the lines that explain it; a skipped one is noted."""
    out: list[Finding] = []
    for row in ctx.rows(ctx.measured[~ctx.measured["status"].isin(MEASURED)]):
        kind = row.get("error_kind") or "unknown"
        message = row.get("error_message") or "no reason recorded"
        evidence = list(row.get("error_evidence") or [])
        if row["status"] == "failed":
            out.append(_finding("failed_points", row, "error", f"point failed ({kind}): {message}", evidence))
        else:
            out.append(_finding("failed_points", row, "info", f"point skipped ({kind}): {message}", evidence))
    return out


def request_errors(ctx: CheckContext) -> list[Finding]:
    """Requests that errored inside a point that otherwise completed."""
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok):
        errors = finite(row.get("errors"))
        requests = finite(row.get("requests"))
        if not errors:
            continue
        by_kind = row.get("errors_by_kind")
        detail = ""
        if isinstance(by_kind, str):
            try:
                detail = " (" + ", ".join(f"{k}: {v}" for k, v in json.loads(by_kind).items()) + ")"
            except (json.JSONDecodeError, AttributeError):
                detail = f" ({by_kind})"
        total = f" of {requests:.0f}" if requests is not None else ""
        severity: Severity = "error" if requests is not None and errors >= requests else "warning"
        message = f"{errors:.0f}{total} requests errored{detail}"
        if row.get("status") == "degraded":
            severity = "error"
            message += (
                f"; the point is degraded (more than {ctx.settings.degraded_requests:.0%} of its requests lost): "
                + ("ranked, as checks.rank_degraded asks" if ctx.settings.rank_degraded else "left out of winners")
            )
        out.append(_finding("request_errors", row, severity, message, []))
    return out


def too_few_requests(ctx: CheckContext) -> list[Finding]:
    """A throughput from a handful of requests is noise, not a figure."""
    minimum = ctx.settings.min_requests
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok):
        requests = finite(row.get("requests"))
        completed = finite(row.get("completed"))
        if completed is None:
            if requests is None:
                continue
            completed = requests - (finite(row.get("errors")) or 0.0)
        if completed < minimum:
            message = (
                f"only {completed:.0f} requests completed (checks.min_requests is {minimum}): "
                "too few for a stable figure; raise load.requests or load.duration"
            )
            out.append(_finding("too_few_requests", row, "warning", message, []))
    return out


def impossible_depth(depth: Any, commit: Any) -> str | None:
    """The message when an accepted depth exceeds its commit length (beyond the log's rounding), else None:
    the depth_vs_commit check's physics, which ``specsweep parse`` applies to each DDTree line too."""
    depth_value, commit_value = finite(depth), finite(commit)
    if depth_value is None or commit_value is None or depth_value <= commit_value + _PRINT_SLACK:
        return None
    return (
        f"accepted depth {_f(depth_value)} exceeds commit length {_f(commit_value)}: impossible in a well-formed "
        "chain (commit = accepted drafts + 1 bonus token). Verification accepted tokens that were "
        "never committed: look for a bug in the commit path; throughput follows the commit length"
    )


def depth_vs_commit(ctx: CheckContext) -> list[Finding]:
    """Accepted depth can never exceed the commit length: commit = accepted drafts + 1 bonus token."""
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok):
        depth = finite(row.get("ddtree_avg_accepted_depth"))
        commit = finite(row.get("ddtree_avg_commit_len"))
        message = impossible_depth(depth, commit)
        if message is not None and depth is not None and commit is not None:
            evidence = [f"avg_accepted_depth={_f(depth)} avg_commit_len={_f(commit)}"]
            evidence += ctx.window_lines(row, r"DDTREE metrics", limit=1)
            out.append(_finding("depth_vs_commit", row, "error", message, evidence))
        elif depth is not None and commit is not None and (found := _impossible_intervals(ctx, row)) is not None:
            out.append(found)
    return out


def _impossible_intervals(ctx: CheckContext, row: dict[str, Any]) -> Finding | None:
    """A window whose mean depth and commit length look plausible while some of its DDTree intervals report a
    depth above their commit length that no length-capped last step explains: the sweep checks each interval of
    the window it stores (orchestrator/engines/ddtreeintervals.py, ``details.ddtree_impossible_intervals``); a
    record stored before it has no verdict, and only its mean is checked."""
    bad = finite(row.get("server_details_ddtree_impossible_intervals"))
    if not bad:
        return None
    checked = finite(row.get("server_details_ddtree_intervals_checked"))
    needed = finite(row.get("server_details_ddtree_ends_needed"))
    possible = finite(row.get("server_details_ddtree_ends_possible"))
    steps = finite(row.get("server_details_ddtree_steps_per_line"))
    of = f" of {checked:.0f}" if checked is not None else ""
    ends = ""
    if needed is not None and possible is not None and steps is not None and needed > possible:
        ends = (
            f"; a request's last step, cut by its length cap, explains at most budget - 1 tokens each, and these "
            f"intervals ({steps:.0f} decode step(s) each) would need {needed:.0f} requests to end in them, the "
            f"load sent {possible:.0f}"
        )
    message = (
        f"{bad:.0f}{of} DDTree intervals report an accepted depth above their commit length beyond what "
        f"length-capped last steps explain{ends} (the window's mean hides it): impossible in a well-formed chain "
        "(commit = accepted drafts + 1 bonus token). Verification accepted tokens that were never committed in "
        "those intervals: look for a bug in the commit path"
    )
    examples = row.get("server_details_ddtree_impossible_examples")
    evidence = [f"{row.get('window_file')}: {line}" for line in str(examples or "").split(" | ") if line]
    return _finding("depth_vs_commit", row, "error", message, evidence)


def _linear_reference(ctx: CheckContext, row: dict[str, Any]) -> tuple[float | None, float | None, str]:
    """(linear accept length, linear chain drafts, where from) for a row: same host and load, else the mean of
    the linear baseline on that host."""
    linear = ctx.linear_by_host.get(row.get("host"))
    if linear is None or linear.empty:
        return None, None, ""
    drafts = finite(linear["chain_drafts"].dropna().iloc[0]) if linear["chain_drafts"].notna().any() else None
    same = linear[(linear["mode"] == row.get("mode")) & (linear["load"] == row.get("load"))]
    if "workload" in same.columns:
        same = same[same["workload"] == row.get("workload", "")]
    accept = finite(same["accept_len"].iloc[0]) if not same.empty else None
    if accept is not None:
        return accept, drafts, f"linear at {row.get('load_label')}"
    values = pd.to_numeric(linear["accept_len"], errors="coerce").dropna()
    if values.empty:
        return None, drafts, ""
    return float(values.mean()), drafts, "linear, mean over its loads"


def topk1_vs_chain(ctx: CheckContext) -> list[Finding]:
    """A top-k = 1 tree is a chain and must accept what the linear chain of that length accepts."""
    tol = ctx.settings.chain_tolerance
    out: list[Finding] = []
    candidates = ctx.rows(ctx.ok[(ctx.ok["tree_topk"] == 1) & (ctx.ok["role"] != "linear")])
    if candidates and ctx.roles.linear is None:
        return [
            Finding(
                check="topk1_vs_chain",
                point=None,
                severity="info",
                message="top-k = 1 trees not checked: the run has no linear baseline",
            )
        ]
    unknown_length = False
    for row in candidates:
        if other_drafter(ctx.linear_by_host.get(row.get("host")), row):
            continue
        accept = finite(row.get("accept_len"))
        drafts = finite(row.get("chain_drafts"))
        linear_accept, linear_drafts, source = _linear_reference(ctx, row)
        if accept is None or drafts is None or linear_accept is None:
            continue
        if linear_drafts is None:
            unknown_length = True
            continue
        low, high = expected_chain_range(linear_accept, int(linear_drafts), int(drafts))
        if low * (1 - tol) <= accept <= high * (1 + tol):
            continue
        expected = _f(low) if math.isclose(low, high) else f"{_f(low)}–{_f(high)}"
        message = (
            f"top-k=1 tree (budget {row.get('tree_budget'):.0f}) is a chain of {drafts:.0f} drafts and should "
            f"accept {expected} tokens/step (±{tol:.0%}, from the linear chain of {linear_drafts:.0f} drafts "
            f"accepting {_f(linear_accept)}), but accepts {_f(accept)}"
        )
        evidence = [f"{row.get('label')}: accept_len={_f(accept)} ({row.get('accept_len_source')})"]
        evidence.append(f"{source}: accept_len={_f(linear_accept)}, chain of {linear_drafts:.0f} drafts")
        evidence += ctx.window_lines(row, r"DDTREE metrics", limit=1) + ctx.window_lines(row, r"accept len", limit=1)
        out.append(_finding("topk1_vs_chain", row, "error", message, evidence))
    if unknown_length:
        out.append(
            Finding(
                check="topk1_vs_chain",
                point=None,
                severity="info",
                message="top-k = 1 trees not checked: the linear baseline's chain length is unknown "
                "(set checks.linear_chain_length, or a draft-token parameter or flag)",
            )
        )
    return out


def tree_below_chain(ctx: CheckContext) -> list[Finding]:
    """A tree with room for the whole linear chain that accepts fewer tokens than the chain: suspicious, since
    under greedy verification a tree containing the chain accepts at least what the chain does."""
    tol = ctx.settings.chain_tolerance
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok[(ctx.ok["tree_topk"] > 1) & (ctx.ok["role"] != "linear")]):
        if other_drafter(ctx.linear_by_host.get(row.get("host")), row):
            continue
        accept = finite(row.get("accept_len"))
        budget = finite(row.get("tree_budget"))
        linear_accept, linear_drafts, source = _linear_reference(ctx, row)
        if accept is None or budget is None or linear_accept is None:
            continue
        if linear_drafts is not None and budget < linear_drafts:
            continue  # too small to hold the chain: it may rightly accept less
        if accept < linear_accept * (1 - tol):
            message = (
                f"tree (budget {budget:.0f}, top-k {row.get('tree_topk'):.0f}) accepts {_f(accept)} tokens/step, "
                f"{1 - accept / linear_accept:.0%} fewer than the linear chain ({_f(linear_accept)}); a tree "
                "that contains the greedy chain cannot accept less under greedy verification"
            )
            evidence = [f"{source}: accept_len={_f(linear_accept)}"]
            evidence += ctx.window_lines(row, r"accept len", limit=1)
            out.append(_finding("tree_below_chain", row, "warning", message, evidence))
    return out


def speedup_vs_accept_len(ctx: CheckContext) -> list[Finding]:
    """Each verify step costs at least one AR step, so a speedup over AR cannot exceed the accept length."""
    slack = ctx.settings.speedup_slack
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok[ctx.ok["role"] != "ar"]):
        speedup = finite(row.get("speedup_vs_ar"))
        accept = finite(row.get("accept_len"))
        if speedup is None or accept is None:
            continue
        if speedup > accept * slack:
            message = (
                f"{speedup:.2f}x over AR, but an accept length of {_f(accept)} allows at most "
                f"{accept * slack:.2f}x (accept length × checks.speedup_slack {slack:g}): the AR baseline or "
                "this point's throughput is wrong, or the accept length under-counts"
            )
            evidence = [
                f"output_tok_s={_f(finite(row.get('output_tok_s')) or 0)} "
                f"AR output_tok_s={_f(finite(row.get('ar_output_tok_s')) or 0)} accept_len={_f(accept)}"
            ]
            out.append(_finding("speedup_vs_accept_len", row, "error", message, evidence))
    return out


def client_vs_server(ctx: CheckContext) -> list[Finding]:
    """What the client measured against what the server says, each pair over one window and within its stated
    bounds (``orchestrator/analysis/agreement.py`` says which window each figure covers): output tokens (the
    client's, the counters' and the log's, each over its own window that encloses the load), accept length (the
    same requests in every source), and, for a journal that gives no window seconds, the client's steady tok/s
    against the log's busy-window rate when the window holds at least ``MIN_WINDOW_LINES`` metric lines."""
    tol = ctx.settings.client_server_tolerance
    out: list[Finding] = []
    short = 0
    for row in ctx.rows(ctx.ok):
        short += uncompared_throughput(row)
        for message, _kind in disagreements(row, tol):
            evidence = ctx.window_lines(row, _metric_lines(row.get("server_engine")), limit=2)
            out.append(_finding("client_vs_server", row, "warning", message, evidence))
    if short:
        out.append(
            Finding(
                check="client_vs_server",
                point=None,
                severity="info",
                message=f"throughput not cross-checked at {short} point(s): their windows hold fewer than "
                f"{MIN_WINDOW_LINES} metric lines (raise load.requests or load.duration for longer windows)",
            )
        )
    return out


def source_agreement(ctx: CheckContext) -> list[Finding]:
    """The disagreements between sources that a record holds (its own comparison, ``server.sources``: rates, each
    over its own window). Where the counts under a rate agree (:func:`counts_agree`: the tokens over each
    window, the accept lengths by source), only the windows' lengths differ: one note for the whole run says so,
    with the points it covers as evidence. A rate whose counts say nothing either way is a note of its own
    point; counts that disagree are ``client_vs_server`` warnings, not this check's."""
    out: list[Finding] = []
    by_window: dict[str, int] = {}
    evidence: list[str] = []
    for row in ctx.rows(ctx.ok):
        for figure, sentence in record_disagreement_figures(row):
            if counts_agree(row, figure):
                by_window[figure] = by_window.get(figure, 0) + 1
                evidence.append(f"{row.get('label')} @ {row.get('load_label')} on {row.get('host')}: {sentence}")
            elif not (figure == "gen_throughput" and token_disagreements(row)):
                message = f"the record's sources disagree on {sentence}"
                out.append(_finding("source_agreement", row, "info", message, []))
    if by_window:
        figures = ", ".join(f"{figure} at {n} point{'s' if n != 1 else ''}" for figure, n in by_window.items())
        message = (
            f"rates differ between sources only by their windows ({figures}): the counts under them "
            "agree (tokens over each window, accept length by source), so nothing to act on"
        )
        summary = Finding(
            check="source_agreement", point=None, severity="info", message=message, evidence=evidence[:_EVIDENCE_LINES]
        )
        out.insert(0, summary)
    return out


def speculation_off(ctx: CheckContext) -> list[Finding]:
    """A speculative configuration with no speculative metrics at all, or one that accepts nothing."""
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok[ctx.ok["speculative"].astype(bool)]):
        accept = finite(row.get("accept_len"))
        ddtree = [k for k in row if k.startswith("ddtree_") and finite(row.get(k)) is not None]
        lines = finite(row.get("server_lines_matched"))
        if accept is None and not ddtree:
            detail = f" ({lines:.0f} metric lines matched)" if lines is not None else ""
            message = (
                "a speculative configuration produced no speculative metrics at all" + detail + ": speculation "
                "may be silently off (check the server flags) or the engine's log format is not parsed"
            )
            out.append(_finding("speculation_off", row, "error", message, ctx.window_lines(row, r".", 3)))
        elif accept is not None and accept <= 1.0 + 0.005:
            message = (
                f"accept length {_f(accept)}: no drafted token was ever accepted; speculation is off or the "
                "drafter does not match the model"
            )
            out.append(_finding("speculation_off", row, "warning", message, ctx.window_lines(row, r"accept", 3)))
    return out


def engine_mismatch(ctx: CheckContext) -> list[Finding]:
    """Windows in which the engine's parser read nothing while the server logged lines: a wrong ``engine:``
    (the other engines' parsers name the likely one), or metric lines that never reach the log. One finding
    for the run (or for the one configuration it concerns), since a wrong engine silences every point."""
    from orchestrator.metrics.engine_guess import engine_fit

    silent: list[tuple[dict[str, Any], Any]] = []
    for row in ctx.rows(ctx.ok):
        engine = row.get("server_engine")
        lines = finite(row.get("server_lines_total"))
        if not isinstance(engine, str) or not lines:
            continue
        text = ctx.window_text(row)
        if text is None:
            continue
        fit = engine_fit(engine, text)
        if fit.silent:
            silent.append((row, fit))
    if not silent:
        return []
    engine = silent[0][1].engine
    total = sum(fit.lines for _, fit in silent)
    votes: dict[str, int] = {}
    for _, fit in silent:
        if fit.likely is not None:
            votes[fit.likely] = votes.get(fit.likely, 0) + fit.likely_matched
    windows = f"{len(silent)} of {len(ctx.ok)} window(s)"
    if votes:
        likely = max(votes, key=lambda k: votes[k])
        message = (
            f"engine: {engine} read none of the {total} lines the server logged in {windows}, but the {likely} "
            f"parser reads {votes[likely]} of them: the server looks like {likely} (set engine: {likely}); no "
            "server metric was read there"
        )
        examples = [x for _, fit in silent if fit.likely == likely for x in fit.examples]
    else:
        message = (
            f"engine: {engine} read none of the {total} lines the server logged in {windows}, and no other "
            "engine's parser reads them either: no server metric was read there (check engine:, the server's "
            "log level and its metric logging interval)"
        )
        examples = []
    sources = {str(row.get("accept_len_source")) for row, _ in silent if finite(row.get("accept_len")) is not None}
    if sources:
        message += f"; the accept length shown comes from {', '.join(sorted(sources))}"
    where = [f"{row.get('label')} @ {row.get('load_label')}: {row.get('window_file')}" for row, _ in silent]
    configs = {row.get("label") for row, _ in silent}
    hosts = {row.get("host") for row, _ in silent}
    return [
        Finding(
            check="engine_mismatch",
            point=silent[0][0].get("point_id") if len(silent) == 1 else None,
            severity="warning",
            message=message,
            evidence=(examples[:3] + where)[:_EVIDENCE_LINES],
            config=next(iter(configs)) if len(configs) == 1 else None,
            host=next(iter(hosts)) if len(hosts) == 1 and ctx.ok["host"].nunique() > 1 else None,
        )
    ]


def missing_baseline(ctx: CheckContext) -> list[Finding]:
    """Points that have no baseline on their host at their load cannot be compared (noted, once per load)."""
    out: list[Finding] = []
    for role, variant in (("AR", ctx.roles.ar), ("linear", ctx.roles.linear)):
        if variant is None:
            out.append(
                Finding(
                    check="missing_baseline",
                    point=None,
                    severity="info",
                    message=f"the experiment names no {role} baseline: no speedup against {role}",
                )
            )
            continue
        keys = ["host", "workload", "mode", "load"] if "workload" in ctx.ok.columns else ["host", "mode", "load"]
        have = ctx.ok[ctx.ok["variant"] == variant][keys].drop_duplicates()
        wanted = ctx.ok[[*keys, "load_label"]].drop_duplicates()
        missing = wanted.merge(have, how="left", indicator=True)
        for row in _rows(missing[missing["_merge"] == "left_only"]):
            message = f"no successful {role} baseline ({variant}) at this load on this host: no comparison"
            out.append(
                Finding(
                    check="missing_baseline",
                    point=None,
                    severity="info",
                    message=message,
                    host=row["host"],
                    load=row["load_label"],
                )
            )
    return out


def unreadable_records(ctx: CheckContext) -> list[Finding]:
    """Lines of records.jsonl that could not be read (a torn last line after kill -9, or damage)."""
    if not ctx.skipped_lines:
        return []
    evidence = [
        f"{f'line {s.line_number}: ' if s.line_number else ''}{s.reason}: {s.text[:120]}" for s in ctx.skipped_lines
    ]
    message = f"{len(ctx.skipped_lines)} line(s) of records.jsonl were left out (unreadable, or outside the plan)"
    return [
        Finding(
            check="unreadable_records",
            point=None,
            severity="warning",
            message=message,
            evidence=evidence[:_EVIDENCE_LINES],
        )
    ]


def overlapping_runs(ctx: CheckContext) -> list[Finding]:
    """Points measured while another specsweep sweep ran on the controller's machine (their records'
    ``overlapped``, orchestrator/sweep/overlap.py): the two shared its CPU and network (and a GPU host when both
    drove it), so neither run's figures are clean. One finding for the run, naming the other runs and the
    points."""
    frame = ctx.measured
    if "overlapped_with" not in frame.columns:
        return []
    # Only text names a neighbour: a point measured alone is None, or NaN once the column has been merged.
    rows = [r for r in _rows(frame) if isinstance(r.get("overlapped_with"), str) and r["overlapped_with"]]
    if not rows:
        return []
    others = list(dict.fromkeys(part for r in rows for part in str(r["overlapped_with"]).split("; ")))
    message = (
        f"{len(rows)} of {len(frame)} points were measured while another specsweep sweep ran on this machine "
        f"({'; '.join(others)}): the runs shared its CPU and network, so their figures are contaminated; "
        "for clean figures, run the sweep again alone"
    )
    evidence = [
        f"{r.get('label')} @ {r.get('load_label')} on {r.get('host')}: beside {r['overlapped_with']}" for r in rows
    ]
    return [
        Finding(
            check="overlapping_runs",
            point=None,
            severity="warning",
            message=message,
            evidence=evidence[:_EVIDENCE_LINES],
        )
    ]


def lossless(ctx: CheckContext) -> list[Finding]:
    """At temperature 0 speculation must not change the output beyond what the server's own batching does to
    the autoregressive output: every configuration's answers to the lossless probe against the baseline's
    answers on the same host, alone and batched (``orchestrator/analysis/lossless.py``). Lossy beyond the
    baseline's own variance is an error naming the configuration, the prompt and the token; inconclusive a
    warning; lossless (and the baseline's own divergence) a note: one a host for the configurations whose every
    answer equals one of the baseline's (nothing to act on), one of its own for a lossless verdict that leaned on
    the baseline's variance or a near tie."""
    result = ctx.lossless_result
    if result is None:
        return []
    findings: list[Finding] = []
    severity: dict[str, Severity] = {"lossy": "error", "inconclusive": "warning", "baseline_logprobs": "warning"}
    exact: dict[str, list[str]] = {}
    for item in result.findings:
        config = _RESTART_SUFFIX.sub("", item.config) if item.config else None
        if item.kind == "lossless" and item.exact and item.config:
            exact.setdefault(item.host, []).append(item.config)
            continue
        findings.append(
            Finding(
                check="lossless",
                point=None,
                severity=severity.get(item.kind, "info"),
                message=item.message if item.config == config else f"{item.message} ({item.config})",
                evidence=list(item.evidence),
                host=item.host,
                config=config,
            )
        )
    for host, configs in exact.items():
        message = f"lossless: every answer of {', '.join(configs)} equals one of the baseline's"
        findings.append(Finding(check="lossless", point=None, severity="info", message=message, host=host))
    return findings


def capped_share(row: dict[str, Any]) -> float | None:
    """The share of a point's successful responses that stopped at the output cap (``finish_reason: length``)."""
    completed = finite(row.get("completed"))
    if not completed:
        return None
    return (finite(row.get("finish_reasons_length")) or 0.0) / completed


def runaway_outputs(ctx: CheckContext) -> list[Finding]:
    """At temperature 0 speculation must not change the output, so neither may it change how often a response
    runs into the output cap (``load.max_tokens`` or the workload's own): a configuration whose responses stop
    at the cap far more often than the AR baseline's at the same load and workload is a sign that speculation
    changed the text (a response that no longer ends)."""
    ok = ctx.ok
    if "role" not in ok.columns or "finish_reasons_length" not in ok.columns:
        return []
    keys = [k for k in ("host", "workload", "mode", "load") if k in ok.columns]
    ar = {tuple(r[k] for k in keys): r for r in ctx.rows(ok[ok["role"] == "ar"])}
    out: list[Finding] = []
    for row in ctx.rows(ok[ok["role"] != "ar"]):
        base = ar.get(tuple(row[k] for k in keys))
        share = capped_share(row)
        base_share = capped_share(base) if base is not None else None
        if base is None or share is None or base_share is None or (finite(row.get("completed")) or 0) < 4:
            continue
        if share - base_share >= 0.25 and share >= 2 * base_share:
            message = (
                f"{share:.0%} of the responses stopped at the output cap, against {base_share:.0%} under AR at "
                "this load and workload: speculation may have changed the output (answers that no longer end)"
            )

            def counts(r: dict[str, Any]) -> str:
                return f"{int(finite(r.get('finish_reasons_length')) or 0)} of {int(finite(r.get('completed')) or 0)}"

            evidence = [f"finish_reason length: {counts(row)}; AR: {counts(base)}"]
            out.append(_finding("runaway_outputs", row, "warning", message, evidence))
    return out


# The sources of a record's server figures that say whether their window is whole (frame.py's columns).
_WINDOW_SOURCES = (("log window", "server_integrity_"), ("/metrics", "prom_integrity_"))


# Reasons that say what a source cannot show, not that anything happened to the server: vLLM's idle intervals
# logged at DEBUG, a line pair cut at the window's edge, a last interval not yet logged. With another source of
# the window whole (the record's figures come from it: analysis/frame.py), such a window is a note, not a warning:
# on the real vLLM under a busy machine, missing_intervals warned at 11 of 12 points whose /metrics was whole.
_LIMITS = frozenset({"missing_intervals", "cut_pair", "open_interval"})


def _is_whole(value: Any) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value is True or (isinstance(value, (int, float)) and value >= 1))


def window_integrity(ctx: CheckContext) -> list[Finding]:
    """A window that is not whole (a restart, a counter that went down, a cut line pair, intervals the log does
    not show: orchestrator/engines/integrity.py) gives no figure for what it breaks: one finding per point,
    naming each source's reasons and what its figures still cover. A warning, unless every reason is a limit of
    what a source shows (``_LIMITS``) and another source of the window is whole: then a note saying the point's
    figures come from that one."""
    out: list[Finding] = []
    for row in ctx.rows(ctx.ok):
        parts: list[str] = []
        evidence: list[str] = []
        names_seen: set[str] = set()
        whole_sources = [s for s, prefix in _WINDOW_SOURCES if _is_whole(row.get(prefix + "whole")) is True]
        for source, prefix in _WINDOW_SOURCES:
            if _is_whole(row.get(prefix + "whole")) is not False:
                continue
            reasons = _reasons(row.get(prefix + "reasons"))
            names_seen |= {r["reason"] for r in reasons} or {"not whole"}
            part = row.get(prefix + "part")
            names = ", ".join(dict.fromkeys(r["reason"] for r in reasons)) or "not whole"
            covers = (
                f"figures from its {str(part).replace('_', ' ')} part only" if isinstance(part, str) else "no figure"
            )
            parts.append(f"{source}: {names} ({covers})")
            evidence += [f"{source}: {r['reason']}: {r['detail']}" for r in reasons]
        if parts:
            message = "window not whole: " + "; ".join(parts)
            if whole_sources and names_seen <= _LIMITS:
                message += f"; the point's figures come from {' and '.join(whole_sources)}, which is whole"
                out.append(_finding("window_integrity", row, "info", message, evidence))
            else:
                out.append(_finding("window_integrity", row, "warning", message, evidence))
    return out


def _reasons(text: Any) -> list[dict[str, str]]:
    """The reasons frame.py wrote as JSON text (``[{"reason", "detail"}]``); none when unreadable."""
    if not isinstance(text, str):
        return []
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return []
    if not isinstance(found, list):
        return []
    return [
        {"reason": str(r.get("reason")), "detail": str(r.get("detail") or "")}
        for r in found
        if isinstance(r, dict) and r.get("reason")
    ]


CheckFunction = Callable[[CheckContext], list[Finding]]


def schedule_ignored(ctx: CheckContext) -> list[Finding]:
    """A configuration deployed with a batch-size schedule (vLLM's ``num_speculative_tokens_per_batch_size``)
    whose drafts per draft at a closed-loop load are not the schedule's k there: the engine did not run it
    (``orchestrator/analysis/drafts.py``)."""
    out: list[Finding] = []
    ok = ctx.ok
    if "command" not in ok.columns:
        return out
    scheduled = ok[ok["command"].astype(str).str.contains("num_speculative_tokens_per_batch_size", regex=False)]
    for row in _rows(scheduled):
        if row.get("mode") != "concurrency":
            continue
        spec = command_schedule(row.get("command"))
        load = finite(row.get("concurrency"))
        if spec is None or load is None:
            continue
        used = k_used(row, int(load), spec)
        evidence = [
            f"schedule: {[list(e) for e in spec[1]]}, num_speculative_tokens {spec[0]}",
            f"draft tokens per draft: {'-' if used.drafts_per_draft is None else f'{used.drafts_per_draft:.3f}'}"
            f" ({used.source or 'no counter'})",
        ]
        if used.ran is False:
            message = f"the engine did not run the schedule at C={int(load)}: {used.why}"
            out.append(_finding("schedule_ignored", row, "error", message, evidence))
        elif used.ran is None:
            message = f"cannot tell whether the engine ran the schedule at C={int(load)}: {used.why}"
            out.append(_finding("schedule_ignored", row, "info", message, evidence))
    return out


def drafter_corpus(ctx: CheckContext) -> list[Finding]:
    """A drafter that keeps a corpus across requests (SGLang's NGRAM) whose corpus may already have held the
    point's prompts: not emptied before it, or a prompt sent twice (``analysis/corpus.py``)."""
    return [_finding("drafter_corpus", row, "warning", msg, evidence) for row, msg, evidence in corpus_points(ctx.ok)]


def golden(ctx: CheckContext) -> list[Finding]:
    """A self-drafted chain whose verify steps or accepted drafts part from what the model itself predicts for
    the same requests (``analysis/golden.py``)."""
    return [_finding("golden", row, sev, msg, evidence) for row, sev, msg, evidence in golden_points(ctx.ok)]  # type: ignore[arg-type]


def spec_shape(ctx: CheckContext) -> list[Finding]:
    """A server that runs another tree than its command asked for (``analysis/golden.py``)."""
    return [_finding("spec_shape", row, "error", msg, evidence) for row, msg, evidence in shape_points(ctx.ok)]


def machine_load(ctx: CheckContext) -> list[Finding]:
    """Points measured while the controller's machine had more runnable tasks a CPU than ``checks.machine_load``
    (``analysis/busy.py``): one finding for the run."""
    found = busy_points(ctx.measured, ctx.settings.machine_load)
    if found is None:
        return []
    message, evidence = found
    return [
        Finding(
            check="machine_load", point=None, severity="warning", message=message, evidence=evidence[:_EVIDENCE_LINES]
        )
    ]


CHECKS: dict[str, CheckFunction] = {
    "depth_vs_commit": depth_vs_commit,
    "topk1_vs_chain": topk1_vs_chain,
    "tree_below_chain": tree_below_chain,
    "golden": golden,
    "spec_shape": spec_shape,
    "speedup_vs_accept_len": speedup_vs_accept_len,
    "speculation_off": speculation_off,
    "engine_mismatch": engine_mismatch,
    "client_vs_server": client_vs_server,
    "source_agreement": source_agreement,
    "window_integrity": window_integrity,
    "failed_points": failed_points,
    "request_errors": request_errors,
    "too_few_requests": too_few_requests,
    "missing_baseline": missing_baseline,
    "unreadable_records": unreadable_records,
    "overlapping_runs": overlapping_runs,
    "machine_load": machine_load,
    "lossless": lossless,
    "runaway_outputs": runaway_outputs,
    "schedule_ignored": schedule_ignored,
    "drafter_corpus": drafter_corpus,
}


def run_checks(ctx: CheckContext) -> list[Finding]:
    """Every enabled check, findings ordered by severity, then check order, then as found."""
    findings: list[Finding] = []
    for name in ctx.settings.disabled:
        if name not in CHECKS:
            findings.append(
                Finding(
                    check="settings",
                    point=None,
                    severity="info",
                    message=f"checks.disabled names an unknown check {name!r}; known: " + ", ".join(CHECKS),
                )
            )
    if ctx.frame.empty:
        return findings + unreadable_records(ctx)
    for name, check in CHECKS.items():
        if name not in ctx.settings.disabled:
            findings.extend(check(ctx))
    order = {name: i for i, name in enumerate(CHECKS)}
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], order.get(f.check, -1)))


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    """Findings as a table (evidence joined into one text column), for reports and notebooks."""
    columns = ["severity", "check", "config", "load", "host", "message", "evidence", "point"]
    rows = [{**f.model_dump(), "evidence": "\n".join(f.evidence)} for f in findings]
    return pd.DataFrame(rows, columns=columns)
