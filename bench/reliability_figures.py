"""specsweep's reliability figures: the fault matrix, the injection and secret checks, and the bad-input campaign.

Runs the reliability suite (``tests/reliability``: real sweeps against the systemd + sshd test host, so as root
on a machine that can boot it) with every scenario's outcome logged, then the bad-input campaign at full size
(``bench/reliability_bad_inputs.py``), and writes the table to ``bench/RESULTS-reliability.md`` (the README's
Reliability section carries the same table).

    sudo .venv/bin/python bench/reliability_figures.py                  # the suite, 10,000 documents, write
    .venv/bin/python bench/reliability_figures.py --examples 1000 --no-write

The figures and what they must be: scenarios run and survived (all), points lost (0), hosts left modified (0),
bad documents tried (10,000) and tracebacks seen (0), injection attempts and injections that reached the host
(0), secret leaks (0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.reliability_bad_inputs import campaign  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS-reliability.md"
COMMAND = "sudo .venv/bin/python bench/reliability_figures.py"


def run_suite() -> tuple[list[dict[str, Any]], str, float]:
    """The reliability tests with outcome logging: (outcomes, pytest's summary line, seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "outcomes.jsonl"
        env = {**os.environ, "SPECSWEEP_RELIABILITY_LOG": str(log)}
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", "-rfEx"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        outcomes = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    summary = next(
        (ln.strip("= ") for ln in reversed(proc.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", ln)), ""
    )
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
    return outcomes, summary, seconds


def figures(outcomes: list[dict[str, Any]], bad: dict[str, Any]) -> dict[str, Any]:
    ran = [o for o in outcomes if not o["skipped"]]
    scenarios = [o for o in ran if o["kind"] in ("fault", "hostkey")]
    injections = [o for o in ran if o["kind"] == "injection"]
    secrets = [o for o in ran if o["kind"] == "secret"]
    return {
        "scenarios run": len(scenarios),
        "survived": sum(1 for o in scenarios if o["passed"]),
        "points lost": sum(o["points_lost"] for o in scenarios),
        "hosts left modified": sum(o["hosts_modified"] for o in scenarios + injections),
        "bad documents tried": bad["documents"],
        "tracebacks seen": bad["outcomes"]["traceback"],
        "injection attempts": sum(o["injection_attempts"] for o in injections),
        "injections that reached the host": sum(o["injections_reached"] for o in injections),
        "secret leaks": sum(1 for o in secrets if not o["passed"]),
    }


def table(values: dict[str, Any]) -> str:
    head = "| " + " | ".join(values) + " |"
    rule = "|" + "---|" * len(values)
    row = "| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in values.values()) + " |"
    return "\n".join([head, rule, row])


def markdown(
    values: dict[str, Any], outcomes: list[dict[str, Any]], bad: dict[str, Any], suite: str, secs: float
) -> str:
    lines = [
        "# Reliability figures",
        "",
        f"Produced by `{COMMAND}` (about {secs / 60 + bad['seconds'] / 60:.0f} minutes) on "
        f"{platform.system()} with {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}. The suite: {suite}.",
        "",
        table(values),
        "",
        "What each figure counts:",
        "",
        "- **scenarios run / survived**: fault-matrix scenarios of `tests/reliability/test_fault_matrix.py` (a "
        "small real sweep against the systemd + sshd test host, one fault each) and the host-key refusals; "
        "survived = every assertion held: the run's final state, each point finished before the fault recorded "
        "exactly once, and the host's `/etc/systemd/system`, unit state and drop-ins byte for byte as before.",
        "- **points lost**: points recorded before a fault but missing afterwards, plus points of a completed or "
        "resumed run without a record.",
        "- **hosts left modified**: runs after which the host differed from its snapshot (files under "
        "`/etc/systemd/system` and `/var/lib/specsweep`, `systemctl show` of the unit, its drop-ins).",
        "- **bad documents tried / tracebacks seen**: the hypothesis campaign of `bench/reliability_bad_inputs.py`"
        " (experiment and playbook files); every outcome must be a valid plan or one `ConfigError` line.",
        "- **injection attempts / injections that reached the host**: hostile values (shell metacharacters, "
        "`$()`, backquotes, `;`, newlines, `%` specifiers, directive injection) in every field that reaches the "
        "host, through whole sweeps; reached = a `/tmp/pwned-*` file created or a directive systemd shows that "
        "specsweep did not write.",
        "- **secret leaks**: runs in which `server.api_key` appeared in the run directory, the report, a log, the"
        " CLI's output or an error.",
        "",
        "## Scenarios",
        "",
        "| scenario | kind | survived | points lost | hosts modified | injection attempts | reached |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        status = "skipped" if o["skipped"] else ("yes" if o["passed"] else "**no**")
        lines.append(
            f"| {o['scenario']} | {o['kind']} | {status} | {o['points_lost']} | {o['hosts_modified']} | "
            f"{o['injection_attempts'] or ''} | {o['injections_reached'] if o['kind'] == 'injection' else ''} |"
        )
    out = bad["outcomes"]
    lines += [
        "",
        "## The bad-input campaign",
        "",
        f"{bad['documents']:,} documents ({bad['experiments']:,} experiment files, {bad['playbooks']:,} playbook "
        f"files; seed {bad['seed']}, {bad['seconds']:.0f} s): {out['valid']:,} valid plans, {out['refused']:,} "
        f"refused with one ConfigError line naming the file ({bad['refused_with_line_share']:.1%} of them with a "
        f"line number too; the others are about the whole file: empty, not UTF-8, nested too deep, an alias "
        f"bomb, a missing top-level key), {out['unappliable']} plans a host would refuse at apply time, "
        f"{out['bad_error']} malformed errors, {out['traceback']} tracebacks.",
        "",
        "| mutation | " + " | ".join(out) + " |",
        "|---|" + "---|" * len(out),
    ]
    for category, counts in bad["by_category"].items():
        lines.append(f"| {category} | " + " | ".join(f"{counts.get(k, 0):,}" for k in out) + " |")
    for kind, examples in bad["examples"].items():
        lines += ["", f"Examples of `{kind}`:", ""]
        lines += [f"- `{e['mutations']}`: {e['message'][:300]!r}" for e in examples]
    lines += [
        "",
        "## What this suite found, now fixed",
        "",
        "- Ctrl-C and SIGTERM were ignored by `specsweep sweep`: `run_sweep` replaced the CLI's StopSignal "
        "(`stop or StopSignal()`, and a StopSignal is falsy until requested); the sweep ran on to the end.",
        "- A second run refused by the host lock still restored the host on its way out, undoing the "
        "configuration of the run holding the lock mid-sweep.",
        "- sshd down for 10 s mid-point ended the run, and its restore failed: the host was left modified. SSH "
        "now reconnects for up to 60 s once a host has been reached.",
        "- A full disk under the run directory was reported as 'restore failed' (the restore event could not be "
        "written), or replaced by the error of the final event.",
        "- A 600-byte 'billion laughs' YAML file took all the memory there was; a command that cannot be split "
        "into words passed validation and failed the run when applied; a mistyped `server.api_key` was quoted "
        "in the ConfigError.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=10_000, help="bad-input documents (default 10,000)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS-reliability.md")
    args = parser.parse_args()
    outcomes, suite, seconds = run_suite()
    limit = 2 * 1024**3  # a document that explodes in memory is a traceback, not the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    bad = campaign(args.examples)
    values = figures(outcomes, bad)
    print(table(values))
    if not args.no_write:
        RESULTS.write_text(markdown(values, outcomes, bad, suite, seconds))
        print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
