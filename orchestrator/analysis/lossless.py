"""The lossless check: at temperature 0, speculative decoding must not change a single token of the output,
beyond what the server's own batching does to the autoregressive output.

The sweep's probe (:mod:`orchestrator.sweep.lossless`) keeps each configuration's temperature-0 answers in
``lossless/<deployment id>.jsonl`` (:data:`LOSSLESS_DIR`). Every configuration answers each prompt alone (one
request at a time); the autoregressive baseline answers each prompt alone twice and, batched, with the sweep's
concurrencies in flight (each answer's ``batch``).

**Why the baseline against itself.** A real engine's kernels are not batch-invariant: which requests share a
step changes the order of its floating-point reductions (bf16 on a CPU, or GPU kernels that split work by
batch size), and a near-tie between two tokens can flip. A speculative verify step computes k + 1 positions in
one pass, another shape again. So the speculative output can differ from the autoregressive one without any
speculation bug, exactly where the autoregressive output differs from itself under another batching.

**The verdict** (:func:`check_lossless`), per host:

- the baseline's own divergence on each prompt: the first token where any of its answers (alone, alone again,
  batched at C) differs from its first answer alone, and which two; a prompt where all agree is *stable*;
- each speculative answer's reach: the first token where it leaves the baseline answer it agrees with longest
  (the token counted in that answer: an autoregressive stream commits one token per chunk; where the server
  sent cumulative token counts, those);
- a prompt is ``identical`` (the answer equals one of the baseline's), ``within_variance`` (it differs, at or
  after the token where the baseline differs from itself), ``near_tie`` (it differs earlier, or on a stable
  prompt, but where it leaves the baseline it took one of the baseline's own likeliest alternatives, within
  ``tie_margin`` nats of the token the baseline chose: see below), ``lossy`` (it differs on a prompt the
  baseline is stable on, or earlier than the baseline's own divergence, and not at a near tie) or
  ``inconclusive`` (it differs and the baseline answered that prompt once only, so its variance there is
  unknown); a prompt that cannot be compared (an error, another prompt) is ``unchecked``;
- a configuration is **lossy beyond the baseline's variance** when one prompt is lossy, **inconclusive** when none
  is and one is inconclusive or no prompt was compared, else **lossless** (``exact`` when every answer is
  identical to one of the baseline's).

**Near ties.** The baseline's batchings cannot reproduce every shape a verify step computes in (k + 1
positions of one request: llama.cpp's CPU kernels take another path for a batch of rows than for one row), so a
baseline stable under its own batchings can still flip a near tie under speculation. The baseline's answers carry
each token's likeliest alternatives (``logprobs``, :mod:`orchestrator.sweep.lossless`); where a speculative
answer leaves the baseline on a token that was one of them, within the host's tie margin, that is the engine's
arithmetic, not a speculation bug. The margin is ``tie_margin`` nats (default :data:`TIE_MARGIN`;
``checks.lossless_tie_margin``, 0 turns near ties off) or, where the baseline's own answers moved further, twice
the largest shift of a chosen token's log-probability between them over the tokens they share (each of two
tokens may move that far, so their gap twice as far), at most :data:`MAX_TIE_MARGIN`. On llama.cpp's CPU build
the chosen tokens' log-probabilities moved by up to 0.07 nats between two answers alone and 0.20 nats batched
at C=8 (docs/llamacpp.md, "Lossless"): a margin of 0.40 there. That is the engine's arithmetic and not a
speculation bug: a wrong draft accepted by a broken verify lands on a token the target model did not rank
near the top. vLLM's own speculative-decoding correctness tests accept the same kind of divergence (the token
one side chose is among the other's top log-probabilities: tests/models/utils.py ``check_logprobs_close``);
the margin here is narrower than "anywhere in the top 5". A near tie is signed: 0 <= chosen - alternative <=
margin, both finite. Where the baseline's log-probabilities rank its chosen token *below* the one the answer
took, or are not finite, they are not the distribution it chose from (vLLM returns log-probabilities before its
logits processors by default, so a penalised greedy choice can sit below its runner-up): that is a finding
about the baseline (``baseline_logprobs``), and the divergence is judged as if they were absent. Without
log-probabilities (SGLang's ``/generate``, a server that ignores the request's ``logprobs``) the check judges
as before.

An engine with a batch-invariant mode makes the baseline stable under batching (docs/trust.md, "Lossless").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.files import read_bounded
from orchestrator.runs.reading import parse_json

__all__ = [
    "LOSSLESS_DIR",
    "MAX_TIE_MARGIN",
    "TIE_MARGIN",
    "ConfigVerdict",
    "Divergence",
    "HostVerdict",
    "LosslessFinding",
    "LosslessResult",
    "PromptVerdict",
    "check_lossless",
    "first_difference",
    "logprob_shift",
    "read_answers",
]

#: The run directory's folder of probe answers, one ``<deployment id>.jsonl`` each (written by the sweep).
LOSSLESS_DIR = "lossless"
_CONTEXT = 24
#: Two tokens whose log-probabilities lie this close (nats) are a near tie the engine's arithmetic may flip:
#: about 1.28 to 1 in probability (bf16 keeps 8 bits of mantissa: a logit near 20 is rounded in steps of 0.125).
#: A host whose baseline moved further against itself gets twice that shift, up to MAX_TIE_MARGIN.
TIE_MARGIN = 0.25
#: The widest margin the baseline's own shifts can open: e (2.7 to 1) in probability. Beyond it an engine is
#: too unsteady for a flip to say anything, and a wrong token the model ranked second would pass.
MAX_TIE_MARGIN = 1.0
_MAX_FILE = 256 * 1024 * 1024


def first_difference(a: str, b: str) -> int | None:
    """The first character index where ``a`` and ``b`` differ (one a prefix of the other: the shorter's
    length), or None when they are equal."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    for i in range(limit):
        if a[i] != b[i]:
            return i
    return limit


