"""How far a run's autoregressive baseline moved against itself, by its probe answers' log-probabilities
(orchestrator/sweep/lossless.py keeps them in ``lossless/<deployment>.jsonl``)::

    python bench/lossless_logprob_shifts.py RUN_DIR

Per batching (run, requests in flight) against the first answer alone: how many shared tokens were compared and
the median, 99th percentile and largest shift of a chosen token's log-probability (nats), over the tokens the
two answers share up to where they first differ; per prompt, the smallest gap between a chosen token and its
runner-up; and the host's margin as the check computes it (orchestrator/analysis/lossless.py). Results:
bench/RESULTS-lossless.md, section 5.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from orchestrator.analysis.lossless import check_lossless, read_answers


def main() -> None:
    run = Path(sys.argv[1])
    answers, labels = read_answers(run)
    baseline = {key[0]: key for key, label in labels.items() if label == "autoregressive"}
    for key in baseline.values():
        by_prompt: dict[int, list[dict]] = {}
        for answer in answers[key]:
            if answer.get("logprobs") and not answer.get("error"):
                by_prompt.setdefault(int(answer["prompt_index"]), []).append(answer)
        shifts: dict[tuple[int, int], list[float]] = {}
        for index, rows in sorted(by_prompt.items()):
            first = rows[0]
            for other in rows[1:]:
                for mine, theirs in zip(first["logprobs"], other["logprobs"], strict=False):
                    if mine[0] != theirs[0]:
                        break
                    shifts.setdefault((other["run"], other.get("batch") or 1), []).append(abs(mine[1] - theirs[1]))
            gaps = [
                row[1] - max((lp for t, lp in row[2] if t != row[0]), default=row[1] + 99) for row in first["logprobs"]
            ]
            print(f"prompt {index}: {len(rows)} answers, smallest runner-up gap {min(gaps):.4f} nats")
        for (run_no, batch), values in sorted(shifts.items()):
            v = np.array(values)
            print(
                f"run {run_no}, batch {batch}: {len(v)} tokens, shift median {np.median(v):.5f}, "
                f"p99 {np.quantile(v, 0.99):.5f}, max {v.max():.5f} nats"
            )
    result = check_lossless(answers, labels, baseline)
    for host in result.hosts:
        print(f"host {host.host}: largest shift {host.logprob_shift}, tie margin {host.tie_margin:.3f}")


if __name__ == "__main__":
    main()
