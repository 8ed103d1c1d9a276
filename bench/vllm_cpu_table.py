"""The table of bench/RESULTS-vllm.md from a run of sweeps/vllm-cpu.yaml: per point, the client's output tok/s
with its interval, the accept length from each of vLLM's three sources, the speed-up over AR at the same
concurrency, and how the log window was opened and closed.

    python bench/vllm_cpu_table.py RUN_DIR
"""

from __future__ import annotations

import sys

from runtable import cell as _f
from runtable import open_run, print_findings


def main(run_dir: str) -> None:
    analysis, records = open_run(run_dir)
    frame = analysis.frame
    print(
        "| configuration | C | tok/s [95% CI] | speed-up vs AR | accept len: log | /metrics | responses | "
        "acceptance rate (counters) | window (open wait, close wait) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for _, row in frame.sort_values(["variant", "label", "concurrency"]).iterrows():
        record = records[row["point_id"]]
        server = record.server or {}
        prom = server.get("prometheus") or {}
        spec = (record.client or {}).get("spec") or {}
        ticks = server.get("window_ticks") or server.get("window_close") or {}
        wait = f"{_f(ticks.get('open_wait_s'), 1)} s, {_f(ticks.get('close_wait_s', ticks.get('waited_s')), 1)} s"
        print(
            f"| {row['label']} | {row['concurrency']} | {_f(row['output_tok_s'], 1)} "
            f"[{_f(row.get('output_tok_s_lo'), 1)}, {_f(row.get('output_tok_s_hi'), 1)}] | "
            f"{_f(row.get('speedup_vs_ar'))} | {_f(server.get('accept_len'), 3)} | {_f(prom.get('accept_len'), 3)} | "
            f"{_f(spec.get('accept_len'), 3)} | {_f(prom.get('acceptance_rate'), 3)} | {wait} |"
        )
    print_findings(analysis)


if __name__ == "__main__":
    main(sys.argv[1])