def _token_at(answer: Mapping[str, Any], position: int) -> int:
    """The 0-based token of ``answer`` holding character ``position``: from its cumulative token counts where
    the stream carried them, else its chunks (one token each in an autoregressive stream)."""
    ends = answer.get("chunk_ends") or []
    tokens = answer.get("chunk_tokens")
    for i, end in enumerate(ends):
        if position < end:
            if tokens and tokens[i] is not None:
                before = tokens[i - 1] if i > 0 and tokens[i - 1] is not None else 0
                return int(before)
            return i
    return len(ends)


def batching(answer: Mapping[str, Any]) -> str:
    """How a baseline answer was asked: ``alone``, ``alone again`` or ``batched at C=N``."""
    batch = answer.get("batch") or 1
    if isinstance(batch, int) and batch > 1:
        return f"batched at C={batch}"
    return "alone" if answer.get("run", 1) == 1 else "alone again"


@dataclass(frozen=True)
class Divergence:
    """Where two answers of one prompt first differ: the token (of the first's) and the character."""

    prompt_index: int
    token: int
    char: int
    between: str  # "alone vs batched at C=4"

    def text(self) -> str:
        return f"prompt {self.prompt_index} at token {self.token} ({self.between})"

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_index": self.prompt_index, "token": self.token, "char": self.char, "between": self.between}


@dataclass(frozen=True)
class PromptVerdict:
    """One speculative answer against the baseline's answers to the same prompt."""

    prompt_index: int
    outcome: str  # identical | within_variance | near_tie | lossy | inconclusive | unchecked
    token: int | None = None  # where it leaves the baseline answer it agrees with longest
    char: int | None = None
    baseline: Divergence | None = None  # the baseline's own divergence on this prompt (None: stable)
    why: str = ""
    evidence: tuple[str, ...] = ()
    #: The baseline's log-probabilities where this answer leaves it rank its chosen token below the one this
    #: answer took, or are not finite: a finding about the baseline (they excuse nothing); None when sound.
    baseline_logprobs: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_index": self.prompt_index,
            "outcome": self.outcome,
            "token": self.token,
            "char": self.char,
            "baseline_divergence": None if self.baseline is None else self.baseline.to_dict(),
            "why": self.why,
        } | ({"baseline_logprobs": self.baseline_logprobs} if self.baseline_logprobs else {})


