"""ESC and BEL in names never reach a terminal or a report raw (issue 49, "still open"), through the real CLI:
a matrix value ``a<ESC>[31mb<BEL>`` (the experiment file accepts it: it is a value of the server's command) is
shown escaped (``a\\x1b[31mb\\a``) by ``sweep --dry-run``, ``report`` (its console, report.md, summary.csv),
``recommend`` and ``ls``; a record's host and error message edited to hold them are escaped the same."""

from __future__ import annotations

import json

import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.identity import resolved_experiment
from orchestrator.runs.store import RunStore
from tests.reliability.harness import cli_env, local_experiment, run_cli, write_experiment
from tests.unit.synthetic_runs import append_point, plan_of

pytestmark = pytest.mark.timeout(300)

VALUE = "a\x1b[31mb\x07"
SHOWN = "a\\x1b[31mb\\a"
RAW = ("\x1b", "\x07")


def _clean(text: str, where: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached {where} raw"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("control_characters")
    variants = {"autoregressive": "--algorithm ar", "chain": "--algorithm linear --draft-tokens {k}"}
    doc = local_experiment("cc", 9, variants, baselines=["autoregressive"], load={"concurrency": [1]})
    doc["variants"]["chain"]["matrix"] = {"k": [VALUE, "c"]}
    path = write_experiment(base / "cc.yaml", doc)
    configs = [("autoregressive", {}, True), ("chain", {"k": VALUE}, False), ("chain", {"k": "c"}, False)]
    plan = plan_of(configs, [1], lambda params: f"sim --draft-tokens {params.get('k', 0)}")
    store = RunStore.create(base / "results", "cc", resolved_experiment(load_experiment(path)), plan)
    for i, (variant, params, baseline) in enumerate(configs):
        append_point(
            store, "cc", index=i, variant=variant, params=params, load=1, repeat=1, tok_s=100.0 + 50 * i,
            baseline=baseline,
        )  # fmt: skip
    failed = json.loads((store.path / "records.jsonl").read_text().splitlines()[0])
    failed.update(host="gpu\x1b]0;owned\x07box", point_id="p-0-1-1", status="failed", client=None)
    failed["error"] = {"kind": "http_500", "message": "boom \x1b[2J\x07", "evidence": ["line \x1b[1mbold"]}
    with (store.path / "records.jsonl").open("a") as out:
        out.write(json.dumps(failed) + "\n")
    store.set_state("done")
    store.release()
    return {"path": path, "run": store.path, "env": cli_env(base), "results": base / "results"}


def test_the_dry_run_shows_the_value_escaped(made: dict) -> None:
    proc = run_cli("sweep", str(made["path"]), "--dry-run", env=made["env"])
    assert proc.returncode == 0, proc.stderr
    _clean(proc.stdout + proc.stderr, "sweep --dry-run")
    assert SHOWN in proc.stdout


def test_report_its_files_recommend_and_ls_show_the_names_escaped(made: dict) -> None:
    run = made["run"]
    proc = run_cli("report", str(run), env=made["env"])
    assert proc.returncode in (0, 3), proc.stderr
    _clean(proc.stdout + proc.stderr, "the report's console")
    for name in ("report.md", "summary.csv", "report.html"):
        text = (run / name).read_text()
        _clean(text, name)
    assert f"chain(k={SHOWN})" in (run / "report.md").read_text()
    assert SHOWN in (run / "summary.csv").read_text()
    assert "gpu\\x1b]0;owned\\abox" in (run / "summary.csv").read_text()
    for args in (("recommend", str(run)), ("ls", "--results", str(made["results"]))):
        proc = run_cli(*args, env=made["env"])
        assert proc.returncode in (0, 3), proc.stderr
        _clean(proc.stdout + proc.stderr, args[0])
