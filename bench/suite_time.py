"""The test suite's time by directory, from a JUnit XML file that pytest wrote (``--junitxml``).

Prints, per test directory, the number of tests and the sum of their durations (what the directory costs one
worker; pytest-xdist's wall time is less where workers overlap), and the slowest tests. The README's test
command writes no XML; to reproduce the figures in bench/RESULTS-suite.md:

    bash scripts/test.sh --junitxml=/tmp/suite.xml     # the whole suite, as CI runs it
    python bench/suite_time.py /tmp/suite.xml [--slowest 25]
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("junit_xml")
    parser.add_argument("--slowest", type=int, default=25)
    args = parser.parse_args()
    root = ET.parse(args.junit_xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    by_dir: dict[str, list[float]] = defaultdict(list)
    tests: list[tuple[float, str]] = []
    wall = 0.0
    for suite in suites:
        wall = max(wall, float(suite.get("time", 0)))
        for case in suite.iter("testcase"):
            seconds = float(case.get("time", 0))
            classname = case.get("classname", "")
            parts = classname.split(".")
            directory = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
            by_dir[directory].append(seconds)
            tests.append((seconds, f"{classname}::{case.get('name')}"))
    total = sum(sum(v) for v in by_dir.values())
    print(f"{'directory':<22} {'tests':>6} {'sum of durations':>17} {'share':>6}")
    for directory, times in sorted(by_dir.items(), key=lambda kv: -sum(kv[1])):
        print(f"{directory:<22} {len(times):>6} {sum(times) / 60:>14.1f} min {sum(times) / total:>6.0%}")
    print(f"{'all':<22} {sum(len(v) for v in by_dir.values()):>6} {total / 60:>14.1f} min")
    print(f"pytest's wall time (the suite element's time): {wall / 60:.1f} min")
    print(f"\nslowest {args.slowest}:")
    for seconds, name in sorted(tests, reverse=True)[: args.slowest]:
        print(f"{seconds:8.1f} s  {name}")


if __name__ == "__main__":
    main()
