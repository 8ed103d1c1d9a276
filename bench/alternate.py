"""One command of the controller timed in several trees of specsweep, alternately, on the same input: the way
bench/RESULTS-scale.md compares a change with the tree before it on a shared, noisy machine (each round runs
every tree once, in the order given, so a drift of the machine's speed falls on each tree alike).

    git archive BEFORE | tar -x -C /tmp/before; git archive AFTER | tar -x -C /tmp/after
    python bench/alternate.py --trees /tmp/before,/tmp/after --rounds 2 -- report RUN -o OUT -q
    python bench/alternate.py --trees /tmp/before,/tmp/after --synthesise 5000 --heavy \\
        -- report {run} -o {out} -q
    python bench/alternate.py --trees /tmp/before,/tmp/after --synthesise 20000 --template DEMO_RUN \\
        --rounds 1 -- recommend {run}

Each tree's command runs as ``python -m orchestrator ARGS`` with the tree as its working directory (so its own
``orchestrator`` package is imported); ``{run}`` is replaced by the run directory (``--synthesise``: one run made
once with ``bench/scale.py``'s ``synthesise``, the same for every tree) and ``{out}`` by a directory per tree.
Wall time, CPU time (user + system) and peak resident memory come from ``wait4``, as in bench/scale.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import MANY_LOADS, _measure, synthesise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", required=True, help="specsweep trees (directories), joined by commas")
    parser.add_argument("--rounds", type=int, default=2, help="how many times each tree runs the command")
    parser.add_argument("--synthesise", type=int, default=0, help="make one run of about this many points first")
    parser.add_argument("--loads", type=int, default=MANY_LOADS, help="concurrencies per configuration")
    parser.add_argument("--heavy", action="store_true", help="records the size of a real sweep's")
    parser.add_argument("--template", type=Path, default=None, help="each record one of this run's (bench/scale.py)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("args", nargs="+", help="the command's arguments, after --")
    options = parser.parse_args()
    trees = [Path(t).resolve() for t in options.trees.split(",") if t]
    missing = [str(t) for t in trees if not (t / "orchestrator" / "__init__.py").is_file()]
    if missing:
        parser.error(f"not a specsweep tree: {', '.join(missing)}")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160"}
    with tempfile.TemporaryDirectory(prefix="specsweep-alternate-") as tmp:
        run = ""
        if options.synthesise:
            run_dir, _experiment = synthesise(
                Path(tmp) / "results",
                options.synthesise,
                loads=options.loads,
                heavy=options.heavy,
                template=options.template,
            )
            run = str(run_dir)
        print("| round | tree | wall s | CPU s | peak MiB | exit | load average |")
        print("|---:|---|---:|---:|---:|---:|---:|", flush=True)
        for round_ in range(1, options.rounds + 1):
            for index, tree in enumerate(trees):
                out = str(Path(tmp) / f"out-{index}")
                args = [a.replace("{run}", run).replace("{out}", out) for a in options.args]
                wall, cpu, mib, code = _measure(args, env, options.timeout, cwd=tree)
                load = os.getloadavg()[0]
                cells = f"{wall:.1f} | {cpu:.2f} | {mib:.0f} | {code} | {load:.2f}"
                print(f"| {round_} | {tree.name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
