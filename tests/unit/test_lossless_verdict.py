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


def with_logprobs(row: dict[str, Any], words: list[str], at: int, alternative: str, gap: float) -> dict[str, Any]:
    """``row`` with its tokens' log-probabilities: at token ``at`` the chosen word leads ``alternative`` by
    ``gap`` nats; everywhere else the chosen word leads by 5."""
    rows = []
    for i, word in enumerate(words):
        other = alternative if i == at else word.replace("w", "z")
        rows.append([word, -0.5, [[word, -0.5], [other, -0.5 - (gap if i == at else 5.0)]]])
    return row | {"logprobs": rows}


def stable_with_logprobs(at: int, gap: float, alternative: str = " x5") -> list[dict[str, Any]]:
    return [with_logprobs(a, WORDS, at, alternative, gap) for a in baseline((WORDS, WORDS, WORDS))]


def test_a_flip_at_a_near_tie_of_the_baseline_is_within_its_variance() -> None:
    result, host, verdict = judge(stable_with_logprobs(5, 0.05), [answer(flipped(5))])
    assert host.divergences == []  # the baseline is stable on the prompt: before near ties this was lossy
    assert (verdict.verdict, verdict.exact, result.passed) == ("lossless", False, True)
    [prompt] = verdict.prompts
    assert (prompt.outcome, prompt.token) == ("near_tie", 5)
    assert "near tie at token 5" in prompt.why and "' w5' (-0.500) over ' x5' (-0.550)" in prompt.why
    assert "or at a near tie of its own" in verdict.text()
    assert verdict.to_dict()["near_tie"] == 1 and verdict.to_dict()["lossy"] == 0


@pytest.mark.parametrize(
    ("gap", "alternative", "margin", "why"),
    [
        pytest.param(2.0, " x5", 0.25, "the alternative is 2 nats behind", id="far-behind"),
        pytest.param(0.05, " y5", 0.25, "the answer took a token the baseline did not rank", id="not-ranked"),
        pytest.param(0.05, " x5", 0.0, "a margin of 0 turns near ties off", id="margin-off"),
    ],
)
def test_a_flip_that_is_no_near_tie_stays_lossy(gap: float, alternative: str, margin: float, why: str) -> None:
    base = stable_with_logprobs(5, gap, alternative)
    result = check_lossless(
        {("h", "ar"): base, ("h", "ng"): [answer(flipped(5))]},
        {("h", "ar"): "autoregressive", ("h", "ng"): "ngram(k=2)"},
        {"h": ("h", "ar")},
        margin,
    )
    [verdict] = result.hosts[0].configs
    assert (verdict.verdict, verdict.prompts[0].outcome, result.passed) == ("lossy", "lossy", False), why


def test_a_near_tie_needs_tokens_that_spell_the_baseline_text() -> None:
    base = stable_with_logprobs(5, 0.05)
    for row in base:
        row["logprobs"][2][0] = " w2?"  # a token the text does not hold: the positions are unknown, no judgement
    _result, _host, verdict = judge(base, [answer(flipped(5))])
    assert verdict.prompts[0].outcome == "lossy"


def test_an_answer_that_ends_where_the_baseline_goes_on_is_no_near_tie() -> None:
    _result, _host, verdict = judge(stable_with_logprobs(5, 0.05), [answer(WORDS[:5])])
    assert verdict.prompts[0].outcome == "lossy"


def test_a_near_tie_earlier_than_the_baseline_own_divergence_is_within_its_variance() -> None:
    rows = baseline((WORDS, WORDS, flipped(20)))
    base = [with_logprobs(a, WORDS, 5, " x5", 0.1) if a["run"] < 3 else a for a in rows]
    _result, host, verdict = judge(base, [answer(flipped(5))])
    assert [d.token for d in host.divergences] == [20]
    assert verdict.prompts[0].outcome == "near_tie" and verdict.verdict == "lossless"


@pytest.mark.parametrize(
    ("moved", "gap", "outcome", "margin"),
    [
        pytest.param(0.0, 0.5, "lossy", 0.25, id="steady-baseline-keeps-the-floor"),
        pytest.param(0.3, 0.5, "near_tie", 0.6, id="twice-the-baseline-own-shift"),
        pytest.param(2.0, 1.5, "lossy", 1.0, id="never-wider-than-the-cap"),
    ],
)
def test_the_tie_margin_widens_with_the_baseline_own_shifts(
    moved: float, gap: float, outcome: str, margin: float
) -> None:
    base = stable_with_logprobs(5, gap)
    for row in base:
        if row["batch"] > 1:  # the batched answer's chosen tokens moved by ``moved`` nats (token 12)
            row["logprobs"][12][1] -= moved
    _result, host, verdict = judge(base, [answer(flipped(5))])
    assert (host.logprob_shift, host.tie_margin) == (pytest.approx(moved), pytest.approx(margin))
    assert verdict.prompts[0].outcome == outcome
    assert host.to_dict()["tie_margin"] == pytest.approx(margin)
    assert f"moved by up to {moved:.3f} nats" in host.baseline_text()


