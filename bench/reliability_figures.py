"""specsweep's reliability figures: the fault matrix, the injection and secret checks, and the bad-input campaign.

Runs the reliability suite (``tests/reliability``: real sweeps against the systemd + sshd test host, so as root
on a machine that can boot it) with every test's phases and every scenario's outcome logged, then the
bad-input campaign at full size (``bench/reliability_bad_inputs.py``: 10,000 changed documents, a sample
through ``sweep --dry-run``, valid ones applied on a test host), and writes the table to
``bench/RESULTS-reliability.md`` and into the Reliability section of docs/guide.md.

    sudo .venv/bin/python bench/reliability_figures.py                  # the suite, the campaign, write
    sudo .venv/bin/python bench/reliability_figures.py --examples 1000 --no-write

Every figure counts what really happened, once: a scenario is one test; a sweep, a host comparison or a
hostile value shared by several tests is counted by one of them (``tests/reliability/conftest.py``,
``Outcome``); "hosts left modified" is out of the snapshots actually compared; hostile values refused by
validation never reached a host and are counted apart; the campaign counts only documents a mutation
changed. The script fails, and writes nothing, when any collected test did not pass (an error in set-up, a
failure, a skip: a scenario must not vanish from the figures) or when the campaign saw a traceback, a badly
formed error, a plan a host refused, a dry run that disagreed, or an apply that did not hold.
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

from bench.reliability_bad_inputs import CampaignHost, campaign  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS-reliability.md"
README = ROOT / "docs" / "guide.md"  # its Reliability section (moved from the README)
COMMAND = "sudo .venv/bin/python bench/reliability_figures.py"
MARK_BEGIN = "<!-- reliability-figures: written by bench/reliability_figures.py -->"
MARK_END = "<!-- /reliability-figures -->"


def run_suite() -> tuple[list[dict[str, Any]], str, float, int]:
    """The reliability tests with every phase and outcome logged: (log entries, pytest's summary line,
    seconds, pytest's exit status)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "outcomes.jsonl"
        env = {**os.environ, "SPECSWEEP_RELIABILITY_LOG": str(log)}
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", "-rfEs"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    summary = next(
        (ln.strip("= ") for ln in reversed(proc.stdout.splitlines()) if re.search(r"\d+ (passed|failed|error)", ln)),
        "",
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-8000:] + proc.stderr[-4000:])
    return entries, summary, seconds, proc.returncode


def suite_problems(entries: list[dict[str, Any]], returncode: int) -> list[str]:
    """Why the suite's figures cannot be used: a test collected but not passed, an error in any phase, a skip."""
    problems = [f"pytest exited with status {returncode}"] if returncode else []
    collected = [e["nodeid"] for e in entries if e["type"] == "collected"]
    if not collected:
        problems.append("no test was collected")
    reports: dict[str, dict[str, str]] = {}
    for e in entries:
        if e["type"] == "report":
            reports.setdefault(e["nodeid"], {})[e["when"]] = e["outcome"]
    for nodeid in collected:
        phases = reports.get(nodeid, {})
        if phases.get("setup") != "passed":
            problems.append(f"{nodeid}: set-up {phases.get('setup', 'never ran')}")
        elif phases.get("call") != "passed":
            problems.append(f"{nodeid}: {phases.get('call', 'never ran')}")
        if phases.get("teardown", "passed") != "passed":
            problems.append(f"{nodeid}: teardown {phases['teardown']}")
    for e in entries:
        if e["type"] == "outcome" and (e["skipped"] or not e["passed"]):
            problems.append(f"{e['nodeid']}: its outcome was {'skipped' if e['skipped'] else 'not passed'}")
    return problems


def campaign_problems(bad: dict[str, Any]) -> list[str]:
    out = bad["outcomes"]
    problems = [f"{out[k]} {k} verdicts" for k in ("unappliable", "bad_error", "traceback") if out[k]]
    problems += [f"{n} dry runs {k}" for k, n in bad["dry_runs"].items() if k not in ("planned", "refused") and n]
    problems += [f"{n} applies {k}" for k, n in bad["applies"].items() if k != "applied" and n]
    return problems


def _of(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,}"


def figures(outcomes: list[dict[str, Any]], bad: dict[str, Any]) -> dict[str, str]:
    def total(key: str, kinds: tuple[str, ...] | None = None) -> int:
        return sum(int(o[key]) for o in outcomes if kinds is None or o["kind"] in kinds)

    dry, applied = bad["dry_runs"], bad["applies"]
    tracebacks = bad["outcomes"]["traceback"] + dry["traceback"] + applied["traceback"]
    return {
        "scenarios passed": _of(sum(1 for o in outcomes if o["passed"]), len(outcomes)),
        "faults injected": f"{total('faults'):,}",
        "sweeps run": f"{total('sweeps'):,}",
        "points lost": _of(total("points_lost"), total("points_checked")) + " checked",
        "hosts left modified": _of(total("hosts_modified"), total("host_checks")) + " compared",
        "bad documents (changed by a mutation)": f"{bad['documents']:,}",
        "of them: dry runs / applied on the test host": f"{sum(dry.values()):,} / {sum(applied.values()):,}",
        "tracebacks": f"{tracebacks:,}",
        "hostile values sent to a host": f"{total('injection_attempts'):,}",
        "took effect": f"{total('injections_reached'):,}",
        "hostile values refused by validation": f"{total('refused'):,}",
        "secret leaks": _of(total("secret_leaks"), total("secret_checks")) + " outputs searched",
    }


