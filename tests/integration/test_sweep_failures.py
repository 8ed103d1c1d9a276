"""Failures that must not waste the hosts, and must not pass silently: the CLI as a subprocess, the simulator
(or a stand-in server) as a local process.

- exit codes and run states: every point failed exits 3 and the run is ``failed``; ``--allow-failures`` exits 0;
- a wrong port stops within two real start times and names the port the server listens on (the demo itself);
  a server that listens on another address, or that only the host's sockets show on another port, too;
- the failure policy: a baseline that cannot start, or three deployments in a row, stop the sweep (exit 4);
- a wrong ``engine:`` is a warning finding naming the likely engine, and ``parse`` says so;
- ``--resume`` refuses an edited experiment with what changed, ``--redo-changed`` measures it again, and
  ``latest`` is the latest run of this file on these hosts;
- an SSH target that is no SSH server is one line, no paramiko traceback.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.reliability.harness import (
    ROOT,
    SMALL_LOAD,
    cli_env,
    events,
    free_port,
    local_experiment,
    only_run_dir,
    records,
    run_cli,
    run_dirs,
    run_state,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)


def _port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _state_files(home: Path) -> list[str]:
    state = home / ".local" / "state" / "specsweep"
    return sorted(p.name for p in state.iterdir() if not p.name.endswith(".log")) if state.is_dir() else []


def _info(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "run.json").read_text()))


def _seconds(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _demo(port: int, url_port: int, **changes: Any) -> dict[str, Any]:
    """sweeps/demo.yaml with the server started on ``port`` and the URL pointing at ``url_port``."""
    doc = yaml.safe_load((ROOT / "sweeps" / "demo.yaml").read_text())
    doc["service"]["command"] = doc["service"]["command"].replace("--port 18181", f"--port {port}")
    assert f"--port {port}" in doc["service"]["command"]
    doc["server"]["url"] = f"http://127.0.0.1:{url_port}"
    doc.update(changes)
    return doc


# -- exit codes and states ----------------------------------------------------------------------------------


def test_a_sweep_whose_every_point_failed_exits_3_and_is_failed(tmp_path: Path, home: Path) -> None:
    port = free_port()
    doc = local_experiment("allfail", port, {"errors": "--fault http-500-rate=1"}, baselines=[])
    path = write_experiment(tmp_path / "allfail.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", env=cli_env(home))
    assert proc.returncode == 3, proc.stderr
    last = _last_line(proc.stderr)
    assert last.startswith("specsweep: error: 2 of 2 point(s) failed (all_requests_failed x2)"), last
    assert "--allow-failures exits 0" in last
    run_dir = only_run_dir(results, "allfail")
    info = _info(run_dir)
    assert info["state"] == "failed" and info["points"] == {"planned": 2, "ok": 0, "failed": 2}
    assert info["experiment_file"] == str(path.resolve()) and info["hosts"] == ["local (this machine)"]

    allowed = run_cli(
        "sweep", str(path), "--results", str(results), "--no-report", "--allow-failures", "--json", env=cli_env(home)
    )
    assert allowed.returncode == 0, allowed.stderr
    summary = json.loads(allowed.stdout)
    assert summary["state"] == "failed" and summary["exit_code"] == 0 and summary["run_points"]["failed"] == 2
    assert "specsweep: error" not in allowed.stderr
    assert wait_until(lambda: _port_closed(port), timeout=30) and _state_files(home) == []


def test_help_documents_the_exit_codes_and_the_new_flags(tmp_path: Path) -> None:
    proc = run_cli("sweep", "--help", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    for words in ("--allow-failures", "--redo-changed", "3 the plan ran to its end but points failed", "4 the"):
        assert words in text, words


# -- a wrong port -------------------------------------------------------------------------------------------


def test_the_wrong_port_demo_stops_within_two_start_times_and_names_the_port(tmp_path: Path, home: Path) -> None:
    """sweeps/demo.yaml with the URL's port changed: the AR baseline cannot start, so the sweep stops at once."""
    results = tmp_path / "results"
    # The server's real start time: the demo's own command and URL, the baseline alone, one tiny point.
    port = free_port()
    right = _demo(port, port, variants={"autoregressive": {"spec_args": "--algorithm ar"}})
    right["baselines"] = ["autoregressive"]
    right["load"] = {"concurrency": [1], "warmup": 0, "requests": 1, "max_tokens": 4}
    right["name"] = "demo-right"
    ok = run_cli("sweep", str(write_experiment(tmp_path / "right.yaml", right)), "--results", str(results),
                 "--no-report", "-q", env=cli_env(home))  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    start = next(e["seconds"] for e in events(only_run_dir(results, "demo-right")) if e["kind"] == "healthy")

    wrong_port = free_port()
    path = write_experiment(tmp_path / "demo.yaml", _demo(port, wrong_port))
    proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", env=cli_env(home))
    assert proc.returncode == 4, proc.stderr
    last = _last_line(proc.stderr)
    assert last.startswith("specsweep: error: stopped by the failure policy: the baseline autoregressive"), last
    assert f"listens on port {port}, not on the URL's port {wrong_port}" in last
    assert f"'Uvicorn running on http://127.0.0.1:{port}'" in last
    run_dir = only_run_dir(results, "demo")
    evs = events(run_dir)
    deploy = next(e for e in evs if e["kind"] == "deploy")
    failed = next(e for e in evs if e["kind"] == "start_failed")
    waited = _seconds(failed) - _seconds(deploy)
    assert waited <= 2 * start, f"waited {waited:.2f} s on the wrong port; the server starts in {start:.2f} s"
    assert [e["kind"] for e in evs].count("deploy") == 1  # nothing after the baseline was deployed
    info = _info(run_dir)
    assert info["state"] == "stopped" and f"port {port}" in info["stop_reason"]
    assert info["points"] == {"planned": 18, "ok": 0, "failed": 3}
    recs = records(run_dir)
    assert [r["error"]["kind"] for r in recs] == ["start_wrong_port"] * 3
    assert any(f"Uvicorn running on http://127.0.0.1:{port}" in line for line in recs[0]["error"]["evidence"])
    print(f"wrong-port demo: stopped {waited:.2f} s after the deploy; real start {start:.2f} s")
    assert wait_until(lambda: _port_closed(port), timeout=30) and _state_files(home) == []


