"""Copies a real run directory into tests/data/runs/ as a fixture, small and free of this machine's details.

    python tests/data/runs/import_run.py results/demo/<run id> tests/data/runs/sim-demo

Kept: run.json, experiment.yaml, plan.json, records.jsonl, events.jsonl, windows/. Dropped: the report's
outputs (they are rebuilt by the tests) and each record's per-line ``samples`` list (the window files hold the
same lines). Scrubbed: absolute paths of the controller's interpreter (``{python}`` in the demo's command)
become ``python3``, the controller's host and user names become ``controller``/``engineer``, and the
experiment file's path becomes ``sweeps/<its name>``.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

_ABSOLUTE_PYTHON = re.compile(r"(?<![\w.-])/[^\s\"']*/python3?(?:\.\d+)?(?=[\s\"'])")


def _scrub(text: str) -> str:
    return _ABSOLUTE_PYTHON.sub("python3", text)


def import_run(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copytree(source / "windows", target / "windows")
    for name in ("experiment.yaml", "plan.json", "events.jsonl"):
        if (source / name).exists():
            (target / name).write_text(_scrub((source / name).read_text()))
    info = json.loads((source / "run.json").read_text())
    info["controller"] = {"hostname": "controller", "user": "engineer"}
    if info.get("experiment_file"):  # the controller's path of the file: only its name says anything here
        info["experiment_file"] = f"sweeps/{Path(info['experiment_file']).name}"
    (target / "run.json").write_text(json.dumps(info, indent=2) + "\n")
    lines = []
    for line in (source / "records.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if isinstance(record.get("server"), dict):
            record["server"].pop("samples", None)
        lines.append(_scrub(json.dumps(record, separators=(",", ":"))))
    (target / "records.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    import_run(Path(sys.argv[1]), Path(sys.argv[2]))
