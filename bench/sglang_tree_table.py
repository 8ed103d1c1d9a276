"""The table of bench/RESULTS-sglang-tree.md from a run of sweeps/sglang-tree-cpu.yaml: per point, the tree the server
ran (read back from /server_info), the accept length from SGLang's counters and from the responses, the golden one
the model itself predicts (self-drafted points), the client's output tok/s with its interval, the speed-up over
autoregressive and over the chain (the linear baseline) at the same concurrency as the run's analysis gives them,
the server's start time, and the findings.

    python bench/sglang_tree_table.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runtable import cell as _f
from runtable import open_run, print_findings


def main(run_dir: str) -> None:
    analysis, records = open_run(run_dir)
    frame = analysis.frame
    healthy: dict[str, float] = {}
    events = Path(run_dir) / "events.jsonl"
    for line in events.read_text().splitlines() if events.exists() else []:
        event = json.loads(line)
        if event.get("kind") == "healthy":
            healthy[event["deployment"]] = event["seconds"]
    print(
        "| configuration | tree served | C | accept len: /metrics counters | responses | golden (model) | "
        "tok/s [95% CI] | vs AR | vs chain | server start s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for _, row in frame.sort_values(["variant", "label", "concurrency"]).iterrows():
        record = records[row["point_id"]]
        server = record.server or {}
        prom = server.get("prometheus") or {}
        spec = (record.client or {}).get("spec") or {}
        shape = server.get("spec_shape") or {}
        golden = server.get("golden") or {}
        golden_text = "-"
        if golden.get("accept_len") is not None:
            kind = "" if golden.get("kind") == "chain" else " (its chain's)"
            agree = {True: ", steps agree", False: ", steps differ", None: ""}[golden.get("agree")]
            golden_text = f"{_f(golden['accept_len'], 4)}{kind}{agree}"
        start = healthy.get(record.deployment_id)
        print(
            f"| {row['label']} | {shape.get('served_label') or '-'} | {row['concurrency']} | "
            f"{_f(prom.get('accept_len'), 4)} | {_f(spec.get('accept_len'), 4)} | {golden_text} | "
            f"{_f(row['output_tok_s'], 2)} "
            f"[{_f(row.get('output_tok_s_lo'), 2)}, {_f(row.get('output_tok_s_hi'), 2)}] | "
            f"{_f(row.get('speedup_vs_ar'))} | {_f(row.get('speedup_vs_linear'))} | "
            f"{_f(start, 0)} |"
        )
    print_findings(analysis)


if __name__ == "__main__":
    main(sys.argv[1])