@dataclass(frozen=True)
class ConfigVerdict:
    """One configuration's verdict on one host: ``lossless``, ``lossy`` (beyond the baseline's own variance)
    or ``inconclusive``."""

    host: str
    config: str
    verdict: str
    exact: bool  # lossless and every answer identical to one of the baseline's
    prompts: list[PromptVerdict]

    def count(self, outcome: str) -> int:
        return sum(1 for p in self.prompts if p.outcome == outcome)

    @property
    def compared(self) -> int:
        return sum(1 for p in self.prompts if p.outcome != "unchecked")

    def text(self) -> str:
        """The verdict as one sentence: ``ngram(k=2): lossless: each of 5 answers ...``."""
        return f"{self.config}: {self.verdict}{self.detail()}"

    def detail(self) -> str:
        """The sentence after the configuration and the verdict word (``: each of 5 answers equals ...``), with
        the prompts that could not be compared counted (a flaky configuration's failed answers)."""
        return self._why() + self._not_compared()

    def _why(self) -> str:
        n = self.compared
        if self.verdict == "lossy":
            bad = [p for p in self.prompts if p.outcome == "lossy"]
            return " beyond the baseline's own variance: " + "; ".join(p.why for p in bad)
        if self.verdict == "inconclusive":
            if not n:
                return ": no answer could be compared with the baseline's"
            unsure = [p for p in self.prompts if p.outcome == "inconclusive"]
            return ": " + "; ".join(p.why for p in unsure)
        if self.exact:
            return f": each of {n} answers equals one of the baseline's"
        within = [p for p in self.prompts if p.outcome in ("within_variance", "near_tie")]
        where = (
            "none before the baseline differs from itself"
            if all(p.outcome == "within_variance" for p in within)
            else "each where the baseline differs from itself or at a near tie of its own"
        )
        return (
            f" within the baseline's own variance: {len(within)} of {n} answers differ "
            f"from the baseline's, {where} (" + "; ".join(p.why for p in within) + ")"
        )

    def _not_compared(self) -> str:
        unchecked = self.count("unchecked")
        if not unchecked or not self.compared:  # none compared: the verdict's own sentence says so
            return ""
        return f"; {unchecked} of {len(self.prompts)} prompts not compared (their answers failed or are missing)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "config": self.config,
            "verdict": self.verdict,
            "exact": self.exact,
            "compared": self.compared,
            "identical": self.count("identical"),
            "within_variance": self.count("within_variance"),
            "near_tie": self.count("near_tie"),
            "lossy": self.count("lossy"),
            "inconclusive": self.count("inconclusive"),
            "unchecked": self.count("unchecked"),
            "text": self.text(),
            "prompts": [p.to_dict() for p in self.prompts],
        }


@dataclass(frozen=True)
class HostVerdict:
    """The lossless verdict on one host: the baseline's own divergence and each configuration's verdict."""

    host: str
    baseline: str  # the baseline's label
    batchings: list[str]  # how the baseline answered: alone, alone again, batched at C=N
    prompts: list[int]  # the prompts the baseline answered
    divergences: list[Divergence]  # per prompt where the baseline differs from itself
    configs: list[ConfigVerdict]
    logprob_shift: float | None = None  # the largest shift of a chosen token's log-probability between its answers
    tie_margin: float = 0.0  # the near-tie margin its configurations were judged with (nats)

    @property
    def stable(self) -> list[int]:
        unstable = {d.prompt_index for d in self.divergences}
        return [p for p in self.prompts if p not in unstable]

    def baseline_text(self) -> str:
        """The baseline against itself, as one sentence."""
        how = ", ".join(self.batchings)
        if len(self.batchings) < 2:
            return f"{self.baseline} answered each prompt once ({how}): its own variance was not measured"
        shift = (
            ""
            if self.logprob_shift is None
            else f"; its chosen tokens' log-probabilities moved by up to {self.logprob_shift:.3f} nats between its "
            f"answers, near ties within {self.tie_margin:.3f} nats taken as the engine's arithmetic"
        )
        if not self.divergences:
            return f"{self.baseline} gave the same answer to each of {len(self.prompts)} prompts ({how}){shift}"
        return (
            f"{self.baseline} differs from itself on {len(self.divergences)} of {len(self.prompts)} prompts ({how}): "
            + "; ".join(d.text() for d in self.divergences)
            + shift
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "baseline": self.baseline,
            "batchings": list(self.batchings),
            "prompts": list(self.prompts),
            "stable_prompts": self.stable,
            "baseline_divergences": [d.to_dict() for d in self.divergences],
            "baseline_text": self.baseline_text(),
            "logprob_shift": self.logprob_shift,
            "tie_margin": self.tie_margin,
            "configurations": [c.to_dict() for c in self.configs],
        }


@dataclass(frozen=True)
class LosslessFinding:
    """One thing the check found: ``kind`` is ``lossy``, ``inconclusive``, ``lossless`` (a configuration's
    verdict), ``baseline`` (the baseline against itself), ``baseline_logprobs`` (the baseline's log-probabilities
    where an answer leaves it rank its chosen token below the answer's, or are not finite), ``unchecked`` (an
    answer is missing or failed) or ``no_baseline``."""

    kind: str
    host: str
    config: str | None
    message: str
    prompt_index: int | None = None
    position: int | None = None
    token: int | None = None
    evidence: tuple[str, ...] = ()
    #: A ``lossless`` verdict whose every answer equals one of the baseline's (no near tie, no variance used).
    exact: bool = False


