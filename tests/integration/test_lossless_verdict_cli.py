"""The lossless verdict through the real CLI on the simulator (issue 48): a server whose kernels are not
batch-invariant (``--fault batch-rounding``: near-ties flip when a step computes them in another shape than one
request and one position, as bf16 reductions split by batch size do) makes clean speculation differ from the
autoregressive answer alone; the verdict measures the baseline against itself (alone, again, batched at the
sweep's concurrency), calls the clean configuration lossless and the one that accepts wrong drafts
(``--fault wrong-token``) lossy beyond the baseline's own variance, and every output says the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    write_experiment,
)

pytestmark = pytest.mark.timeout(300)

ROUNDING = "--fault batch-rounding=0.05"


def test_rounding_is_told_from_a_speculation_bug(tmp_path: Path) -> None:
    doc = local_experiment(
        "rounding",
        free_port(),
        {
            "autoregressive": f"--algorithm ar {ROUNDING}",
            "linear": f"--algorithm linear --draft-tokens 4 {ROUNDING}",
            "broken": f"--algorithm linear --draft-tokens 4 {ROUNDING} --fault wrong-token=1",
        },
        load={"concurrency": [1, 4], "warmup": 1, "requests": 4, "max_tokens": 48, "temperature": 0},
        itl_ms=20,  # steps far longer than the batched probe's four requests take to arrive: they share every step
    )
    doc["lossless"] = {"prompts": 4}
    home = tmp_path / "home"
    home.mkdir()
    file = write_experiment(tmp_path / "rounding.yaml", doc)
    results = tmp_path / "results"
    env = cli_env(home, COLUMNS="200")
    with local_leftovers_restored(home, file):
        proc = run_cli("sweep", str(file), "--results", str(results), env=env, timeout=280)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (run,) = sorted((results / "rounding").iterdir())

    report = run_cli("report", str(run), "--json", env=env, timeout=120)
    assert report.returncode == 0, report.stderr
    [host] = json.loads(report.stdout)["answer"]["lossless"]
    # The baseline differs from itself once batched: where, is named.
    # alone, again, at the sweep's concurrency and with the rows of the chain's verify step (k + 1 = 5)
    assert host["batchings"] == ["alone", "alone again", "batched at C=4", "batched at C=5"]
    assert host["baseline_divergences"], host
    assert all(d["between"].startswith("alone vs batched at C=") for d in host["baseline_divergences"])
    verdicts = {c["config"]: c for c in host["configurations"]}
    # Clean speculation differs from the answer alone, and is lossless all the same.
    assert verdicts["linear"]["verdict"] == "lossless", verdicts["linear"]
    alone = {a["prompt_index"]: a["text"] for a in _answers(run, "autoregressive") if a["run"] == 1}
    linear = {a["prompt_index"]: a["text"] for a in _answers(run, "linear")}
    assert any(alone[i] != linear[i] for i in alone), "the rounding made no difference: the test tests nothing"
    assert verdicts["broken"]["verdict"] == "lossy", verdicts["broken"]
    assert verdicts["broken"]["lossy"] >= 1 and "lossy beyond the baseline's own variance" in verdicts["broken"]["text"]

    # The ending and report.md say the same verdicts; only the bug is an error.
    out = proc.stdout
    assert "lossless on local: autoregressive differs from itself on" in out
    assert "linear: lossless" in out and "broken: lossy beyond" in out and "lossless linear: lossless" not in out
    assert "error lossless" in out and "broken" in out.split("error lossless", 1)[1].splitlines()[0]
    assert not any("error lossless" in line and "linear" in line.split(":")[0] for line in out.splitlines())
    md = (run / "report.md").read_text()
    assert "Lossless at temperature 0" in md and "linear: lossless" in md and "broken: lossy beyond" in md


def _answers(run: Path, label: str) -> list[dict[str, object]]:
    rows = [json.loads(line) for path in (run / "lossless").glob("*.jsonl") for line in path.read_text().splitlines()]
    return [r for r in rows if r["label"] == label]
