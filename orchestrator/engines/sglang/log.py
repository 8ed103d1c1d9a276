"""SGLang scheduler ``Decode batch`` lines: parsing and per-window aggregation.

The line is built by ``SchedulerMetricsReporter.report_decode_stats``
(python/sglang/srt/managers/scheduler_components/metrics_reporter.py, sglang 0.5.13-0.5.23; before that
``report_decode_stats`` / ``log_decode_stats`` in srt/observability/scheduler_metrics_mixin.py (0.5.10-0.5.12)
and srt/managers/scheduler_metrics_mixin.py (<= 0.5.3)). In 0.5.23::

    Decode batch{ [N]}, #running-req: R, #token: T, token usage: U, {accept len: L, accept rate: A, }
    {cap len: C, }{...}cuda graph: B, gen throughput (token/s): G, #queue-req: Q{, MFU fields}{, fwd occupancy..}

Versions differ: ``Decode batch.`` and a trailing ``, `` (<= 0.5.3), no ``accept rate`` (<= 0.5.3),
``cpu graph``/``npu graph``/``musa graph``, hybrid-model token fields (``#full token``, ``#swa token``,
``mamba usage``), disaggregation fields, MFU fields after ``#queue-req``, and forks printing ``accept-len L,
accept-ratio A``. So the body is read as a list of ``key: number`` pairs, and only ``#running-req`` and ``gen
throughput`` are required. ``Prefill batch`` lines and access-log lines are not decode samples (they never
contain the marker).

Each line covers the decode batches since the same scheduler's previous Decode line (``--decode-log-interval``
batches, 40 by default): the reporter sums, per decode batch, the batch size (``spec_num_forward_ct``), the
tokens committed (``spec_num_accept_tokens``: accepted drafts + one bonus per request) and the accepted drafts
(``spec_num_correct_drafts``), and prints and resets them; the throughput's clock (``last_decode_stats_tic``) is
reset only when a line is printed, so a line after an idle gap spans the gap (window.py EDGE_DEFINITION). Which
ranks print, and which lines are copies: lines.py RANK_TAGS. The line prints the ratios but neither sum
(``#running-req`` is the last batch's size, ``len(batch.reqs)`` at the print), so a window's figures, which
weigh the intervals by those sums, are given with their bounds (``aggregate_sglang``: exactness).

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.engines.integrity import exactness
from orchestrator.engines.lines import PREFIX, RankDeduper, candidate_lines, rank_prefix, ranks_info
from orchestrator.engines.samples import READ, ParseResult, to_float
from orchestrator.engines.sglang.samples import SglangDecodeSample

__all__ = [
    "ACCEPT_RATE_DEFINITIONS",
    "DEFINITIONS",
    "DRAFTS_ONLY_SINCE",
    "MARKER",
    "accept_rate_definition",
    "aggregate_sglang",
    "parse_decode_line",
    "parse_sglang",
    "version_tuple",
]

MARKER = "Decode batch"

_HEAD = re.compile(r"Decode batch(?:\s*\[(?P<iter>\d+)\])?\s*[.,:]?\s*")
# "key: number" pairs; keys may hold spaces, '#', parentheses and slashes ("gen throughput (token/s)").
_PAIR = re.compile(
    r"(?P<key>[#A-Za-z][^:,\[\]]*?)\s*:\s*"
    r"(?P<val>[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)|True|False)(?=[,\s%]|$)"
)
# The common shapes in one anchored pattern; anything else goes through the general key/value reader.
_FAST_BODY = (
    r"Decode batch(?: \[(\d+)\])?[.,] #running-req: (\d+), #token: (\d+), token usage: (\d+\.\d+), "
    r"(?:accept len: (\d+\.\d+), (?:accept rate: (\d+\.\d+), )?)?(?:(cuda|cpu|npu) graph: (True|False), )?"
    r"gen throughput \(token/s\): (\d+\.\d+), #queue-req: (\d+),? ?\Z"
)
_FAST = re.compile(_FAST_BODY)
_FORK_ACCEPT = re.compile(r"accept-len\s+(?P<len>[-+\d.eE]+|nan)(?:\s*,\s*accept-ratio\s+(?P<rate>[-+\d.eE]+|nan))?")

# sglang versions whose Decode-line 'accept rate' (and sglang:spec_accept_rate gauge) counts drafts only.
DRAFTS_ONLY_SINCE = (0, 5, 11)

ACCEPT_RATE_DEFINITIONS = {
    "drafts_only": (
        "accepted drafts / proposed drafts, bonus token excluded: SGLang >= 0.5.11 'accept rate' = "
        "spec_num_correct_drafts / (spec_num_forward_ct * (speculative_num_draft_tokens - 1)) "
        "(managers/scheduler_components/metrics_reporter.py report_decode_stats); the definition vLLM and "
        "llama.cpp use, and the only one stored as acceptance_rate."
    ),
    "incl_bonus": (
        "SGLang <= 0.5.10 'accept rate' = accepted tokens incl. the bonus token / (forward count * "
        "speculative_num_draft_tokens) (observability/scheduler_metrics_mixin.py 0.5.10), i.e. accept len / "
        "num_draft_tokens: not comparable with drafts-only rates; stored as details.acceptance_rate_incl_bonus."
    ),
    "unknown": (
        "the server's version is not known, so neither is the meaning of its 'accept rate': the mean as "
        "printed is in details.accept_rate_printed only."
    ),
}

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "SGLang 'accept len': tokens committed per verify step, bonus token included (spec_num_accept_tokens / "
        "spec_num_forward_ct over one decode-log interval, metrics_reporter.py report_decode_stats; every "
        "version). spec_num_forward_ct sums the batch sizes of the interval's decode batches "
        "(update_spec_metrics, called per batch by batch_result_processor.py process_batch_result_decode), "
        "and the line does not print it: #running-req is the last batch's size only (len(batch.reqs) when the "
        "line is printed), smaller than the interval's mean at every point's draining tail. So the window's "
        "value (sum of tokens / sum of verify steps over its intervals) is not in the log: it lies between the "
        "smallest and the largest printed accept len (exactness.accept_len: 'bounded' with those bounds, "
        "'rounded' when every line printed the same), and the figure is an estimate within them, each line "
        "weighted by the mean of its interval's first and last batch size (#running-req of the group's previous "
        "line and its own; every interval has the same number of batches, --decode-log-interval). The exact "
        "window figure comes from /metrics: sglang:generation_tokens_total / sglang:spec_verify_calls_total "
        "(SGLang 0.5.13+, the prometheus source). The line's tokens include drafts a request's last verify step "
        "accepted past max_new_tokens or a stop token, which the request discards (overshoot.py): a sweep takes "
        "them out with the window's responses' counts (details.past_end), else the figure is bounded below by 1. "
        "Lines from other windows never enter; copies of a DP group's line (other ATTN_CP/PP/TP ranks) count once."
    ),
    "acceptance_rate": (
        "Accepted drafts / proposed drafts, bonus excluded (SGLang >= 0.5.11 'accept rate' = "
        "spec_num_correct_drafts / (spec_num_forward_ct * (speculative_num_draft_tokens - 1)), "
        "metrics_reporter.py report_decode_stats): weighted by each interval's verify steps like accept_len, so "
        "bounded the same way (exactness.acceptance_rate); only when the server's version is known to be >= "
        "0.5.11. SGLang <= 0.5.10's 'accept rate' counted the bonus token: details.acceptance_rate_incl_bonus. "
        "Version unknown: details.accept_rate_printed only (ACCEPT_RATE_DEFINITIONS)."
    ),
    "gen_throughput": (
        "Server generation throughput in tokens/s: SGLang's 'gen throughput' is num_generated_tokens since the "
        "group's previous Decode line / seconds since it (last_decode_stats_tic, metrics_reporter.py "
        "report_decode_stats); a DP group's window throughput is its intervals' tokens / their seconds, the "
        "printed values weighted by seconds the line does not print, so within each group it lies between the "
        "smallest and largest printed value (exactness.gen_throughput: 'bounded', the bounds summed over the "
        "groups; 'rounded' when each group printed one value). The figure is an estimate within them (a line's "
        "tokens taken as its estimated verify steps x accept len, as for accept_len, and its time as tokens / "
        "gen throughput), summed over DP groups; lines reporting 0 tokens/s are left out. The exact window "
        "figure: sglang:generation_tokens_total over the window's seconds (the prometheus source)."
    ),
}


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """``"0.5.10.post1"`` -> ``(0, 5, 10)``; None when there is no leading ``X.Y.Z``."""
    if not version:
        return None
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if match is None:
        return None
    return tuple(int(g) for g in match.groups(default="0"))


def accept_rate_definition(version: str | None) -> str:
    """``drafts_only``, ``incl_bonus`` or ``unknown`` (no version known): what an SGLang version's 'accept
    rate' means (ACCEPT_RATE_DEFINITIONS)."""
    parsed = version_tuple(version)
    if parsed is None:
        return "unknown"
    return "drafts_only" if parsed >= DRAFTS_ONLY_SINCE else "incl_bonus"