@dataclass
class LosslessResult:
    findings: list[LosslessFinding] = field(default_factory=list)
    compared: int = 0  # answers compared with the baseline's
    configurations: int = 0
    passed: bool = True  # no configuration is lossy beyond the baseline's variance
    hosts: list[HostVerdict] = field(default_factory=list)


def _context(text: str, position: int) -> str:
    start = max(0, position - _CONTEXT)
    return repr(text[start : position + _CONTEXT])


def _baseline_divergence(index: int, base: list[Mapping[str, Any]]) -> Divergence | None:
    """The earliest point where one of the baseline's answers to a prompt differs from its first (the earliest
    over all its pairs too: a common prefix with the first bounds the pair's)."""
    ref = base[0]
    found: Divergence | None = None
    for other in base[1:]:
        position = first_difference(ref.get("text", ""), other.get("text", ""))
        if position is None:
            continue
        token = _token_at(ref, position)
        if found is None or (token, position) < (found.token, found.char):
            found = Divergence(index, token, position, f"{batching(ref)} vs {batching(other)}")
    return found


def _near_tie(text: str, base: list[Mapping[str, Any]], position: int, margin: float) -> tuple[str | None, str | None]:
    """Where ``text`` leaves the baseline at character ``position``: the near tie it took, as words, when a
    baseline answer that reaches that far carries its tokens' log-probabilities (``logprobs``) and the token
    ``text`` goes on with there is one of its alternatives at most ``margin`` nats below the one it chose
    (0 <= chosen - alternative <= margin, both finite); else None. Second, what is wrong with the baseline's
    log-probabilities there when they rank its chosen token below that alternative or are not finite (a
    finding about the baseline, which never excuses the divergence); else None."""
    if margin <= 0:
        return None, None
    for other in base:
        rows, spelt = other.get("logprobs"), other.get("text", "")
        if not isinstance(rows, list) or first_difference(spelt, text) != position:
            continue
        start = 0
        for index, row in enumerate(rows):
            if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
                break
            chosen, logprob, alternatives = row
            if not _is_number(logprob) or not isinstance(alternatives, list):
                break
            if spelt[start : start + len(chosen)] != chosen and start < len(spelt):
                break  # the tokens do not spell the text (bytes of one character split): no judgement
            # (past the text's end: the stop token the text leaves out, e.g. vLLM's <|im_end|>)
            if position >= start + len(chosen):
                start += len(chosen)
                continue
            rest = text[start:]
            pairs = [a for a in alternatives if isinstance(a, list) and len(a) == 2 and isinstance(a[0], str)]
            for alternative, alt_logprob in pairs:
                if not _is_number(alt_logprob):
                    continue
                took = (
                    alternative != chosen
                    and bool(rest)
                    and (rest.startswith(alternative) or alternative.startswith(rest))
                )
                if not (took and alternative):
                    continue
                gap = logprob - alt_logprob
                if not (math.isfinite(logprob) and math.isfinite(alt_logprob)) or gap < 0:
                    # Not the distribution the baseline chose from (vLLM gives log-probabilities before its logits
                    # processors by default: a penalised greedy choice ranks below its runner-up): no tie is read
                    # from it, and the divergence stands.
                    unread = (
                        f"the baseline's log-probabilities at token {index} rank its chosen {chosen!r} "
                        f"({logprob:.3f}) below {alternative!r} ({alt_logprob:.3f}), the token this answer took"
                        if math.isfinite(gap)
                        else f"the baseline's log-probabilities at token {index} are not finite ({chosen!r} "
                        f"{logprob}, {alternative!r} {alt_logprob})"
                    )
                    return None, unread + ": not the distribution it chose from, so no near tie is read from them"
                if gap <= margin:
                    return (
                        f"a near tie at token {index}: the baseline chose {chosen!r} ({logprob:.3f}) over "
                        f"{alternative!r} ({alt_logprob:.3f}), {gap:.3f} nats apart (tie margin "
                        f"{margin:g}), and this answer took {alternative!r}"
                    ), None
            break
    return None, None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def logprob_shift(answers: Sequence[Mapping[str, Any]]) -> float | None:
    """The largest shift of a chosen token's log-probability between one prompt's baseline answers that carry
    them and the first of those, over the tokens they share (up to the first that differs); None when fewer than
    two carry them."""
    rows = [a["logprobs"] for a in answers if isinstance(a.get("logprobs"), list) and a["logprobs"]]
    if len(rows) < 2:
        return None
    shift = 0.0
    for other in rows[1:]:
        for mine, theirs in zip(rows[0], other, strict=False):
            if not (isinstance(mine, list) and isinstance(theirs, list) and mine[:1] == theirs[:1]):
                break
            if _is_number(mine[1]) and _is_number(theirs[1]):
                moved = abs(float(mine[1]) - float(theirs[1]))
                if math.isfinite(moved):  # a non-finite log-probability measures no shift (and opens no margin)
                    shift = max(shift, moved)
    return shift