def test_a_server_listening_on_another_address_fails_fast(tmp_path: Path, home: Path) -> None:
    """The log says it listens on the URL's port, but on 127.0.0.2 while the URL says 127.0.0.1."""
    port = free_port()
    doc = local_experiment("otherhost", port, {"ar": "--algorithm ar"}, ready_timeout="60s")
    doc["service"]["command"] = doc["service"]["command"].replace("--host 127.0.0.1", "--host 127.0.0.2")
    path = write_experiment(tmp_path / "otherhost.yaml", doc)
    proc = run_cli("sweep", str(path), "--results", str(tmp_path / "results"), "--no-report", env=cli_env(home))
    assert proc.returncode == 4, proc.stderr
    last = _last_line(proc.stderr)
    assert f"listens on 127.0.0.2:{port}" in last and "the URL's host 127.0.0.1" in last, last
    recs = records(only_run_dir(tmp_path / "results", "otherhost"))
    assert {r["error"]["kind"] for r in recs} == {"start_refused"}
    evs = events(only_run_dir(tmp_path / "results", "otherhost"))
    assert _seconds(next(e for e in evs if e["kind"] == "start_failed")) - _seconds(evs[0]) < 15


@pytest.mark.skipif(not (shutil.which("ss") and shutil.which("ps")), reason="needs ss and ps")
def test_a_server_whose_log_says_nothing_is_found_on_its_port_by_the_hosts_sockets(tmp_path: Path, home: Path) -> None:
    """A stand-in server (Python's http.server) logs no line specsweep knows: ``ss`` finds its port."""
    port, wrong = free_port(), free_port()
    doc = local_experiment("silent", wrong, {"plain": "--bind 127.0.0.1"}, baselines=[], ready_timeout="60s")
    doc["service"]["command"] = "{python} -u -m http.server " + str(port) + " {spec_args}"
    doc["server"]["health_paths"] = ["/"]
    path = write_experiment(tmp_path / "silent.yaml", doc)
    proc = run_cli("sweep", str(path), "--results", str(tmp_path / "results"), "--no-report", env=cli_env(home))
    assert proc.returncode in (3, 4), proc.stderr
    recs = records(only_run_dir(tmp_path / "results", "silent"))
    assert {r["error"]["kind"] for r in recs} == {"start_wrong_port"}
    message = recs[0]["error"]["message"]
    assert f"listens on port {port}, not on the URL's port {wrong}" in message and "the host's sockets" in message
    assert wait_until(lambda: _port_closed(port), timeout=30)


