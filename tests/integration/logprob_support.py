"""What every real engine's run must show of the lossless probe's log-probabilities (issue 48): the
autoregressive baseline's answers carry each token's likeliest alternatives, read from the engine's own stream
(orchestrator/sweep/lossless.py ``read_stream``), and their tokens spell the answer's text, so the check can
place a near tie (orchestrator/analysis/lossless.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.analysis.lossless import check_lossless, read_answers


def baseline_answers(run_dir: Path) -> list[dict[str, Any]]:
    """The autoregressive baseline's probe answers (their file's label is ``autoregressive``)."""
    rows: list[dict[str, Any]] = []
    for path in sorted((run_dir / "lossless").glob("*.jsonl")):
        answers = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if answers and answers[0].get("label") == "autoregressive":
            rows += answers
    return rows


def check_baseline_logprobs(run_dir: Path) -> float:
    """Every error-free baseline answer carries one log-probability row per token whose tokens spell its text
    (and perhaps a stop token after it)
    (ASCII answers: a byte-level token of a wider character has no text of its own), each with the alternatives
    asked for, the chosen token's log-probability no smaller than any alternative's (temperature 0 takes the
    likeliest); the host's verdict measured the baseline's shift. Returns the largest shift."""
    rows = [a for a in baseline_answers(run_dir) if not a.get("error")]
    assert rows, "the baseline answered no probe prompt"
    for answer in rows:
        logprobs = answer.get("logprobs")
        assert logprobs, (answer["prompt_index"], answer["run"], sorted(answer))
        if answer["text"].isascii():  # a stop token the text leaves out may end them (vLLM's <|im_end|>)
            assert "".join(row[0] for row in logprobs).startswith(answer["text"]), answer["prompt_index"]
        for token, logprob, alternatives in logprobs:
            assert alternatives, (answer["prompt_index"], token)
            assert logprob >= max(lp for _t, lp in alternatives) - 1e-4, (token, logprob, alternatives)
    answers, labels = read_answers(run_dir)
    baseline = {host: key for key, label in labels.items() if label == "autoregressive" for host in [key[0]]}
    result = check_lossless(answers, labels, baseline)
    [host] = result.hosts
    assert host.logprob_shift is not None
    return host.logprob_shift
