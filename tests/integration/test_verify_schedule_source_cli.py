"""``specsweep verify-schedule`` deploys what the source sweep deployed (issue 49, "wrong or lost data"), through
the real CLI on a source run of known figures (its winners: k = 4 at C=1, k = 1 at C=4):

- its secrets are read again from where the sweep read them: an ``HF_TOKEN`` and an ``api_key`` written inline
  in the experiment file reach the verification servers and load as themselves, never as the run's redacted
  ``[redacted]`` and ``**********`` (the server here is wrapped by a script that refuses to start without the
  right token: with the redacted one no point of the verification succeeded);
- a ``--speculative-config`` written over several lines is replaced as a shell word holding JSON, not as text
  (a regular expression left the old JSON's tail after the new one: no schedule point started);
- the verification experiment written into the run holds no secret in clear;
- an interrupted verification run is continued by the command it prints, as printed (issue 58, S9): its
  experiment reads the inline secrets from variables only verify-schedule sets, so ``sweep FILE --resume`` of it
  exited 2; ``verify-schedule --resume VERIFY_RUN`` sets them again from the source's experiment file;
- a Ctrl-C before the verification run is made leaves none (issue 58, S13).
"""

from __future__ import annotations

import json
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.identity import experiment_file, resolved_experiment
from orchestrator.runs.store import RunStore
from tests.reliability.harness import (
    cli_env,
    duplicates,
    free_port,
    local_experiment,
    local_leftovers_restored,
    planned_points,
    point_ids,
    records,
    run_cli,
    run_dirs,
    run_state,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.timing import scaled
from tests.unit.synthetic_runs import append_point, plan_of

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("verify_schedule_source_cli")]

TOKEN = "hf_VerifyScheduleToken0123456789"
API_KEY = "sk-verify-schedule-0123456789abcdef"
SPEC = (
    "--engine vllm --algorithm linear --speculative-config '{{\n"
    '  "method": "ngram",\n'
    '  "num_speculative_tokens": {k}\n'
    "}}'"
)
CONFIGS: list[tuple[str, dict[str, Any], bool]] = [("autoregressive", {}, True)]
CONFIGS += [("ngram", {"k": k}, False) for k in (1, 2, 4)]
TOK_S = {1: [100.0, 150.0, 170.0, 200.0], 4: [400.0, 520.0, 480.0, 430.0]}


def _command(params: dict[str, Any]) -> str:
    if "k" not in params:
        return "python -m orchestrator.sim --engine vllm --algorithm ar"
    config = f'{{\n  "method": "ngram",\n  "num_speculative_tokens": {params["k"]}\n}}'
    return f"python -m orchestrator.sim --engine vllm --algorithm linear --speculative-config '{config}'"


def _source_run(base: Path, port: int) -> tuple[Path, Path]:
    """A finished sweep of known figures whose experiment file holds the token and the key inline."""
    gate = base / "needs-token.sh"
    refuse = '{ echo "HF_TOKEN is not the token" >&2; exit 7; }'
    gate.write_text(f'#!/bin/sh\n[ "$HF_TOKEN" = "{TOKEN}" ] || {refuse}\nexec "$@"\n')
    variants = {"autoregressive": "--engine vllm --algorithm ar", "ngram": SPEC}
    load = {"concurrency": [1, 4], "requests": 4, "warmup": 1, "max_tokens": 16}
    doc = local_experiment("vss", port, variants, baselines=["autoregressive"], load=load)
    doc["service"]["command"] = f"sh {gate} " + doc["service"]["command"]
    doc["engine"] = "vllm"
    doc["lossless"] = {"enabled": False}
    doc["variants"]["ngram"]["matrix"] = {"k": [1, 2, 4]}
    doc["service"]["environment"] = {"HF_TOKEN": TOKEN}
    doc["server"]["api_key"] = API_KEY
    path = write_experiment(base / "vss.yaml", doc)
    experiment = load_experiment(path)
    plan = plan_of(CONFIGS, [1, 4], _command)
    store = RunStore.create(
        base / "results", "vss", resolved_experiment(experiment), plan, experiment_file=experiment_file(experiment)
    )
    for i, (variant, params, baseline) in enumerate(CONFIGS):
        for c in (1, 4):
            append_point(
                store, "vss", index=i, variant=variant, params=params, load=c, repeat=1, tok_s=TOK_S[c][i],
                baseline=baseline,
            )  # fmt: skip
    store.set_state("done")
    store.release()
    return store.path, path


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("verify_schedule_source")
    (base / "home").mkdir()
    run, path = _source_run(base, free_port())
    stored = (run / "experiment.yaml").read_text()
    assert TOKEN not in stored and API_KEY not in stored  # the run keeps them redacted, as every run does
    with local_leftovers_restored(base / "home", path):
        yield {"run": run, "file": path, "env": cli_env(base / "home"), "results": base / "results"}


def _schedule_flag(written: dict[str, Any]) -> dict[str, Any]:
    """The JSON after --speculative-config in the schedule variant's command, as the shell would pass it."""
    spec_args = written["variants"]["schedule"]["spec_args"].replace("{{", "{").replace("}}", "}")
    words = shlex.split(spec_args)
    flags = [i for i, w in enumerate(words) if w.startswith("--speculative-config")]
    assert len(flags) == 1, words
    value = words[flags[0] + 1]
    return json.loads(value)  # the whole word is one JSON document: no old tail after it