def table(values: dict[str, str]) -> str:
    head = "| " + " | ".join(values) + " |"
    rule = "|" + "---|" * len(values)
    row = "| " + " | ".join(values.values()) + " |"
    return "\n".join([head, rule, row])


def _cell(o: dict[str, Any], key: str, applies: bool) -> str:
    return f"{o[key]:,}" if applies else "—"


def checkout() -> str:
    """Which code the figures are of: the commit, and whether the checkout had changes on top of it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return f"commit {commit}" + (" with uncommitted changes" if dirty else " (a clean checkout)")


def markdown(
    values: dict[str, str], outcomes: list[dict[str, Any]], bad: dict[str, Any], suite: str, secs: float
) -> str:
    lines = [
        "# Reliability figures",
        "",
        f"Produced by `{COMMAND}` (about {(secs + bad['seconds']) / 60:.0f} minutes) on "
        f"{platform.system()} with {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, from {checkout()}. The suite: {suite}.",
        "",
        table(values),
        "",
        "What each figure counts (each thing once, by what it really did; `tests/reliability/conftest.py` `Outcome`):",
        "",
        "- **scenarios passed**: tests of `tests/reliability` that report an outcome: a fault injected into a "
        "real run against the systemd + sshd test host, hostile values through a sweep, hostile values refused "
        "by validation, a secret's path through a run. The script refuses to write figures unless every "
        "collected test passed (set-up, call and teardown): none can vanish from the table.",
        "- **faults injected**: the faults the fault matrix put into runs (six server faults in one sweep count "
        "six; two SSH cuts in one run count two; an unknown and a changed host key count two).",
        "- **sweeps run**: sweeps (a resume is one more) actually run by those scenarios; the server faults' one "
        "sweep is counted once.",
        "- **points lost**: points recorded before a fault but missing afterwards, or planned points of a "
        "completed or resumed run without exactly one record; out of the planned points checked that way.",
        "- **hosts left modified**: runs after which the host differed from its snapshot taken before (the "
        "files the guest changed under `/etc/systemd/system` and `/var/lib/specsweep`, read from the overlay's "
        "upper layer; `/run/specsweep`; `systemctl show` of the unit; its drop-ins; for a process service, "
        "specsweep's state directory); out of the snapshots actually compared. Scenarios that compare none "
        "show — below.",
        "- **bad documents**: the hypothesis campaign of `bench/reliability_bad_inputs.py` (experiment and "
        "playbook files), counting only documents a mutation changed; **dry runs** of them through "
        "`specsweep sweep FILE --dry-run` and valid ones **applied on the test host** for real (two "
        "deployments each: systemd's own view of the unit over D-Bus, or what the process received, must be "
        "the document's, and the host as before once restored); **tracebacks** over all three.",
        "- **hostile values sent to a host / took effect**: distinct hostile values (shell metacharacters, "
        "`$()`, backquotes, `;`, newlines, `%` specifiers, directive injection) in the fields that reach the "
        "host, through whole sweeps, each value counted once per field however many variants carry it; took "
        "effect = a `/tmp/pwned-*` file created or a directive systemd shows that specsweep did not write.",
        "- **hostile values refused by validation**: names that become paths, unit or variable names, and "
        "control characters in paths and names, refused by validation with one error line (they never reach a "
        "host, so they are not counted as sent).",
        "- **secret leaks**: `server.api_key` and the service's secrets (`{secret_env: ...}`, "
        "`{secret_file: ...}`, an argument `$NAME`) found anywhere they must not be: the run directory, the "
        "report, the CLI's outputs, errors, the host's files, `systemctl show`, process command lines but the "
        "server's own; out of the outputs searched.",
        "",
        "## Scenarios",
        "",
        "| scenario | kind | passed | faults | sweeps | points lost / checked | host modified / compared "
        "| values sent (took effect) | refused | secret leaks / searched |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        status = "yes" if o["passed"] else "**no**"
        points = f"{o['points_lost']} / {o['points_checked']}" if o["points_checked"] else "—"
        hosts = f"{o['hosts_modified']} / {o['host_checks']}" if o["host_checks"] else "—"
        sent = f"{o['injection_attempts']} ({o['injections_reached']})" if o["injection_attempts"] else "—"
        secret = f"{o['secret_leaks']} / {o['secret_checks']}" if o["secret_checks"] else "—"
        lines.append(
            f"| {o['scenario']} | {o['kind']} | {status} | {_cell(o, 'faults', bool(o['faults']))} | "
            f"{_cell(o, 'sweeps', bool(o['sweeps']))} | {points} | {hosts} | {sent} | "
            f"{_cell(o, 'refused', bool(o['refused']))} | {secret} |"
        )
    out = bad["outcomes"]
    dry, applied = bad["dry_runs"], bad["applies"]
    lines += [
        "",
        "## The bad-input campaign",
        "",
        f"{bad['documents']:,} documents changed by their mutations ({bad['experiments']:,} experiment files, "
        f"{bad['playbooks']:,} playbook files; seed {bad['seed']}, {bad['seconds']:.0f} s; "
        f"{bad['unchanged_drawn']:,} more were drawn that their mutations left as they were, and are not "
        f"counted): {out['valid']:,} valid plans, {out['refused']:,} refused with one ConfigError line naming "
        f"the file ({bad['refused_with_line_share']:.1%} of them with a line number too; the others are about "
        f"the whole file: empty, not UTF-8, nested too deep, an alias bomb, a missing top-level key), "
        f"{out['unappliable']} plans a host would refuse at apply time, {out['bad_error']} malformed errors, "
        f"{out['traceback']} tracebacks.",
        "",
        f"Through `specsweep sweep FILE --dry-run` (a sample spread over the run, a quarter of it documents "
        f"that plan): {dry['planned']:,} dry runs, {dry['refused']:,} refused with one error line, "
        f"{dry['bad_error']} other answers or disagreements with the library, {dry['traceback']} tracebacks. "
        f"Applied on the test host (every other valid document, two deployments each): {applied['applied']:,} "
        f"held (systemd's view or the process's arguments and environment were the document's, the host as "
        f"before once restored), {applied['refused_on_host']} refused by the host, {applied['mismatch']} "
        f"mismatches, {applied['host_modified']} hosts left modified, {applied['traceback']} tracebacks.",
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
        "- A run that ended on a full disk stayed `running` in run.json (the final state could not be written "
        "as a new file): the store now writes it over run.json's own blocks.",
        "- A 600-byte 'billion laughs' YAML file took all the memory there was; a command that cannot be split "
        "into words passed validation and failed the run when applied; a mistyped `server.api_key` was quoted "
        "in the ConfigError.",
        "- Secrets a server needs (a token in `environment`, a key in `exec_start`) were stored in clear in "
        "plan.json and experiment.yaml, written into a world-readable drop-in and shown by `systemctl show`: "
        "they are now references, passed through a 0600 file and masked in every log window.",
        "- With `sudo: auto`, a process service's server ran as root through sudo; without sudo rights every "
        "command failed with sudo's own message. The server now runs as the login user, and a missing sudo is "
        "one error before anything changes.",
        "- The harness read records with `str.splitlines()`, which cuts a JSON line at a U+2028 a server "
        "echoed: a record looked lost. (The store reads lines at newlines only.)",
        "",
    ]
    return "\n".join(lines)


def write_readme(values: dict[str, str]) -> None:
    text = README.read_text()
    begin, end = text.index(MARK_BEGIN), text.index(MARK_END)
    README.write_text(text[: begin + len(MARK_BEGIN)] + "\n" + table(values) + "\n" + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=10_000, help="bad-input documents (default 10,000)")
    parser.add_argument("--dry-runs", type=int, default=200, help="of them through `sweep --dry-run` (200)")
    parser.add_argument("--applies", type=int, default=50, help="valid ones applied on a test host (50)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave the results and README")
    args = parser.parse_args()
    entries, suite, seconds, returncode = run_suite()
    problems = suite_problems(entries, returncode)
    if problems:
        sys.exit("reliability figures not written; the suite did not pass:\n  " + "\n  ".join(problems))
    outcomes = [e for e in entries if e["type"] == "outcome"]
    host = CampaignHost() if args.applies else None  # booted before the address space is capped
    try:
        limit = 2 * 1024**3  # a document that explodes in memory is a traceback, not the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        bad = campaign(args.examples, dry_runs=args.dry_runs, applies=args.applies, host=host)
    finally:
        if host is not None:
            host.close()
    problems = campaign_problems(bad)
    values = figures(outcomes, bad)
    print(table(values))
    if problems:
        print(json.dumps(bad["examples"], indent=2)[:8000])
        sys.exit("reliability figures not written; the campaign broke its promise: " + "; ".join(problems))
    if not args.no_write:
        RESULTS.write_text(markdown(values, outcomes, bad, suite, seconds))
        write_readme(values)
        print(f"written to {RESULTS.relative_to(ROOT)} and {README.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
