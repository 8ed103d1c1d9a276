"""The bad-input campaign at full size: generated experiment and playbook documents (10,000 by default).

Each document comes from ``tests/reliability/documents.py`` (a valid seed plus mutations by category: wrong
types, unknown keys, bad durations, unresolvable templates, empty and huge matrices, missing keys, damaged YAML)
and gets a verdict: a valid plan, one ConfigError line naming the file (with or without a line number), a
plan whose command a host would refuse at apply time, a badly formed error, or a traceback. The promise is
that only the first two ever happen.

    .venv/bin/python bench/reliability_bad_inputs.py                  # 10,000 documents, a JSON summary
    .venv/bin/python bench/reliability_bad_inputs.py --examples 1000  # a quick look

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

from tests.reliability.documents import check, documents  # noqa: E402

OUTCOMES = ("valid", "refused", "unappliable", "bad_error", "traceback")


def campaign(examples: int = 10_000, seed_value: int = 20261130) -> dict[str, Any]:
    """Run ``examples`` documents through the checks; return the counts (never raises on a bad verdict)."""
    folder = Path(tempfile.mkdtemp(prefix="specsweep-campaign-"))
    outcomes: collections.Counter[str] = collections.Counter()
    by_kind: collections.Counter[str] = collections.Counter()
    by_category: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with_line = 0
    examples_of: dict[str, list[dict[str, str]]] = collections.defaultdict(list)
    started = time.monotonic()

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
        nonlocal with_line
        kind, data, mutations = document
        verdict = check(kind, data, folder / f"{kind}.yaml")
        outcomes[verdict.outcome] += 1
        by_kind[kind] += 1
        for category in set(mutations.split("+")):
            by_category[category][verdict.outcome] += 1
        with_line += verdict.has_line
        if verdict.outcome not in ("valid", "refused") and len(examples_of[verdict.outcome]) < 5:
            examples_of[verdict.outcome].append({"mutations": mutations, "message": verdict.message[-2000:]})

    one()
    refused = outcomes["refused"]
    return {
        "documents": sum(outcomes.values()),
        "experiments": by_kind["experiment"],
        "playbooks": by_kind["playbook"],
        "outcomes": {name: outcomes[name] for name in OUTCOMES},
        "refused_with_line": with_line,
        "refused_with_line_share": round(with_line / refused, 4) if refused else None,
        "by_category": {k: dict(v) for k, v in sorted(by_category.items())},
        "examples": dict(examples_of),
        "seconds": round(time.monotonic() - started, 1),
        "seed": seed_value,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    limit = 2 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(json.dumps(campaign(args.examples, args.seed), indent=2))


if __name__ == "__main__":
    main()