def _judge(
    index: int, answer: Mapping[str, Any], base: list[Mapping[str, Any]], label: str, tie_margin: float = TIE_MARGIN
) -> PromptVerdict:
    """One speculative answer against the baseline's (error-free) answers to the same prompt."""
    text = answer.get("text", "")
    divergence = _baseline_divergence(index, base)
    reach: tuple[int, int, Mapping[str, Any]] | None = None  # (token, char, the baseline answer)
    for other in base:
        position = first_difference(other.get("text", ""), text)
        if position is None:
            return PromptVerdict(index, "identical", baseline=divergence, why=f"prompt {index}: identical")
        token = _token_at(other, position)
        if reach is None or (token, position) > (reach[0], reach[1]):
            reach = (token, position, other)
    assert reach is not None
    token, position, nearest = reach
    evidence = (
        f"baseline: {_context(nearest.get('text', ''), position)} ({batching(nearest)})",
        f"{label}: {_context(text, position)}",
    )
    where = f"prompt {index} differs from every baseline answer at token {token} (character {position})"
    if len(base) < 2:
        return PromptVerdict(
            index,
            "inconclusive",
            token,
            position,
            None,
            f"{where}, and the baseline answered it once only (its own variance there unknown)",
            evidence,
        )
    unread: str | None = None
    if divergence is None or token < divergence.token:
        tie, unread = _near_tie(text, base, position, tie_margin)
        if tie:
            return PromptVerdict(index, "near_tie", token, position, divergence, f"{where}, {tie}", evidence)
    also = f" ({unread})" if unread else ""
    if divergence is None:
        return PromptVerdict(
            index,
            "lossy",
            token,
            position,
            None,
            f"{where}, where the baseline is stable ({len(base)} answers alike){also}",
            evidence,
            unread,
        )
    if token < divergence.token:
        return PromptVerdict(
            index,
            "lossy",
            token,
            position,
            divergence,
            f"{where}, before the baseline differs from itself (token {divergence.token}, {divergence.between}){also}",
            evidence,
            unread,
        )
    return PromptVerdict(
        index,
        "within_variance",
        token,
        position,
        divergence,
        f"prompt {index} at token {token}, the baseline at token {divergence.token} ({divergence.between})",
        evidence,
    )


