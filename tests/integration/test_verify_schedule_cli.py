"""The schedule's verification stage through the real CLI on the simulator's vLLM dialect (issue 39):

- ``specsweep verify-schedule RUN`` derives the schedule of a sweep, writes the verification experiment beside
  it, sweeps it (the schedule as variant ``schedule`` beside autoregressive and the variant's winners, at the
  sweep's concurrencies and over an open-loop ramp) and prints the verdict; ``report --json`` and
  ``recommend --schedule --json`` of the verification run say the same verdict, and the engine's counters show
  the scheduled k at each concurrency;
- a schedule the engine ignores (the simulator's ``--fault ignore-spec-schedule``: it takes the JSON and drafts
  ``num_speculative_tokens`` at every batch size) is caught: the error finding ``schedule_ignored`` and the
  verdict name the load, while the same schedule honoured gives neither;
- the break-even load is in the answer (``report --json``), the report and ``recommend --schedule``, the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    run_dirs,
    write_experiment,
)

pytestmark = [pytest.mark.timeout(1200), pytest.mark.xdist_group("verify_schedule_cli")]

LOAD = {"concurrency": [1, 4], "warmup": 1, "requests": 8, "max_tokens": 24, "ignore_eos": True}
# The real-vLLM trial: k = 4 alone, 1 from two requests up.
SCHEDULE = {"num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 8, 1]]}


def _doc(name: str, port: int, variants: dict[str, str], itl_ms: float | None = None) -> dict:
    doc = local_experiment(name, port, variants, baselines=["autoregressive"], load=dict(LOAD), itl_ms=itl_ms)
    doc["engine"] = "vllm"  # the dialect's /metrics and log lines, as a vLLM run reads them
    doc["lossless"] = {"enabled": False}
    return doc


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    base = tmp_path_factory.mktemp("verify_schedule_cli")
    home = base / "home"
    home.mkdir()
    results = base / "results"
    env = cli_env(home)
    flag = json.dumps(SCHEDULE).replace("{", "{{").replace("}", "}}")
    ar = "--engine vllm --log-stats-interval 0.5 --algorithm ar"
    chain = "--engine vllm --log-stats-interval 0.5 --algorithm linear"
    # 20 ms a step: the simulated time, not the shared machine's CPU, sets each point's throughput, so chains
    # beat autoregressive at C=1 beyond noise. Drafting that costs 5 ms a drafted token of each request makes
    # long drafts pay at C=1 only (k = 2 or 4 best there, k = 1 at C=4): a schedule, not one k everywhere (whose
    # verification deploys nothing: docs/schedule.md).
    drafted = chain + " --draft-tokens {k} --draft-ms-per-token 5"
    source = _doc("vs-source", free_port(), {"autoregressive": ar, "ngram": drafted}, 20.0)
    source["variants"]["ngram"]["matrix"] = {"k": [1, 2, 4]}
    fixed = {"autoregressive": ar, "schedule": f"{chain} --speculative-config '{flag}'"}
    ignored = dict(fixed, schedule=fixed["schedule"] + " --fault ignore-spec-schedule")
    files = {
        "source": write_experiment(base / "source.yaml", source),
        "honoured": write_experiment(base / "honoured.yaml", _doc("vs-honoured", free_port(), fixed)),
        "ignored": write_experiment(base / "ignored.yaml", _doc("vs-ignored", free_port(), ignored)),
    }
    out: dict = {"env": env, "results": results}
    with local_leftovers_restored(home, *files.values()):
        for key in ("source", "honoured", "ignored"):
            proc = run_cli("sweep", str(files[key]), "--results", str(results), "--no-report", env=env, timeout=600)
            assert proc.returncode in (0, 3), proc.stderr
            (out[key],) = run_dirs(results, f"vs-{key}")
        proc = run_cli("verify-schedule", str(out["source"]), "--rate", "20", env=env, timeout=900)
        out["verify_proc"] = proc
        verify_dirs = run_dirs(results, "vs-source-verify")
        out["verify"] = verify_dirs[0] if verify_dirs else None
        yield out
        restore = out["source"] / "verify-schedule.yaml"
        if restore.is_file():
            run_cli("restore", str(restore), "--break-lock", env=env)


def _answer(made: dict, key: str) -> dict:
    proc = run_cli("report", str(made[key]), "--json", env=made["env"], timeout=300)
    assert proc.returncode in (0, 3), proc.stderr
    return json.loads(proc.stdout)["answer"]


def test_verify_schedule_deploys_the_schedule_and_says_beats_ties_or_loses_at_each_load_and_over_the_ramp(
    made: dict,
) -> None:
    proc = made["verify_proc"]
    assert proc.returncode in (0, 3), proc.stderr
    assert made["verify"] is not None
    written = yaml.safe_load((made["source"] / "verify-schedule.yaml").read_text())
    assert set(written["variants"]) >= {"autoregressive", "ngram", "schedule"}
    assert written["load"]["concurrency"] == [1, 4] and written["load"]["rates"] == [20.0]
    assert written["load"]["max_in_flight"] == 4
    recommended = json.loads(run_cli("recommend", str(made["source"]), "--schedule", "--json", env=made["env"]).stdout)
    assert "num_speculative_tokens_per_batch_size" in written["variants"]["schedule"]["spec_args"]
    ans = _answer(made, "verify")
    (verdict,) = ans["schedule_verdicts"]
    assert verdict["label"] == "schedule"
    assert verdict["num_speculative_tokens_per_batch_size"] == recommended["num_speculative_tokens_per_batch_size"]
    assert [v["load_label"] for v in verdict["loads"]] == ["C=1", "C=4"]
    assert [v["mode"] for v in verdict["ramp"]] == ["rate"]
    for item in verdict["loads"] + verdict["ramp"]:
        assert item["outcome"] in ("beats", "ties", "loses")
        # the outcome is the answer's own winner, tied and beaten at that load
        (level,) = [lv for lv in ans["loads"] if lv["load_label"] == item["load_label"]]
        assert level["winner"] == item["winner"]
        if item["outcome"] == "ties":
            assert "schedule" in level["tied"] or level["winner"] == "schedule"
        elif item["outcome"] == "beats":
            assert level["winner"] == "schedule" and item["best_static"] in level["beats"]
        else:
            assert level["winner"] != "schedule" and "schedule" in level["beats"]
    for item in verdict["loads"]:
        k = item["k"]
        assert k["ran"] is True, k
        if k["scheduled_k"] > 0:
            assert abs(k["drafts_per_draft"] - k["scheduled_k"]) <= 0.5
    assert verdict["ignored_at"] == []
    assert f"# verdict: {verdict['summary']}" in proc.stdout
    assert not [f for f in ans["findings"] if f["check"] == "schedule_ignored" and f["severity"] == "error"]
    rec = run_cli("recommend", str(made["verify"]), "--schedule", "--variant", "ngram", "--json", env=made["env"])
    assert rec.returncode == 0, rec.stderr
    assert json.loads(rec.stdout)["schedule_verdicts"] == ans["schedule_verdicts"]


def test_a_schedule_the_engine_ignores_is_caught_and_an_honoured_one_is_not(made: dict) -> None:
    honoured, ignored = _answer(made, "honoured"), _answer(made, "ignored")
    (good,) = honoured["schedule_verdicts"]
    (bad,) = ignored["schedule_verdicts"]
    by_load = {v["load_label"]: v["k"] for v in good["loads"]}
    assert by_load["C=1"]["scheduled_k"] == 4 and by_load["C=4"]["scheduled_k"] == 1
    assert by_load["C=1"]["drafts_per_draft"] == pytest.approx(4.0, abs=0.05)
    assert by_load["C=4"]["drafts_per_draft"] < 1.5 and good["ignored_at"] == []
    assert not [f for f in honoured["findings"] if f["check"] == "schedule_ignored"]
    bad_k = {v["load_label"]: v["k"] for v in bad["loads"]}
    assert bad_k["C=4"]["drafts_per_draft"] == pytest.approx(4.0, abs=0.05) and bad_k["C=4"]["ran"] is False
    assert bad["ignored_at"] == [4] and "did not run the schedule at C=4" in bad["summary"]
    (finding,) = [f for f in ignored["findings"] if f["check"] == "schedule_ignored"]
    assert finding["severity"] == "error" and finding["load"] == "C=4"
    assert "4.00 draft tokens per draft against the scheduled k = 1" in finding["message"]
    report = (made["ignored"] / "report.md").read_text()
    assert "Schedule against the best static configuration" in report and "| NO |" in report


def test_break_even_is_one_answer_in_report_json_report_md_and_recommend(made: dict) -> None:
    ans = _answer(made, "source")
    rec = run_cli("recommend", str(made["source"]), "--schedule", "--json", env=made["env"])
    assert rec.returncode == 0, rec.stderr
    (stop,) = ans["break_even"]
    assert json.loads(rec.stdout)["break_even"] == ans["break_even"]
    assert stop["variant"] == "ngram" and set(stop["judged"]) | set(stop["not_judged"]) == {1, 4}
    if stop["load"] is not None and stop["last_win"] is not None:
        assert stop["bracket"] == [stop["last_win"], stop["load"]]
    report = (Path(made["source"]) / "report.md").read_text()
    assert "## Where speculation stops paying" in report and stop["text"] in report
