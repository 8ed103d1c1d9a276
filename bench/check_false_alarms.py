"""How often each consistency check warns on real runs: per check, the points it warns (or errs) at.

On a real engine whose sources agree (the client's, the counters' and the log's token counts equal within their
bounds: orchestrator/analysis/agreement.py), a warning of a check that compares figures is a false alarm.
This bench analyses each run directory given (the run's own analysis, as ``specsweep report`` makes it) and
prints, per check, the points it flagged as a warning or an error out of the points measured, plus the
information findings of ``source_agreement`` (disagreements the records themselves flagged, with their size).
With ``--tokens`` it also prints each point's output tokens by source (client, /metrics, log) and how far
the log's count is from the client's, the figures behind the bounds.

    python bench/check_false_alarms.py RUN_DIR [RUN_DIR ...] [--tokens]

It runs against any version of the package on ``PYTHONPATH`` (it only uses ``analyse`` and its findings), so
the same runs can be counted before and after a change. Results: bench/RESULTS-checks.md.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from orchestrator.analysis import analyse


def count(run_dirs: list[Path]) -> tuple[int, dict[str, set[tuple[str, str]]], Counter[str]]:
    """(measured points, check -> points it warned or erred at, check -> information findings)."""
    points = 0
    flagged: dict[str, set[tuple[str, str]]] = defaultdict(set)
    infos: Counter[str] = Counter()
    for run_dir in run_dirs:
        analysis = analyse(run_dir)
        frame = analysis.frame
        measured = frame[frame["alias_of"].isna()] if "alias_of" in frame.columns else frame
        points += len(measured)
        for finding in analysis.findings:
            if finding.point is None:
                continue
            if finding.severity in ("warning", "error"):
                flagged[finding.check].add((str(run_dir), finding.point))
            else:
                infos[finding.check] += 1
    return points, flagged, infos


def token_rows(run_dir: Path) -> list[str]:
    from orchestrator.analysis.agreement import token_counts

    rows = []
    for record in analyse(run_dir).frame.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        counts = {c.source: c for c in token_counts(row)}
        client, log = counts.get("client"), counts.get("journal")
        off = f"{(log.tokens - client.tokens) / client.tokens:+.2%}" if client and log and client.tokens else "-"
        said = " | ".join(
            f"{counts[s].tokens:.1f}" if s in counts else "-" for s in ("client", "prometheus", "journal")
        )
        rows.append(f"| {run_dir.name} | {row['label']} | {row['load_label']} | {said} | {off} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--tokens", action="store_true", help="print each point's output tokens by source")
    args = parser.parse_args()
    points, flagged, infos = count(args.runs)
    print(f"{len(args.runs)} run(s), {points} measured points\n")
    print("| check | points warned (or erred) at | share |")
    print("|---|---:|---:|")
    for check, where in sorted(flagged.items()):
        print(f"| {check} | {len(where)} | {len(where) / points:.0%} |")
    if not flagged:
        print("| (none) | 0 | 0% |")
    print("\ninformation findings per check: " + (", ".join(f"{c} {n}" for c, n in sorted(infos.items())) or "none"))
    if args.tokens:
        print("\n| run | configuration | load | client | /metrics | log | log - client |")
        print("|---|---|---|---:|---:|---:|---:|")
        for run_dir in args.runs:
            print("\n".join(token_rows(run_dir)))


if __name__ == "__main__":
    main()
