"""The table of bench/RESULTS-sglang.md from a run of sweeps/sglang-cpu.yaml: per point, the client's output tok/s
with its interval, the speed-up over AR at the same concurrency, the accept length and acceptance rate from each
of SGLang's three sources (the log as printed and less the drafts past the requests' ends, /metrics' counters,
the responses), the drafts SGLang accepted past the requests' ends, and whether NGRAM's corpus was emptied first.

    python bench/sglang_cpu_table.py RUN_DIR
"""

from __future__ import annotations

import sys

from runtable import cell as _f
from runtable import open_run, print_findings


def main(run_dir: str) -> None:
    analysis, records = open_run(run_dir)
    frame = analysis.frame
    print(
        "| configuration | C | tok/s [95% CI] | speed-up vs AR | accept len: log printed | log less past-end | "
        "/metrics | responses | acceptance rate: log | /metrics | responses (SGLang's own) | drafts past end | "
        "corpus emptied |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for _, row in frame.sort_values(["variant", "label", "concurrency"]).iterrows():
        record = records[row["point_id"]]
        server = record.server or {}
        prom = server.get("prometheus") or {}
        spec = (record.client or {}).get("spec") or {}
        past = (server.get("details") or {}).get("past_end") or {}
        corpus = server.get("drafter_corpus") or {}
        print(
            f"| {row['label']} | {row['concurrency']} | {_f(row['output_tok_s'], 1)} "
            f"[{_f(row.get('output_tok_s_lo'), 1)}, {_f(row.get('output_tok_s_hi'), 1)}] | "
            f"{_f(row.get('speedup_vs_ar'))} | {_f(past.get('accept_len_printed'), 3)} | "
            f"{_f(server.get('accept_len'), 3)} | {_f(prom.get('accept_len'), 3)} | {_f(spec.get('accept_len'), 3)} | "
            f"{_f(server.get('acceptance_rate'), 3)} | {_f(prom.get('acceptance_rate'), 3)} | "
            f"{_f(spec.get('acceptance_rate'), 3)} ({_f(spec.get('acceptance_rate_engine'), 3)}) | "
            f"{past.get('discarded_drafts', '-')} | "
            f"{'-' if not corpus else ('yes' if corpus.get('flushed') else 'no')} |"
        )
    print_findings(analysis)


if __name__ == "__main__":
    main(sys.argv[1])