def test_a_command_that_is_not_there_fails_at_once(tmp_path: Path, home: Path) -> None:
    """specsweep (or the engine) not on the host's PATH: the process is gone, not waited for."""
    doc = local_experiment("nocmd", free_port(), {"ar": "--algorithm ar"}, ready_timeout="120s")
    doc["service"]["command"] = "specsweep-not-installed-here {spec_args}"
    path = write_experiment(tmp_path / "nocmd.yaml", doc)
    proc = run_cli("sweep", str(path), "--results", str(tmp_path / "results"), "--no-report", env=cli_env(home))
    assert proc.returncode == 4, proc.stderr
    evs = events(only_run_dir(tmp_path / "results", "nocmd"))
    waited = _seconds(next(e for e in evs if e["kind"] == "start_failed")) - _seconds(evs[0])
    assert waited < 10, waited


# -- the failure policy -------------------------------------------------------------------------------------


def _faulty(name: str, port: int, **extra: Any) -> dict[str, Any]:
    variants = {"ar": "--algorithm ar"}  # then three distinct configurations that cannot start, then one that can
    variants.update({f"f{i}": f"--fault fail-start --seed {i}" for i in (1, 2, 3)})
    variants["after"] = "--algorithm linear"
    doc = local_experiment(name, port, variants, load={**SMALL_LOAD, "concurrency": [1]})
    doc.update(extra)
    return doc


def test_three_deployments_in_a_row_that_cannot_start_stop_the_sweep(tmp_path: Path, home: Path) -> None:
    port = free_port()
    path = write_experiment(tmp_path / "row.yaml", _faulty("row", port))
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", "--json", env=cli_env(home))
    assert proc.returncode == 4, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["state"] == "stopped" and summary["exit_code"] == 4
    assert summary["stop_reason"].startswith("3 deployments in a row could not start on local, the last f3: ")
    run_dir = only_run_dir(results, "row")
    assert [r["variant"] for r in records(run_dir)] == ["ar", "f1", "f2", "f3"]  # "after" never deployed
    assert [e["kind"] for e in events(run_dir)].count("policy_stop") == 1
    assert run_state(run_dir) == "stopped"
    assert "stopped by the failure policy: 3 deployments in a row" in _last_line(proc.stderr)
    assert wait_until(lambda: _port_closed(port), timeout=30) and _state_files(home) == []

    # Turned off, the sweep goes on to the end: the last configuration is measured, the failures exit 3.
    off = _faulty("row-off", port, failure_policy={"max_consecutive_failed_deployments": 0})
    proc = run_cli("sweep", str(write_experiment(tmp_path / "off.yaml", off)), "--results", str(results),
                   "--no-report", env=cli_env(home))  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    recs = records(only_run_dir(results, "row-off"))
    assert [(r["variant"], r["status"]) for r in recs][-1] == ("after", "ok")
    assert run_state(only_run_dir(results, "row-off")) == "done"


