"""Where `specsweep report` of an 18-point run spends its time: CPU seconds (the machine this runs on may be
shared, so wall-clock is reported too but CPU time is the figure to compare) of the import, the analysis, the
figures and the rest, for the bundled sim-demo run (6 configurations x 3 loads).

    python bench/report_time.py [--repeat 3]

Results: bench/RESULTS-report-time.md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "data" / "runs" / "sim-demo"

_STAGES = """
import sys, time, json
from pathlib import Path
t0 = time.process_time(); w0 = time.perf_counter()
from orchestrator.cli.app import app  # what the console pays before any command
from orchestrator.report import build
t1 = time.process_time()
from orchestrator.analysis import analyse
analysis = analyse(Path(sys.argv[1]))
t2 = time.process_time()
build.write_figures(analysis, Path(sys.argv[1]) / "figures-bench")
t3 = time.process_time()
build.build_report(Path(sys.argv[1]))
t4 = time.process_time()
print(json.dumps({"import": t1 - t0, "analysis": t2 - t1, "figures": t3 - t2, "whole build_report": t4 - t3,
                  "wall": time.perf_counter() - w0}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import json

    rows = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(shutil.copytree(RUN, Path(tmp) / "sim-demo"))
            out = subprocess.run([sys.executable, "-c", _STAGES, str(run)], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        time.sleep(0.1)
    for key in rows[0]:
        values = sorted(r[key] for r in rows)
        print(f"{key:20s} median {values[len(values) // 2]:6.2f} s  (min {values[0]:.2f}, max {values[-1]:.2f})")


if __name__ == "__main__":
    main()