def _fill(sample: SglangDecodeSample, key: str, raw: str) -> None:
    if key == "#running-req":
        sample.running_req = _int(raw)
    elif key.startswith("gen throughput"):
        sample.gen_throughput = to_float(raw)
    elif key == "accept len":
        sample.accept_len = to_float(raw)
    elif key == "accept rate":
        sample.accept_rate = to_float(raw)
    elif key == "#token":
        sample.token = _int(raw)
    elif key == "token usage":
        sample.token_usage = to_float(raw)
    elif key == "#queue-req":
        sample.queue_req = _int(raw)
    elif key.endswith(" graph"):
        sample.graph = key[:-6]
        sample.graph_used = raw == "True"
    else:
        number: int | float | None = _int(raw)
        if number is None:
            number = to_float(raw)
        sample.extra[key] = number


def _int(raw: str) -> int | None:
    try:
        return int(raw)
    except ValueError:
        value = to_float(raw)
        return int(value) if value is not None and value.is_integer() else None


def _fast_sample(g: tuple[str | None, ...], i: int = 0) -> SglangDecodeSample:
    """A sample from _FAST's ten groups, starting at ``g[i]`` (positional arguments: this runs per line)."""
    alen, arate, used, it = g[i + 4], g[i + 5], g[i + 7], g[i]
    return SglangDecodeSample(
        int(g[i + 1]),  # type: ignore[arg-type]
        float(g[i + 8]),  # type: ignore[arg-type]
        float(alen) if alen is not None else None,
        float(arate) if arate is not None else None,
        int(g[i + 2]),  # type: ignore[arg-type]
        float(g[i + 3]),  # type: ignore[arg-type]
        int(g[i + 9]),  # type: ignore[arg-type]
        g[i + 6],
        (used == "True") if used is not None else None,
        int(it) if it is not None else None,
    )


