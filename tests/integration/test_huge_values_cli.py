"""Issue 58, R15: numbers and strings no sweep gives, through the real CLI.

- ``validate`` refuses a matrix value, an include/exclude value or a template field of 10^300 (it passed, and
  the report's frame then failed to cast the column: an internal error) or a text of megabytes, and a search
  objective's concurrency of 10^300 (its bound is load.concurrency's), each with file:line and key;
- ``report`` of records holding megabyte names (a variant, a parameter, a figure's key, which becomes a column
  of the analysis's frame) stays as fast as without them: such a record is refused where it enters, and said.
  It is refused, not cut: a name cut short could become another configuration's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.runs.store import RunStore
from tests.integration.test_hostile_records_cli import _record, _report, _run, _skipped
from tests.reliability.harness import cli_env, local_experiment, run_cli, write_experiment
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

HUGE = 10**300
MEGABYTE = "V" * 1_000_000


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return cli_env(tmp_path / "home")


def _doc() -> dict[str, Any]:
    doc = local_experiment("huge", 18999, {"ar": "--algorithm ar", "chain": "--algorithm linear --draft-tokens {k}"})
    doc["variants"]["chain"]["matrix"] = {"k": [2, 4]}
    return doc


def _with(doc: dict[str, Any], where: tuple[str, ...], value: Any) -> dict[str, Any]:
    node = doc
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("where", "value", "key", "said"),
    [
        (("variants", "chain", "matrix", "k"), [2, HUGE], "variants.chain.matrix.k.1", "about 10^300 is no setting"),
        (("variants", "chain", "matrix", "k"), [2, float("inf")], "variants.chain.matrix.k.1", "inf is no setting"),
        (("variants", "chain", "include"), [{"k": HUGE}], "variants.chain.include.0.k", "about 10^300 is no setting"),
        (("variants", "ar", "spec_args"), "x" * 5000, "variants.ar.spec_args", "a text of 5,000 characters"),
    ],
    ids=["matrix-10^300", "matrix-inf", "include-10^300", "field-5000-chars"],
)
def test_validate_refuses_a_setting_no_engine_takes(
    tmp_path: Path, env: dict[str, str], where: tuple[str, ...], value: Any, key: str, said: str
) -> None:
    path = write_experiment(tmp_path / "huge.yaml", _with(_doc(), where, value))
    proc = run_cli("validate", str(path), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "internal error" not in out
    assert f"{path}:" in out and f": {key}: " in out and said in out, out


def test_validate_refuses_a_search_objective_at_a_concurrency_no_load_has(tmp_path: Path, env: dict[str, str]) -> None:
    doc = _doc()
    doc["objective"] = {"maximize": "output_tok_s", "at": {"concurrency": HUGE}}
    path = write_experiment(tmp_path / "huge.yaml", doc)
    proc = run_cli("validate", str(path), env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out
    assert f"{path}:" in out and "concurrency" in out and "100000" in out, out


def test_report_of_records_with_megabyte_names_refuses_them_and_stays_fast(tmp_path: Path, env: dict) -> None:
    probe = RunStore.create(tmp_path / "probe", "p", {"name": "p"}, {})
    probe.release()
    plain = [_record(probe, i, 100.0 + i) for i in range(3)]
    lines = [plain[0], plain[1] | {"variant": MEGABYTE}, plain[2] | {"client": plain[2]["client"] | {MEGABYTE: 1}}]
    lines.append(plain[1] | {"params": {"k": HUGE}})
    run = _run(tmp_path / "results", lines)
    started = time.monotonic()
    doc = _report(run, env)
    took = time.monotonic() - started
    evidence = " ".join(_skipped(doc))
    assert "variant is 1,000,000 characters long" in evidence, evidence
    assert "client: a key 1,000,000 characters long" in evidence, evidence
    assert "params.k: about 10^300 is no setting" in evidence, evidence
    assert doc["counts"]["ok"] == 1
    assert len(json.dumps(doc)) < 200_000  # no megabyte name in the answer
    assert took < scaled(120)  # a guard against minutes (it was 20 s and 1 GB for one such record), not a measurement


def test_ls_counts_what_report_counts_of_records_with_megabyte_names(tmp_path: Path, env: dict) -> None:
    probe = RunStore.create(tmp_path / "probe", "p", {"name": "p"}, {})
    probe.release()
    plain = [_record(probe, i, 100.0 + i) for i in range(3)]
    lines = [plain[0], plain[1] | {"variant": MEGABYTE}, plain[2] | {"params": {"k": HUGE}}]
    run = _run(tmp_path / "results", lines)
    listed = run_cli("ls", "--results", str(run.parent.parent), "--json", env=env)  # before any answer.json
    assert listed.returncode == 0, listed.stderr
    [summary] = json.loads(listed.stdout)["runs"]
    assert (summary["planned"], summary["ok"]) == (3, 1), summary
    assert _report(run, env)["counts"]["ok"] == 1
