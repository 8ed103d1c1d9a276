"""The lossless verdict (orchestrator/analysis/lossless.py): speculation judged against what the autoregressive
baseline's own batching does to its output (issue 48)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.analysis.lossless import check_lossless

WORDS = [f" w{i}" for i in range(40)]


def answer(
    words: list[str], *, index: int = 0, run: int = 1, batch: int = 1, error: str | None = None
) -> dict[str, Any]:
    """An answer streamed one word (one token) a chunk."""
    text, ends = "", []
    for word in words:
        text += word
        ends.append(len(text))
    return {
        "prompt_index": index,
        "prompt_sha256": f"p{index}",
        "run": run,
        "batch": batch,
        "text": text,
        "chunk_ends": ends,
        "chunk_tokens": None,
        "error": error,
    }


def flipped(at: int, words: list[str] = WORDS) -> list[str]:
    """``words`` with the token at ``at`` and everything after it changed."""
    return words[:at] + [w.replace("w", "x") for w in words[at:]]


def judge(base: list[dict[str, Any]], spec: list[dict[str, Any]]) -> Any:
    result = check_lossless(
        {("h", "ar"): base, ("h", "ng"): spec},
        {("h", "ar"): "autoregressive", ("h", "ng"): "ngram(k=2)"},
        {"h": ("h", "ar")},
    )
    [host] = result.hosts
    [verdict] = host.configs
    return result, host, verdict


def baseline(*prompts: tuple[list[str], list[str], list[str]]) -> list[dict[str, Any]]:
    """Each prompt's answers alone, alone again and batched at C=4."""
    out: list[dict[str, Any]] = []
    for index, (alone, again, batched) in enumerate(prompts):
        out += [
            answer(alone, index=index),
            answer(again, index=index, run=2),
            answer(batched, index=index, run=3, batch=4),
        ]
    return out


def test_identical_answers_are_lossless_exact() -> None:
    result, host, verdict = judge(baseline((WORDS, WORDS, WORDS)), [answer(WORDS)])
    assert (verdict.verdict, verdict.exact, result.passed) == ("lossless", True, True)
    assert host.divergences == [] and host.stable == [0]
    assert host.batchings == ["alone", "alone again", "batched at C=4"]
    assert "each of 1 answers equals one of the baseline's" in verdict.text()


def test_a_difference_no_earlier_than_the_baseline_own_is_within_its_variance() -> None:
    base = baseline((WORDS, WORDS, flipped(10)))
    result, host, verdict = judge(base, [answer(flipped(12))])
    assert [(d.prompt_index, d.token, d.between) for d in host.divergences] == [(0, 10, "alone vs batched at C=4")]
    assert (verdict.verdict, verdict.exact, result.passed) == ("lossless", False, True)
    [prompt] = verdict.prompts
    assert (prompt.outcome, prompt.token, prompt.baseline.token if prompt.baseline else None) == (
        "within_variance",
        12,
        10,
    )
    assert "baseline at token 10 (alone vs batched at C=4)" in verdict.text()
    # The same speculative answer as the batched baseline's: identical to one of the baseline's answers.
    assert judge(base, [answer(flipped(10))])[2].prompts[0].outcome == "identical"


def test_a_difference_before_the_baseline_own_is_lossy() -> None:
    result, _host, verdict = judge(baseline((WORDS, WORDS, flipped(10))), [answer(flipped(3))])
    assert (verdict.verdict, result.passed) == ("lossy", False)
    [prompt] = verdict.prompts
    assert (prompt.outcome, prompt.token) == ("lossy", 3)
    assert "before the baseline differs from itself (token 10, alone vs batched at C=4)" in verdict.text()
    [finding] = [f for f in result.findings if f.kind == "lossy"]
    assert (finding.config, finding.prompt_index, finding.token) == ("ngram(k=2)", 0, 3)


def test_a_difference_on_a_prompt_the_baseline_is_stable_on_is_lossy() -> None:
    base = baseline((WORDS, WORDS, flipped(5)), (WORDS, WORDS, WORDS))
    _result, host, verdict = judge(base, [answer(flipped(20)), answer(flipped(30), index=1)])
    assert host.stable == [1]
    assert [p.outcome for p in verdict.prompts] == ["within_variance", "lossy"]
    assert verdict.verdict == "lossy" and "where the baseline is stable (3 answers alike)" in verdict.text()


def test_a_baseline_answered_once_leaves_a_difference_inconclusive() -> None:
    result, host, verdict = judge([answer(WORDS)], [answer(flipped(7))])
    assert (verdict.verdict, result.passed) == ("inconclusive", True)
    assert "its own variance was not measured" in host.baseline_text()
    assert [f.kind for f in result.findings] == ["baseline", "inconclusive"]


@pytest.mark.parametrize(
    ("spec", "verdict"),
    [
        pytest.param([answer(WORDS, error="HTTP 500")], "inconclusive", id="every-answer-failed"),
        pytest.param([answer(WORDS), answer(WORDS, index=1, error="HTTP 500")], "lossless", id="one-failed"),
    ],
)
def test_answers_that_cannot_be_compared_are_unchecked(spec: list[dict[str, Any]], verdict: str) -> None:
    base = baseline((WORDS, WORDS, WORDS), (WORDS, WORDS, WORDS))
    _result, _host, found = judge(base, spec)
    assert found.verdict == verdict and found.count("unchecked") == 1


def test_the_answer_dict_names_the_baseline_divergence() -> None:
    _result, host, _verdict = judge(baseline((WORDS, flipped(9), flipped(10))), [answer(flipped(9))])
    data = host.to_dict()
    assert data["baseline_divergences"] == [{"prompt_index": 0, "token": 9, "char": len("".join(WORDS[:9])) + 1,
                                             "between": "alone vs alone again"}]  # fmt: skip
    assert data["configurations"][0]["verdict"] == "lossless"


@pytest.mark.parametrize(
    ("concurrency", "prompts", "chains", "expected"),
    [
        pytest.param([1, 2, 4], 4, [], [2, 4], id="the-sweeps-concurrencies-above-1"),
        pytest.param([1, 2, 4], 4, [1, 2, 4], [2, 3, 4, 5], id="and-k-plus-1-rows-of-each-chain"),
        pytest.param([64], 4, [], [16], id="at-most-4-a-prompt"),
        pytest.param([], 4, [], [4], id="open-loop-all-prompts-at-once"),
        pytest.param([1], 1, [], [], id="one-prompt-one-at-a-time"),
    ],
)
def test_the_baseline_is_batched_at_the_sweeps_concurrencies_and_verify_widths(
    concurrency: list[int], prompts: int, chains: list[int], expected: list[int]
) -> None:
    from orchestrator.sweep.lossless import probe_batches

    assert probe_batches(concurrency, prompts, chains) == expected
