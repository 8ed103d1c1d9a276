"""vLLM log lines: ``SpecDecoding metrics:`` and ``[Engine NNN:] Avg prompt throughput: ...``.

Format strings (vllm/v1/spec_decode/metrics.py, vllm/v1/metrics/loggers.py)::

    SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted
    throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s,
    Avg Draft acceptance rate: %.1f%%
    SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens   (older)
    Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d
    reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%

The per-position list is itself comma-separated (``0.820, 0.610, 0.430``): it is read up to ``, Avg Draft``.
Each line covers one logging interval. vLLM defines mean acceptance length as ``1 + accepted / drafts``
(bonus included) but does not print the number of drafts, so each line's drafts are recovered as
``accepted / (mean length - 1)``, an integer within what the 2-decimal rounding allows, cross-checked with
``drafted tokens / k`` (k = length of the per-position list), which is exact when every draft has k tokens.
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.metrics.lines import candidate_lines
from orchestrator.metrics.samples import ParseResult, VllmEngineSample, VllmSpecSample, recover_steps, to_float

__all__ = ["DEFINITIONS", "MARKERS", "aggregate_vllm", "parse_vllm"]

SPEC_MARKER = "SpecDecoding metrics:"
ENGINE_MARKER = "Avg prompt throughput:"
MARKERS = (SPEC_MARKER, ENGINE_MARKER)

_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)"
_ACCEPTED = re.compile(r"Accepted:\s*(\d+)\s*tokens")
_DRAFTED = re.compile(r"Drafted:\s*(\d+)\s*tokens")
_MEAN_LEN = re.compile(rf"Mean acceptance length:\s*({_NUM})")
_ACC_TPUT = re.compile(rf"Accepted throughput:\s*({_NUM})")
_DRAFT_TPUT = re.compile(rf"Drafted throughput:\s*({_NUM})")
_PER_POS = re.compile(r"Per-position acceptance rate:\s*(.*?)\s*(?:,\s*Avg Draft|$)")
_AVG_RATE = re.compile(rf"(?:Avg )?Draft acceptance rate:\s*({_NUM})\s*%")
_ENGINE = re.compile(
    rf"(?:Engine\s+(?P<eng>\d+)\s*:\s*)?Avg prompt throughput:\s*(?P<p>{_NUM})\s*tokens/s\s*,\s*"
    rf"Avg generation throughput:\s*(?P<g>{_NUM})\s*tokens/s"
)
_RUNNING = re.compile(r"Running:\s*(\d+)\s*reqs")
_WAITING = re.compile(r"(?:Waiting|Pending):\s*(\d+)\s*reqs")
_KV = re.compile(rf"GPU KV cache usage:\s*({_NUM})\s*%")
_PREFIX_HIT = re.compile(rf"Prefix cache (?:token )?hit rate:\s*({_NUM})\s*%")

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "vLLM mean acceptance length, bonus included: 1 + sum(accepted) / sum(drafts) over the window's "
        "SpecDecoding lines, each line's drafts recovered as accepted / (mean acceptance length - 1) "
        "(rounded to the integer the printed 2 decimals allow; drafted / k when that fits). None when a "
        "line that drafted has no recoverable drafts (older form, or nothing accepted and no per-position "
        "list): see details.accept_len_partial."
    ),
    "acceptance_rate": "vLLM draft acceptance rate: sum(accepted) / sum(drafted tokens) over the window (no bonus).",
    "gen_throughput": (
        "vLLM 'Avg generation throughput' in tokens/s: mean over the window's lines of each engine (the lines "
        "cover equal logging intervals), summed over engines."
    ),
}


def _group(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


def _spec_line(body: str) -> VllmSpecSample | None:
    accepted, drafted = _group(_ACCEPTED, body), _group(_DRAFTED, body)
    if accepted is None or drafted is None:
        return None
    sample = VllmSpecSample(accepted=int(accepted), drafted=int(drafted))
    sample.mean_acceptance_length = to_float(_group(_MEAN_LEN, body))
    sample.form = "current" if "Mean acceptance length" in body else "old"
    sample.accepted_throughput = to_float(_group(_ACC_TPUT, body))
    sample.drafted_throughput = to_float(_group(_DRAFT_TPUT, body))
    sample.draft_acceptance_rate = to_float(_group(_AVG_RATE, body))
    per_pos = _group(_PER_POS, body)
    if per_pos:
        rates = [to_float(part.strip()) for part in per_pos.split(",")]
        if rates and all(r is not None for r in rates):
            sample.per_position = [r for r in rates if r is not None]
    if sample.mean_acceptance_length is not None:
        k = len(sample.per_position)
        candidate = sample.drafted / k if k and sample.drafted is not None and sample.drafted % k == 0 else None
        sample.drafts, sample.drafts_exact = recover_steps(
            sample.accepted or 0, sample.mean_acceptance_length, candidate=candidate
        )
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
    )


def _int(raw: str | None) -> int | None:
    return int(raw) if raw is not None else None


def parse_vllm(text: str) -> ParseResult:
    """Every SpecDecoding and engine-throughput line of ``text``, behind any prefix."""
    result = ParseResult()
    for offset, line in candidate_lines(text, MARKERS):
        sample: VllmSpecSample | VllmEngineSample | None
        at = line.find(SPEC_MARKER)
        sample = _spec_line(line[at:]) if at != -1 else _engine_line(line)
        if sample is None:
            result.skip(offset, line)
            continue
        result.samples.append(sample)
        result.read(offset)
    return result


def aggregate_vllm(spec: list[VllmSpecSample], engines: list[VllmEngineSample]) -> dict[str, Any]:
    """Window figures (see DEFINITIONS) from the window's spec and engine lines."""
    accepted = sum(s.accepted or 0 for s in spec)
    drafted = sum(s.drafted or 0 for s in spec)
    with_drafts = [s for s in spec if s.drafts is not None]
    drafts = sum(s.drafts or 0 for s in with_drafts)
    accepted_known = sum(s.accepted or 0 for s in with_drafts)
    per_position: list[float] | None = None
    ks = {len(s.per_position) for s in with_drafts if s.per_position}
    if len(ks) == 1 and drafts > 0:
        k = ks.pop()
        rows = [s for s in with_drafts if len(s.per_position) == k]
        den = sum(s.drafts or 0 for s in rows)
        if den > 0:
            per_position = [sum(s.per_position[i] * (s.drafts or 0) for s in rows) / den for i in range(k)]
    by_engine: dict[int, list[float]] = {}
    for e in engines:
        if e.generation_throughput is not None:
            by_engine.setdefault(e.engine_index or 0, []).append(e.generation_throughput)
    throughput = sum(sum(v) / len(v) for v in by_engine.values()) if by_engine else None
    partial = 1.0 + accepted_known / drafts if drafts > 0 else None
    unknown = [s for s in spec if s.drafts is None and s.drafted]
    return {
        # Lines whose drafts cannot be recovered would bias the window if left out: no figure then.
        "accept_len": partial if not unknown else None,
        "acceptance_rate": accepted / drafted if drafted > 0 else None,
        "gen_throughput": throughput,
        "details": {
            "spec_lines": len(spec),
            "engine_lines": len(engines),
            "accepted": accepted,
            "drafted": drafted,
            "drafts": drafts if with_drafts else None,
            "drafts_exact": bool(with_drafts) and all(s.drafts_exact for s in with_drafts),
            "lines_without_drafts": len(unknown),
            "accept_len_partial": partial,
            "per_position_acceptance": per_position,
            "engines": sorted(by_engine),
        },
    }