def parse_decode_line(body: str) -> SglangDecodeSample | None:
    """Read one message that starts at ``Decode batch``; None when it lacks #running-req or gen throughput."""
    fast = _FAST.match(body)
    if fast is not None:
        return _fast_sample(fast.groups())
    head = _HEAD.match(body)
    if head is None:
        return None
    sample = SglangDecodeSample()
    if head.group("iter"):
        sample.iteration = int(head.group("iter"))
    rest = body[head.end() :]
    for key, raw in _PAIR.findall(rest):
        _fill(sample, key.strip(), raw)
    if sample.accept_len is None and "accept-len" in rest:
        fork = _FORK_ACCEPT.search(rest)
        if fork is not None:
            sample.accept_len = to_float(fork.group("len"))
            sample.accept_rate = to_float(fork.group("rate"))
    if sample.running_req is None or sample.gen_throughput is None:
        return None
    return sample


def parse_sglang(text: str) -> ParseResult:
    """Every ``Decode batch`` line of ``text``, behind any prefix; other ranks' copies of a DP group's line
    (lines.py RANK_TAGS) are counted as duplicates, not read."""
    result = ParseResult()
    dedupe = RankDeduper()
    samples, status = result.samples, result.status
    for offset, line in candidate_lines(text, (MARKER,)):
        at = line.find(MARKER)
        message = line[at:]
        quote = message.find('"')  # a `journalctl -o json` line: the message ends at its closing quote
        if quote != -1:
            message = message[:quote]
        bracket = line.rfind("[", 0, at)
        prefix = PREFIX.match(line, bracket, at) if bracket != -1 else None
        timestamp = ranks = None
        if prefix is not None:
            timestamp = prefix.group(1)
            ranks, group, has_tp = ranks_info(prefix.group(2))
            # Copies are recognised before their fields are read (a journal of copies is mostly copies).
            if has_tp and dedupe.seen_before(timestamp, ranks or "", group, message):
                result.duplicate(offset)
                continue
        fast = _FAST.match(message)
        if fast is not None:  # the hot path: a common message shape
            sample = _fast_sample(fast.groups())
        else:
            parsed = parse_decode_line(message)
            if parsed is None:
                result.skip(offset, line)
                continue
            if prefix is None:
                tagged = rank_prefix(line, at)
                timestamp, ranks = tagged.timestamp, tagged.ranks
                if dedupe.is_copy(tagged, message):
                    result.duplicate(offset)
                    continue
            sample = parsed
        sample.timestamp, sample.ranks = timestamp, ranks
        samples.append(sample)
        status[offset] = READ
    return result


