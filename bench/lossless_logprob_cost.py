"""What asking for log-probabilities costs the lossless probe's baseline answers (orchestrator/sweep/lossless.py).

Against a running server, one request at a time at temperature 0, alternating the probe's own request (the
load's shape) without and with the log-probability fields (``logprob_fields``: five alternatives a token), so
both see the same load on a shared machine; prints each side's median seconds and their ratio::

    python bench/lossless_logprob_cost.py URL API MODEL [PAIRS] [MAX_TOKENS]

for example ``python bench/lossless_logprob_cost.py http://127.0.0.1:18492 chat smollm2 8 48``. Results:
bench/RESULTS-lossless.md, section 5.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import httpx

from orchestrator.load.workloads import load_workload
from orchestrator.sweep.lossless import TOP_LOGPROBS, logprob_fields


def main() -> None:
    url, api, model = sys.argv[1], sys.argv[2], sys.argv[3]
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    max_tokens = int(sys.argv[5]) if len(sys.argv) > 5 else 48
    workload = load_workload("builtin:chat", 0)
    path = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "llamacpp": "/completion"}[api]
    seconds: dict[bool, list[float]] = {False: [], True: []}
    tokens: dict[bool, list[int]] = {False: [], True: []}
    with httpx.Client(timeout=600, trust_env=False) as client:
        for i in range(pairs):
            prompt = workload.prompt(i)
            for asked in (False, True) if i % 2 == 0 else (True, False):
                if api == "chat":
                    body = {"model": model, "messages": prompt.as_messages(), "max_tokens": max_tokens}
                elif api == "completions":
                    body = {"model": model, "prompt": prompt.as_text(), "max_tokens": max_tokens}
                else:
                    body = {"prompt": prompt.as_text(), "n_predict": max_tokens}
                body |= {"temperature": 0, "stream": False}
                if asked:
                    body |= logprob_fields(api, TOP_LOGPROBS)
                start = time.perf_counter()
                reply = client.post(url + path, json=body)
                reply.raise_for_status()
                seconds[asked].append(time.perf_counter() - start)
                usage = reply.json().get("usage") or {}
                tokens[asked].append(int(usage.get("completion_tokens") or reply.json().get("tokens_predicted") or 0))
    without, with_ = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(
        json.dumps(
            {
                "pairs": pairs,
                "median_s_without": round(without, 3),
                "median_s_with": round(with_, 3),
                "ratio": round(with_ / without, 3),
                "tokens_without": sum(tokens[False]),
                "tokens_with": sum(tokens[True]),
            }
        )
    )


if __name__ == "__main__":
    main()
