"""The lossless check: at temperature 0, speculative decoding must not change a single token of the output.

The sweep's probe (:mod:`orchestrator.sweep.lossless`) keeps each configuration's temperature-0 answers in
``lossless/<deployment id>.jsonl`` (:data:`LOSSLESS_DIR`); the autoregressive baseline answers every prompt twice.

**The check** (:func:`check_lossless`, run by the analysis as the ``lossless`` check): every configuration's
answer to each prompt against the autoregressive baseline's on the same host; a difference is an error naming
the configuration, the prompt and the first position that differs: the character, and the token of the
baseline's answer (its chunks are its tokens: an autoregressive stream commits one token per chunk; where the
server sent cumulative token counts, those), with a few characters of context from both answers. If the
baseline's two answers differ, the server is not deterministic at temperature 0 and no configuration can be
checked against it, which the check says instead of failing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LOSSLESS_DIR",
    "LosslessFinding",
    "LosslessResult",
    "check_lossless",
    "first_difference",
]

#: The run directory's folder of probe answers, one ``<deployment id>.jsonl`` each (written by the sweep).
LOSSLESS_DIR = "lossless"
_CONTEXT = 24


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


@dataclass(frozen=True)
class LosslessFinding:
    """One thing the check found: ``kind`` is ``changed`` (an answer differs from the baseline's),
    ``nondeterministic`` (the baseline's two answers differ), ``unchecked`` (an answer is missing or failed)
    or ``no_baseline``."""

    kind: str
    host: str
    config: str | None
    message: str
    prompt_index: int | None = None
    position: int | None = None
    token: int | None = None
    evidence: tuple[str, ...] = ()


@dataclass
class LosslessResult:
    findings: list[LosslessFinding] = field(default_factory=list)
    compared: int = 0  # answers compared with the baseline's
    configurations: int = 0
    passed: bool = True


def _context(text: str, position: int) -> str:
    start = max(0, position - _CONTEXT)
    return repr(text[start : position + _CONTEXT])


def check_lossless(
    answers: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
    labels: Mapping[tuple[str, str], str],
    baseline: Mapping[str, tuple[str, str] | None],
) -> LosslessResult:
    """Compare every deployment's answers with its host's baseline (see the module docstring).

    ``answers``: (host, deployment id) -> answer dicts (``Answer.to_dict``); ``labels``: the same keys ->
    configuration label; ``baseline``: host -> the (host, deployment id) of its autoregressive baseline."""
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
        base = answers[key]
        first = {a["prompt_index"]: a for a in base if a.get("run", 1) == 1}
        second = {a["prompt_index"]: a for a in base if a.get("run", 1) == 2}
        deterministic = True
        for index, again in sorted(second.items()):
            one = first.get(index)
            if one is None or one.get("error") or again.get("error"):
                continue
            position = first_difference(one.get("text", ""), again.get("text", ""))
            if position is not None:
                deterministic = False
                result.findings.append(
                    LosslessFinding(
                        "nondeterministic",
                        host,
                        labels.get(key),
                        f"the autoregressive baseline answered prompt {index} differently twice (first at "
                        f"character {position}, token {_token_at(one, position)}): the server is not deterministic "
                        "at temperature 0, so no configuration is checked against it",
                        index,
                        position,
                        _token_at(one, position),
                        (
                            f"first:  {_context(one.get('text', ''), position)}",
                            f"second: {_context(again.get('text', ''), position)}",
                        ),
                    )
                )
                break
        if not deterministic:
            continue
        for other, theirs in answers.items():
            if other[0] != host or other == key:
                continue
            result.configurations += 1
            label = labels.get(other, other[1])
            differing: list[LosslessFinding] = []
            for answer in theirs:
                index = answer["prompt_index"]
                ours = first.get(index)
                if ours is None or ours.get("error") or answer.get("error"):
                    why = answer.get("error") or (ours or {}).get("error") or "the baseline has no answer to it"
                    result.findings.append(
                        LosslessFinding("unchecked", host, label, f"prompt {index} could not be compared: {why}", index)
                    )
                    continue
                if ours.get("prompt_sha256") != answer.get("prompt_sha256"):
                    result.findings.append(
                        LosslessFinding(
                            "unchecked", host, label, f"prompt {index} is not the prompt the baseline answered", index
                        )
                    )
                    continue
                result.compared += 1
                position = first_difference(ours.get("text", ""), answer.get("text", ""))
                if position is None:
                    continue
                token = _token_at(ours, position)
                differing.append(
                    LosslessFinding(
                        "changed",
                        host,
                        label,
                        f"the output differs from the autoregressive baseline's for prompt {index}: first at "
                        f"character {position}, token {token} of the baseline's answer (both counted from 0)",
                        index,
                        position,
                        token,
                        (
                            f"baseline: {_context(ours.get('text', ''), position)}",
                            f"{label}: {_context(answer.get('text', ''), position)}",
                        ),
                    )
                )
            if differing:
                result.passed = False
                first_found = differing[0]
                others = [f"prompt {f.prompt_index} at character {f.position}" for f in differing[1:]]
                message = first_found.message + (
                    f"; {len(differing)} of {len(theirs)} prompts differ ({', '.join(others)})" if others else ""
                )
                result.findings.append(
                    LosslessFinding(
                        "changed",
                        host,
                        label,
                        message,
                        first_found.prompt_index,
                        first_found.position,
                        first_found.token,
                        first_found.evidence,
                    )
                )
    return result