#: Half a unit of the last printed digit: SGLang prints accept len, accept rate and gen throughput with two
#: decimals (metrics_reporter.py report_decode_stats, ``:.2f``).
PRINTED_HALF = 0.005

#: The counters that hold what a Decode line does not (docs/engines.md).
EXACT_SOURCE = (
    "the exact window figure comes from /metrics: sglang:generation_tokens_total and "
    "sglang:spec_verify_calls_total (SGLang 0.5.13+, the prometheus source)"
)


def _estimated_weights(samples: list[SglangDecodeSample], context: list[SglangDecodeSample] | None) -> dict[int, float]:
    """Each line's estimated share of the verify steps (``id(sample) -> weight``): its interval's batch sizes
    taken as the mean of the batch after the group's previous line and its own last batch, both
    ``#running-req`` (every interval has the same number of decode batches, ``--decode-log-interval``, so the
    mean batch size is what weighs); its own ``#running-req`` when the window holds no line before it."""
    previous: dict[int, SglangDecodeSample] = {}
    last: dict[str, SglangDecodeSample] = {}
    for s in context if context is not None else samples:
        group = ranks_info(s.ranks or "")[1]
        if group in last:
            previous[id(s)] = last[group]
        last[group] = s
    weights: dict[int, float] = {}
    for s in samples:
        own = float(s.running_req or 0)
        before = previous.get(id(s))
        if own > 0 and before is not None and (before.running_req or 0) > 0:
            weights[id(s)] = (own + float(before.running_req or 0)) / 2
        else:
            weights[id(s)] = own
    return weights


def _spread(values: list[float]) -> tuple[float, float] | None:
    """The bounds of any weighted mean of ``values`` printed with two decimals."""
    if not values:
        return None
    return min(values) - PRINTED_HALF, max(values) + PRINTED_HALF


def _mean_exactness(figure: str, values: list[float], bounds: tuple[float, float]) -> dict[str, Any]:
    if len(set(values)) == 1:
        return exactness(
            "rounded",
            f"every line of the window printed the same {figure} (two decimals), so the window's value is it",
            resolution=2 * PRINTED_HALF,
            bounds=bounds,
        )
    return exactness(
        "bounded",
        f"SGLang prints each interval's {figure} but not its verify-step count (spec_num_forward_ct, the sum of "
        "the interval's batch sizes; #running-req is its last batch's size only, metrics_reporter.py "
        "report_decode_stats), which weighs it in the window's figure: the window's value lies between the "
        "smallest and the largest printed value (bounds, half a unit of the last digit included); the figure "
        "is an estimate within them (each interval's batch sizes taken as the mean of its first and last); "
        f"{EXACT_SOURCE}",
        bounds=bounds,
    )