def test_the_failure_policy_is_validated(tmp_path: Path) -> None:
    doc = _faulty("bad", free_port(), failure_policy={"max_consecutive_failed": 2})
    proc = run_cli("validate", str(write_experiment(tmp_path / "bad.yaml", doc)), env=cli_env(tmp_path))
    assert proc.returncode == 2
    assert "failure_policy.max_consecutive_failed" in proc.stderr + proc.stdout


# -- a wrong engine -----------------------------------------------------------------------------------------


def test_a_wrong_engine_is_a_warning_naming_the_likely_engine(tmp_path: Path, home: Path) -> None:
    port = free_port()
    doc = local_experiment("wrongengine", port, {"ar": "--algorithm ar", "linear": "--algorithm linear"})
    doc["engine"] = "vllm"  # the simulator prints SGLang's lines
    doc["server"]["health_paths"] = ["/health"]
    path = write_experiment(tmp_path / "wrongengine.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), env=cli_env(home))
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(results, "wrongengine")
    findings = json.loads((run_dir / "checks.json").read_text())
    findings = findings["findings"] if isinstance(findings, dict) else findings
    mismatch = [f for f in findings if f["check"] == "engine_mismatch"]
    assert len(mismatch) == 1 and mismatch[0]["severity"] == "warning", findings
    assert "engine: vllm read none of the" in mismatch[0]["message"]
    assert "the server looks like sglang (set engine: sglang)" in mismatch[0]["message"]
    assert "4 of 4 window(s)" in mismatch[0]["message"]

    window = run_dir / records(run_dir)[-1]["window_file"]
    parsed = run_cli("parse", "--engine", "vllm", str(window), env=cli_env(home))
    assert parsed.returncode == 0, parsed.stderr
    assert _last_line(parsed.stderr).startswith("warning: engine: vllm read none of the")
    assert "the server looks like sglang" in parsed.stderr
    as_json = run_cli("parse", "--engine", "vllm", "--json", str(window), env=cli_env(home))
    assert "looks like sglang" in json.loads(as_json.stdout)["warnings"][0]
    right = run_cli("parse", "--engine", "sglang", str(window), env=cli_env(home))
    assert "warning" not in right.stderr


# -- resume -------------------------------------------------------------------------------------------------


def test_resume_refuses_an_edited_experiment_and_redo_changed_measures_it_again(tmp_path: Path, home: Path) -> None:
    port = free_port()
    variants = {"ar": "--algorithm ar", "linear": "--algorithm linear --draft-tokens 7"}
    doc = local_experiment("edited", port, variants, load={**SMALL_LOAD, "concurrency": [1]})
    path = write_experiment(tmp_path / "edited.yaml", doc)
    results = tmp_path / "results"
    first = run_cli("sweep", str(path), "--results", str(results), "--no-report", "-q", env=cli_env(home))
    assert first.returncode == 0, first.stderr
    run_dir = only_run_dir(results, "edited")
    before = (run_dir / "records.jsonl").read_text()

    doc["variants"]["linear"]["spec_args"] = "--algorithm linear --draft-tokens 5"
    doc["engine"] = "sglang"
    write_experiment(path, doc)
    argv = ("sweep", str(path), "--results", str(results), "--no-report", "-q", "--resume", "latest")
    refused = run_cli(*argv, env=cli_env(home))
    assert refused.returncode == 1, refused.stderr
    last = _last_line(refused.stderr)
    assert last.startswith(f"specsweep: error: cannot resume {run_dir}: the experiment changed since that run ("), last
    assert "engine: 'sim' became 'sglang'" in last
    assert "variants.linear.spec_args: '--algorithm linear --draft-tokens 7' became" in last
    assert "2 of its 2 finished point(s) were measured with what changed" in last and "--redo-changed" in last
    assert (run_dir / "records.jsonl").read_text() == before  # refused: nothing touched

    redo = run_cli(*argv, "--redo-changed", env=cli_env(home))
    assert redo.returncode == 0, redo.stderr
    assert redo.stdout.strip() == str(run_dir)
    recs = records(run_dir)
    assert sorted(r["variant"] for r in recs) == ["ar", "linear"] and {r["status"] for r in recs} == {"ok"}
    assert all(r["server"]["engine"] == "sglang" for r in recs)
    superseded = [json.loads(line) for line in (run_dir / "superseded.jsonl").read_text().splitlines()]
    assert len(superseded) == 2 and all("engine: 'sim' became 'sglang'" in r["superseded_reason"] for r in superseded)
    assert "--draft-tokens 5" in (run_dir / "experiment.yaml").read_text()
    assert next(e for e in events(run_dir) if e["kind"] == "resume_changed")["superseded"] == 2
    # New windows never overwrite the superseded points' windows.
    assert len({r["window_file"] for r in recs + superseded}) == 4


def test_resume_latest_is_the_latest_run_of_this_file_on_these_hosts(tmp_path: Path, home: Path) -> None:
    port = free_port()
    doc = local_experiment("shared", port, {"ar": "--algorithm ar"}, load={**SMALL_LOAD, "concurrency": [1]})
    mine = write_experiment(tmp_path / "mine.yaml", doc)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = write_experiment(other_dir / "mine.yaml", doc)  # the same experiment name, another file
    results = tmp_path / "results"
    for path in (mine, other):
        proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", "-q", env=cli_env(home))
        assert proc.returncode == 0, proc.stderr
    by_file = {_info(d)["experiment_file"]: d for d in run_dirs(results, "shared")}
    first = by_file[str(mine.resolve())]
    assert by_file[str(other.resolve())] != first
    resumed = run_cli("sweep", str(mine), "--results", str(results), "--no-report", "-q", "--resume", "latest",
                      env=cli_env(home))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == str(first)  # not the newest directory, which is the other file's
    third = write_experiment(tmp_path / "third.yaml", doc)
    none = run_cli("sweep", str(third), "--results", str(results), "--resume", "latest", env=cli_env(home))
    assert none.returncode == 1
    last = _last_line(none.stderr)
    assert f"no run of {third.resolve()} on local (this machine)" in last, last


# -- an SSH target that is no SSH server --------------------------------------------------------------------


def test_an_ssh_target_that_is_not_an_ssh_server_is_one_line(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    done = threading.Event()

    def answer() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        doc = {
            "name": "notssh",
            "host": {"ssh": f"root@127.0.0.1:{port}", "connect_timeout": "5s", "known_hosts": str(tmp_path / "kh")},
            "service": {"kind": "systemd", "unit": "x.service", "exec_start": "/bin/true {a}"},
            "server": {"url": f"http://127.0.0.1:{port}"},
            "engine": "sglang",
            "variants": {"v": {"a": "1"}},
            "load": {"concurrency": [1]},
        }
        path = write_experiment(tmp_path / "notssh.yaml", doc)
        outputs = {}
        for argv in (("sweep", str(path), "--results", str(tmp_path / "results"), "-q"), ("doctor", str(path))):
            proc = run_cli(*argv, env=cli_env(tmp_path), timeout=60)
            assert proc.returncode == 1, proc.stderr
            assert "Traceback" not in proc.stderr + proc.stdout and "Exception (client)" not in proc.stderr
            assert "not an SSH server" in proc.stderr + proc.stdout
            outputs[argv[0]] = proc
        sweep_err = [line for line in outputs["sweep"].stderr.splitlines() if line.strip()]
        assert len(sweep_err) == 1 and sweep_err[0].startswith("specsweep: error: "), sweep_err
    finally:
        done.set()
        thread.join(timeout=scaled(5))
        listener.close()