def test_the_dry_run_writes_a_structural_flag_and_no_secret_in_clear(source: dict[str, Any]) -> None:
    proc = run_cli("verify-schedule", str(source["run"]), "--dry-run", "--rate", "20", env=source["env"])
    assert proc.returncode == 0, proc.stderr
    text = (source["run"] / "verify-schedule.yaml").read_text()
    assert TOKEN not in text and API_KEY not in text
    assert "[redacted]" not in text and "*****" not in text  # was: the redacted copy, deployed as such
    written = yaml.safe_load(text)
    flag = _schedule_flag(written)
    assert flag["method"] == "ngram"
    recommended = run_cli("recommend", str(source["run"]), "--schedule", "--json", env=source["env"])
    assert recommended.returncode == 0, recommended.stderr
    schedule = json.loads(recommended.stdout)["num_speculative_tokens_per_batch_size"]
    assert flag["num_speculative_tokens_per_batch_size"] == schedule and len(schedule) == 2
    assert "$SPECSWEEP_VERIFY_ENVIRONMENT_HF_TOKEN" in proc.stderr


def test_the_verification_servers_get_the_token_and_every_point_runs(source: dict[str, Any]) -> None:
    proc = run_cli("verify-schedule", str(source["run"]), "--rate", "20", env=source["env"], timeout=800)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert "# verdict:" in proc.stdout
    (made,) = run_dirs(source["results"], "vss-verify")
    records = [json.loads(line) for line in (made / "records.jsonl").read_text().splitlines() if line.strip()]
    assert records and all(r["status"] == "ok" for r in records), [r.get("error") for r in records]
    assert TOKEN not in (made / "experiment.yaml").read_text()


def test_an_interrupted_verification_resumes_by_the_command_it_prints_with_the_inline_secrets(
    source: dict[str, Any], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    argv = ("verify-schedule", str(source["run"]), "--rate", "20", "--results", str(results))
    with started_cli(*argv, env=source["env"]) as proc:
        made = wait_until(lambda: next(iter(run_dirs(results, "vss-verify")), None) or proc.poll() is not None)
        assert isinstance(made, Path), proc.communicate()
        wait_until(lambda: records(made) or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, proc.communicate()  # interrupted with points left to measure
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, err
    assert run_state(made) == "interrupted"
    last = err.strip().splitlines()[-1]
    assert last.startswith("specsweep: error: interrupted; hosts restored; resume with "), last
    printed = last.split("resume with ", 1)[1]
    assert printed == f"specsweep verify-schedule --resume {made}"
    words = shlex.split(printed)
    assert words[0] == "specsweep"
    assert not any(name.startswith("SPECSWEEP_VERIFY_") for name in source["env"])  # only verify-schedule sets them
    resumed = run_cli(*words[1:], env=source["env"], timeout=800)  # as printed
    assert resumed.returncode in (0, 3), resumed.stdout + resumed.stderr
    assert "# verdict:" in resumed.stdout
    recs = records(made)
    # Every point measured once and ok: the gate refused to start a server without the right token.
    assert point_ids(recs) == {p for _, p in planned_points(made)} and not duplicates(recs)
    assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    assert run_state(made) in ("done", "failed") and run_dirs(results, "vss-verify") == [made]
    for path in (made / "experiment.yaml", source["run"] / "verify-schedule.yaml", made / "events.jsonl"):
        assert TOKEN not in path.read_text() and API_KEY not in path.read_text()
    # The verification experiment swept without verify-schedule: the error says what sets its secrets.
    bare = run_cli("sweep", str(source["run"] / "verify-schedule.yaml"), "--resume", str(made), env=source["env"])
    assert bare.returncode == 2 and "verify-schedule --resume" in bare.stderr, bare.stderr


def test_resume_refuses_a_run_that_is_no_verification(source: dict[str, Any]) -> None:
    proc = run_cli("verify-schedule", "--resume", str(source["run"]), env=source["env"])
    assert proc.returncode == 1 and "not a verification run" in proc.stderr, proc.stderr
    assert f"specsweep sweep {source['file']} --resume {source['run']}" in proc.stderr
    # The verification experiment is the run's own: the options that derive one are refused with --resume.
    both = run_cli("verify-schedule", "--resume", str(source["run"]), "--rate", "3", env=source["env"])
    assert both.returncode == 2 and "leave out" in both.stderr, both.stderr
    neither = run_cli("verify-schedule", env=source["env"])
    assert neither.returncode == 2 and "give RUN" in neither.stderr, neither.stderr


def test_a_ctrl_c_before_the_verification_run_is_made_leaves_none(source: dict[str, Any], tmp_path: Path) -> None:
    results = tmp_path / "results"
    argv = ("verify-schedule", str(source["run"]), "--rate", "20", "--results", str(results))
    with started_cli(*argv, env=source["env"]) as proc:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # said once the schedule is derived, before its experiment is written
        assert "secrets written inline" in line, line + proc.communicate()[1]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, err
    made = run_dirs(results, "vss-verify")
    if made:  # the signal came once the run directory was made: interrupted, and resumable as it says
        assert run_state(made[0]) == "interrupted" and f"verify-schedule --resume {made[0]}" in err
    else:
        assert "no run was made" in err or "no run directory was made" in err, err
        assert "Traceback" not in err, err