def aggregate_sglang(
    samples: list[SglangDecodeSample],
    *,
    version: str | None = None,
    context: list[SglangDecodeSample] | None = None,
) -> dict[str, Any]:
    """Window figures from one window's decode lines (see DEFINITIONS); None where no line says.

    ``version``: the server's SGLang version when known (``/server_info`` ``version``), which decides what its
    'accept rate' means (ACCEPT_RATE_DEFINITIONS). ``context``: every decode line of the window in order,
    ``samples`` and the edge lines left out of them, so that a line's previous one is known.

    The figures' ``exactness`` (orchestrator/engines/integrity.py) says what a Decode line cannot: the window's
    accept length, acceptance rate and throughput are means of the lines weighted by what the line does not
    print (each interval's verify steps, and its seconds), so each is given with the bounds every weighting
    allows; 'rounded' when the lines agree."""
    weights = _estimated_weights(samples, context)
    len_num = len_den = rate_num = rate_den = 0.0
    groups: dict[str, list[float]] = {}  # DP group -> [tokens, seconds]
    lengths: list[float] = []
    rates: list[float] = []
    throughputs: dict[str, list[float]] = {}
    for s in samples:
        weight = weights[id(s)]
        if weight <= 0:  # no request in the batch: not a line a decode batch printed
            continue
        if s.accept_len is not None:
            lengths.append(s.accept_len)
            len_num += weight * s.accept_len
            len_den += weight
        if s.accept_rate is not None:
            rates.append(s.accept_rate)
            rate_num += weight * s.accept_rate
            rate_den += weight
        if s.gen_throughput is not None and s.gen_throughput > 0:
            group = ranks_info(s.ranks or "")[1]
            throughputs.setdefault(group, []).append(s.gen_throughput)
            tokens = weight * (s.accept_len if s.accept_len else 1.0)
            acc = groups.setdefault(group, [0.0, 0.0])
            acc[0] += tokens
            acc[1] += tokens / s.gen_throughput
    throughput = sum(t / sec for t, sec in groups.values() if sec > 0) if groups else None
    printed = rate_num / rate_den if rate_den > 0 else None
    definition = accept_rate_definition(version)
    accept_len = len_num / len_den if len_den > 0 else None
    acceptance_rate = printed if definition == "drafts_only" else None
    exact: dict[str, dict[str, Any]] = {}
    len_bounds = _spread(lengths)
    if accept_len is not None and len_bounds is not None:
        exact["accept_len"] = _mean_exactness("accept len", lengths, len_bounds)
    rate_bounds = _spread(rates)
    if acceptance_rate is not None and rate_bounds is not None:
        exact["acceptance_rate"] = _mean_exactness("accept rate", rates, rate_bounds)
    if throughput is not None and throughputs:
        per_group = [_spread(values) for values in throughputs.values()]
        low = sum(b[0] for b in per_group if b is not None)
        high = sum(b[1] for b in per_group if b is not None)
        if all(len(set(values)) == 1 for values in throughputs.values()):
            exact["gen_throughput"] = exactness(
                "rounded",
                "each DP group's lines printed one gen throughput (two decimals): the window's is their sum",
                resolution=2 * PRINTED_HALF * len(throughputs),
                bounds=(low, high),
            )
        else:
            exact["gen_throughput"] = exactness(
                "bounded",
                "SGLang's gen throughput is each interval's tokens / its seconds (metrics_reporter.py "
                "report_decode_stats); a DP group's window throughput weighs its intervals by their seconds, "
                "which the line does not print (nor the tokens: #running-req is the last batch's size only): "
                "within each group it lies between the smallest and the largest printed value, and the bounds "
                "are the sums of the groups' (half a unit of the last digit included); the figure is an "
                "estimate within them (each interval's batch sizes taken as the mean of its first and last); "
                "the exact window figure comes from /metrics: sglang:generation_tokens_total over the "
                "window's seconds (the prometheus source)",
                bounds=(low, high),
            )
    details: dict[str, Any] = {
        "decode_lines": len(samples),
        "lines_with_accept_len": sum(1 for s in samples if s.accept_len is not None),
        "dp_groups": sorted(groups) if any(groups) else [],
        "accept_len_unweighted": _mean([s.accept_len for s in samples]),
        "accept_rate_printed": printed,
        "acceptance_rate_definition": definition if printed is not None else None,
        "engine_version": version,
    }
    if definition == "incl_bonus":
        details["acceptance_rate_incl_bonus"] = printed
        if rate_bounds is not None:
            details["acceptance_rate_incl_bonus_bounds"] = list(rate_bounds)
    return {
        "accept_len": accept_len,
        "acceptance_rate": acceptance_rate,
        "gen_throughput": throughput,
        "details": details,
        "exactness": exact,
    }


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
