"""The bad-input campaign at full size: generated experiment and playbook documents (10,000 by default).

Each document comes from ``tests/reliability/documents.py`` (a valid seed plus one to four mutations by
category: wrong types, unknown keys, bad durations, unresolvable templates, empty and huge matrices, missing
keys, damaged YAML). Only documents a mutation really changed count: one whose bytes are still its seed's is
not used (the summary says how many were drawn that way). Each gets a verdict: a valid plan, one ConfigError
line naming the file (with or without a line number), a plan whose command a host would refuse at apply
time, a badly formed error, or a traceback. The promise is that only the first two ever happen.

Further along, a sample of the experiment documents (``--dry-runs``: spread over the run, a quarter of it
documents that plan) goes through ``specsweep sweep FILE --dry-run`` as a subprocess (the dry run, or one
error line, never a traceback, and the same answer as the library's), and valid ones (``--applies``, every
other one) are applied on the systemd + sshd test host for real, two deployments each
(``documents.apply_on_host``: systemd's own view of the unit, or what the process received, is the
document's; the host is as before once restored). The applies need root and boot a test host
(``tests/system/testhost.sh``).

    sudo .venv/bin/python bench/reliability_bad_inputs.py                  # 10,000 documents, a JSON summary
    .venv/bin/python bench/reliability_bad_inputs.py --examples 1000 --applies 0

The run is deterministic for a given ``--seed``. The process's address space is capped (2 GB) so that a
document that explodes in memory shows up as a traceback instead of taking the machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.reliability.documents import (  # noqa: E402
    UNCHANGED,
    apply_on_host,
    check,
    documents,
    dry_run,
    install_campaign_unit,
    remove_campaign_unit,
)

OUTCOMES = ("valid", "refused", "unappliable", "bad_error", "traceback")
DRY_RUN_OUTCOMES = ("planned", "refused", "bad_error", "traceback")
APPLY_OUTCOMES = ("applied", "refused_on_host", "mismatch", "host_modified", "traceback")


class CampaignHost:
    """A test host booted for the applies, with the stub unit they replace; ``close()`` shuts it down. Boot it
    before capping the address space: the guest's processes would inherit the cap."""

    def __init__(self) -> None:
        from tests.system.support import boot, cannot_boot_reason, claim_index

        reason = cannot_boot_reason()
        if reason:
            raise SystemExit(f"the applies need the test host: {reason} (or pass --applies 0)")
        index, lock = claim_index()
        self.host = boot(index, lock)
        self.unit = install_campaign_unit(self.host)

    def close(self) -> None:
        from tests.system.support import shut_down

        try:
            remove_campaign_unit(self.host)
        finally:
            shut_down(self.host)


def campaign(
    examples: int = 10_000,
    seed_value: int = 20261130,
    *,
    dry_runs: int = 200,
    applies: int = 50,
    host: CampaignHost | None = None,
) -> dict[str, Any]:
    """Run ``examples`` changed documents through the checks, ``dry_runs`` of them through the CLI's dry run
    and ``applies`` valid ones through a real apply on ``host``; return the counts (never raises on a bad
    verdict)."""
    if applies and host is None:
        raise ValueError("applies need a CampaignHost")
    folder = Path(tempfile.mkdtemp(prefix="specsweep-campaign-"))
    outcomes: collections.Counter[str] = collections.Counter()
    dry: collections.Counter[str] = collections.Counter()
    applied: collections.Counter[str] = collections.Counter()
    by_kind: collections.Counter[str] = collections.Counter()
    by_category: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with_line = 0
    examples_of: dict[str, list[dict[str, str]]] = collections.defaultdict(list)
    stride = max(1, examples // max(dry_runs, 1))
    index = 0
    valid_seen = 0
    UNCHANGED["documents"] = 0
    started = time.monotonic()

    def example(kind: str, mutations: str, message: str) -> None:
        if len(examples_of[kind]) < 5:
            examples_of[kind].append({"mutations": mutations, "message": message[-2000:]})

    @seed(seed_value)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(documents())
    def one(document: tuple[str, bytes, str]) -> None:
        nonlocal with_line, index, valid_seen
        kind, data, mutations = document
        index += 1
        verdict = check(kind, data, folder / f"{kind}.yaml")
        outcomes[verdict.outcome] += 1
        by_kind[kind] += 1
        for category in set(mutations.split("+")):
            by_category[category][verdict.outcome] += 1
        with_line += verdict.has_line
        if verdict.outcome not in ("valid", "refused"):
            example(verdict.outcome, mutations, verdict.message)
        if kind != "experiment":
            return
        # The dry-run sample: spread over the run, plus (a quarter of it) documents that plan, which a spread
        # sample rarely meets.
        wanted = index % stride == 0 or (verdict.outcome == "valid" and dry["planned"] < dry_runs // 4)
        if sum(dry.values()) < dry_runs and wanted:
            ran = dry_run(data, folder / "dry-run.yaml")
            agrees = (ran.outcome == "planned") == (verdict.outcome == "valid")
            dry[ran.outcome if agrees or ran.outcome not in ("planned", "refused") else "bad_error"] += 1
            if ran.outcome not in ("planned", "refused") or not agrees:
                example(f"dry run: {ran.outcome}", mutations, ran.message or f"library said {verdict.outcome}")
        if host is not None and applies and verdict.outcome == "valid":
            valid_seen += 1
            if sum(applied.values()) < applies and valid_seen % 2 == 0:
                done = apply_on_host(data, folder / "apply.yaml", host.host, host.unit)
                applied[done.outcome] += 1
                if done.outcome != "applied":
                    example(f"apply: {done.outcome}", mutations, done.message)

    one()
    refused = outcomes["refused"]
    return {
        "documents": sum(outcomes.values()),
        "unchanged_drawn": UNCHANGED["documents"],
        "experiments": by_kind["experiment"],
        "playbooks": by_kind["playbook"],
        "outcomes": {name: outcomes[name] for name in OUTCOMES},
        "refused_with_line": with_line,
        "refused_with_line_share": round(with_line / refused, 4) if refused else None,
        "by_category": {k: dict(v) for k, v in sorted(by_category.items())},
        "dry_runs": {name: dry[name] for name in DRY_RUN_OUTCOMES},
        "applies": {name: applied[name] for name in APPLY_OUTCOMES},
        "examples": dict(examples_of),
        "seconds": round(time.monotonic() - started, 1),
        "seed": seed_value,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--dry-runs", type=int, default=200, help="documents through `sweep --dry-run`")
    parser.add_argument("--applies", type=int, default=50, help="valid documents applied on the test host")
    args = parser.parse_args()
    host = CampaignHost() if args.applies else None
    try:
        limit = 2 * 1024**3
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        result = campaign(args.examples, args.seed, dry_runs=args.dry_runs, applies=args.applies, host=host)
    finally:
        if host is not None:
            host.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