def check_lossless(
    answers: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
    labels: Mapping[tuple[str, str], str],
    baseline: Mapping[str, tuple[str, str] | None],
    tie_margin: float = TIE_MARGIN,
) -> LosslessResult:
    """Judge every deployment's answers against its host's baseline (see the module docstring).

    ``answers``: (host, deployment id) -> answer dicts (``Answer.to_dict``); ``labels``: the same keys ->
    configuration label; ``baseline``: host -> the (host, deployment id) of its autoregressive baseline;
    ``tie_margin``: how close (nats) two of the baseline's likeliest tokens are a near tie (0: never)."""
    result = LosslessResult()
    for host in sorted({h for h, _d in answers}):
        key = baseline.get(host)
        if key is None or key not in answers:
            result.findings.append(
                LosslessFinding(
                    "no_baseline", host, None, "no autoregressive baseline answered the probe: nothing to check against"
                )
            )
            continue
        by_prompt: dict[int, list[Mapping[str, Any]]] = {}
        for a in sorted(answers[key], key=lambda a: (a.get("run", 1), a.get("batch") or 1)):
            if not a.get("error"):
                by_prompt.setdefault(int(a["prompt_index"]), []).append(a)
        batchings = list(dict.fromkeys(batching(a) for rows in by_prompt.values() for a in rows))
        divergences = [d for i, rows in sorted(by_prompt.items()) if (d := _baseline_divergence(i, rows))]
        shifts = [s for rows in by_prompt.values() if (s := logprob_shift(rows)) is not None]
        shift = max(shifts) if shifts else None
        margin = min(max(tie_margin, 2 * (shift or 0.0)), MAX_TIE_MARGIN) if tie_margin > 0 else 0.0
        verdicts: list[ConfigVerdict] = []
        for other, theirs in answers.items():
            if other[0] != host or other == key:
                continue
            result.configurations += 1
            label = labels.get(other, other[1])
            prompts: list[PromptVerdict] = []
            for answer in sorted(theirs, key=lambda a: int(a["prompt_index"])):
                index = int(answer["prompt_index"])
                base = by_prompt.get(index) or []
                if not base or answer.get("error"):
                    why = answer.get("error") or "the baseline has no answer to it"
                    prompts.append(
                        PromptVerdict(index, "unchecked", why=f"prompt {index} could not be compared: {why}")
                    )
                    continue
                if base[0].get("prompt_sha256") != answer.get("prompt_sha256"):
                    prompts.append(
                        PromptVerdict(index, "unchecked", why=f"prompt {index} is not the prompt the baseline answered")
                    )
                    continue
                result.compared += 1
                prompts.append(_judge(index, answer, base, label, margin))
            outcomes = {p.outcome for p in prompts}
            if "lossy" in outcomes:
                verdict = "lossy"
            elif "inconclusive" in outcomes or not (outcomes - {"unchecked"}):
                verdict = "inconclusive"
            else:
                verdict = "lossless"
            exact = verdict == "lossless" and not outcomes & {"within_variance", "near_tie"}
            verdicts.append(ConfigVerdict(host, label, verdict, exact, prompts))
        verdicts.sort(key=lambda v: v.config)
        host_verdict = HostVerdict(
            host, labels.get(key, key[1]), batchings, sorted(by_prompt), divergences, verdicts, shift, margin
        )
        result.hosts.append(host_verdict)
        _findings(result, host_verdict)
    return result


def _findings(result: LosslessResult, host: HostVerdict) -> None:
    """The check's findings of one host's verdict: the baseline against itself, then each configuration."""
    if host.divergences or len(host.batchings) < 2:
        first = host.divergences[0] if host.divergences else None
        result.findings.append(
            LosslessFinding(
                "baseline",
                host.host,
                host.baseline,
                "the autoregressive baseline against itself: " + host.baseline_text(),
                None if first is None else first.prompt_index,
                None if first is None else first.char,
                None if first is None else first.token,
            )
        )
    for verdict in host.configs:
        for p in verdict.prompts:
            if p.outcome == "unchecked":
                result.findings.append(LosslessFinding("unchecked", host.host, verdict.config, p.why, p.prompt_index))
            if p.baseline_logprobs:
                result.findings.append(
                    LosslessFinding(
                        "baseline_logprobs",
                        host.host,
                        host.baseline,
                        f"the autoregressive baseline on prompt {p.prompt_index}, where {verdict.config} leaves it: "
                        + p.baseline_logprobs,
                        p.prompt_index,
                        p.char,
                        p.token,
                    )
                )
        shown = next((p for p in verdict.prompts if p.outcome == verdict.verdict), None)
        if verdict.verdict == "lossy":
            result.passed = False
        result.findings.append(
            LosslessFinding(
                verdict.verdict,
                host.host,
                verdict.config,
                verdict.text(),
                None if shown is None else shown.prompt_index,
                None if shown is None else shown.char,
                None if shown is None else shown.token,
                () if shown is None else shown.evidence,
                exact=verdict.exact,
            )
        )


def read_answers(run_path: Path) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], dict[tuple[str, str], str]]:
    """Every probe answer kept under ``run_path/lossless``: (host, deployment id) -> its answers, and -> its
    configuration label."""
    answers: dict[tuple[str, str], list[dict[str, Any]]] = {}
    labels: dict[tuple[str, str], str] = {}
    for path in sorted((run_path / LOSSLESS_DIR).rglob("*.jsonl")):
        try:
            lines = read_bounded(path, _MAX_FILE).decode("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                answer = parse_json(line)
            except ValueError:
                continue
            if not isinstance(answer, dict) or "prompt_index" not in answer:
                continue
            key = (str(answer.get("host")), str(answer.get("deployment_id")))
            answers.setdefault(key, []).append(answer)
            labels[key] = str(answer.get("label"))
    return answers, labels