def test_a_near_tie_with_the_stop_token_the_text_leaves_out() -> None:
    """The baseline stopped (its last token, vLLM's ``<|im_end|>``, is not in the text) where the answer went on
    with the baseline's runner-up."""
    words = WORDS[:6]
    base = []
    for row in baseline((words, words, words)):
        rows = [[w, -0.1, [[w, -0.1], [" z", -6.0]]] for w in words]
        rows.append(["<|im_end|>", -0.70, [["<|im_end|>", -0.70], [" more", -0.74]]])
        base.append(row | {"logprobs": rows})
    _result, _host, verdict = judge(base, [answer([*words, " more", " words"])])
    assert verdict.prompts[0].outcome == "near_tie", verdict.prompts[0].why
    assert "'<|im_end|>' (-0.700) over ' more' (-0.740)" in verdict.prompts[0].why


@pytest.mark.parametrize(
    ("chosen", "runner_up", "said"),
    [
        pytest.param(-3.0, -0.1, "rank its chosen ' w5' (-3.000) below ' x5' (-0.100)", id="inverted"),
        pytest.param(float("-inf"), -0.1, "are not finite", id="chosen-minus-infinity"),
        pytest.param(-0.5, float("inf"), "are not finite", id="alternative-infinity"),
        pytest.param(float("nan"), -0.5, "are not finite", id="nan"),
    ],
)
def test_an_inverted_or_non_finite_pair_never_excuses_a_divergence(chosen: float, runner_up: float, said: str) -> None:
    """Issue 58, S1: a near tie is 0 <= chosen - alternative <= margin; the baseline's chosen token less likely
    than the alternative (vLLM's log-probabilities before its logits processors) or -Infinity excused every
    divergence, and a configuration that changes every answer was judged lossless."""
    import json

    base = stable_with_logprobs(5, 0.05)
    for row in base:
        row["logprobs"][5] = [" w5", chosen, [[" w5", chosen], [" x5", runner_up]]]
    base = json.loads(json.dumps(base))  # as read back from the run (json writes -Infinity, NaN)
    result, _host, verdict = judge(base, [answer(flipped(5))])
    assert (verdict.verdict, verdict.prompts[0].outcome, result.passed) == ("lossy", "lossy", False)
    assert said in verdict.prompts[0].why and "no near tie is read" in verdict.prompts[0].why
    [finding] = [f for f in result.findings if f.kind == "baseline_logprobs"]
    assert (finding.config, finding.prompt_index, finding.token) == ("autoregressive", 0, 5)
    assert said in finding.message
    assert verdict.to_dict()["prompts"][0]["baseline_logprobs"] == verdict.prompts[0].baseline_logprobs


def test_a_tie_exactly_at_zero_and_at_the_margin_is_still_a_near_tie() -> None:
    for gap in (0.0, 0.25):
        _result, _host, verdict = judge(stable_with_logprobs(5, gap), [answer(flipped(5))])
        assert verdict.prompts[0].outcome == "near_tie", gap


def test_configurations_whose_every_answer_equals_the_baselines_are_one_note_a_host() -> None:
    """Issue 59: a lossless note per configuration that passed cried wolf after the demo (five of them); those
    that equal the baseline's answers exactly are one note of their host, and one that leaned on the
    baseline's variance keeps its own."""
    from types import SimpleNamespace

    from orchestrator.analysis.checks import lossless

    base = baseline((WORDS, WORDS, flipped(10)))
    result = check_lossless(
        {
            ("h", "ar"): base,
            ("h", "a"): [answer(WORDS)],
            ("h", "b"): [answer(WORDS)],
            ("h", "c"): [answer(flipped(12))],
        },
        {("h", "ar"): "autoregressive", ("h", "a"): "ngram(k=1)", ("h", "b"): "ngram(k=2)", ("h", "c"): "ngram(k=4)"},
        {"h": ("h", "ar")},
    )
    found = lossless(SimpleNamespace(lossless_result=result))  # type: ignore[arg-type]
    passed = [f for f in found if f.config is None and f.message.startswith("lossless:")]
    assert [f.message for f in passed] == [
        "lossless: every answer of ngram(k=1), ngram(k=2) equals one of the baseline's"
    ]
    assert [f.config for f in found if f.config is not None and f.config.startswith("ngram")] == ["ngram(k=4)"]


def test_the_ending_says_the_verdict_once_and_counts_the_prompts_it_could_not_compare() -> None:
    """The ending read ``lossless flaky: lossless: each of 5 answers ...`` and never said that 3 of the 8 prompts
    had failed (issue 59, item 7)."""
    from types import SimpleNamespace

    from orchestrator.cli.summary import lossless_lines

    base = baseline((WORDS, WORDS, WORDS), (WORDS, WORDS, WORDS), (WORDS, WORDS, WORDS))
    spec = [answer(WORDS, index=0), answer([], index=1, error="HTTP 500"), answer(WORDS, index=2)]
    result, _host, verdict = judge(base, spec)
    assert verdict.verdict == "lossless" and verdict.count("unchecked") == 1
    said = "each of 2 answers equals one of the baseline's; 1 of 3 prompts not compared"
    assert f"ngram(k=2): lossless: {said}" in verdict.text(), verdict.text()
    (line,) = [ln for ln in lossless_lines(SimpleNamespace(lossless=result.hosts)) if "ngram" in ln]  # type: ignore[arg-type]
    assert line.startswith("  ngram(k=2): [green]lossless[/green]: each of 2 answers") and said in line, line
