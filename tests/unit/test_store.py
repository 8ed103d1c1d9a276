"""The run directory store: layout, durable appends, torn lines, resume bookkeeping, schema refusal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import SchemaVersionError, StoreError
from orchestrator.runs.store import RUN_SCHEMA_VERSION, Record, RunStore, find_latest, utc_now_iso
from tests.timing import scaled

PLAN = {"schema_version": 1, "experiment": "demo", "deployments": [], "totals": {}}


def make_record(point: str, status: str = "ok", *, host: str = "local", attempt: int = 1, **extra: Any) -> Record:
    fields: dict[str, Any] = {
        "run_id": "r",
        "experiment": "demo",
        "deployment_id": "d-1",
        "point_id": point,
        "config_hash": "c-1",
        "host": host,
        "variant": "ddtree",
        "params": {"budget": 7, "topk": 1, "flag": True, "name": "x", "scale": 0.5},
        "mode": "concurrency",
        "concurrency": 1,
        "status": status,
        "attempt": attempt,
        "started_at": utc_now_iso(),
        "finished_at": utc_now_iso(),
        "client": {"requests": 16, "output_tok_s": 98.0},
    }
    fields.update(extra)
    return Record(**fields)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path / "results", "demo", {"name": "demo", "checks": {}}, PLAN)


def test_create_lays_out_the_run_directory(store: RunStore, tmp_path: Path) -> None:
    assert store.path.parent == tmp_path / "results" / "demo"
    assert store.path.name == store.run_id
    stamp, short = store.run_id.split("-")
    assert datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
    assert len(short) == 6
    for name in ("run.json", "experiment.yaml", "plan.json", "records.jsonl", "events.jsonl", "windows"):
        assert (store.path / name).exists(), name
    info = json.loads((store.path / "run.json").read_text())
    assert info["schema_version"] == RUN_SCHEMA_VERSION
    assert info["state"] == "running"
    assert info["experiment"] == "demo"
    assert info["controller"]["hostname"]
    assert info["ended_at"] is None
    assert store.experiment() == {"name": "demo", "checks": {}}
    assert store.plan() == PLAN


def test_experiment_text_is_stored_verbatim(tmp_path: Path) -> None:
    text = "# resolved\nname: demo\nserver: {api_key: '***'}\n"
    store = RunStore.create(tmp_path, "demo", text, PLAN)
    assert (store.path / "experiment.yaml").read_text() == text


def test_append_round_trips_records_and_params_keep_their_types(store: RunStore) -> None:
    store.append(make_record("p-1"))
    store.append(make_record("p-2", "failed", error={"kind": "start_failed", "message": "m", "evidence": ["x"]}))
    again = RunStore.open(store.path).records()
    assert [r.point_id for r in again] == ["p-1", "p-2"]
    params = again[0].params
    assert params == {"budget": 7, "topk": 1, "flag": True, "name": "x", "scale": 0.5}
    assert type(params["budget"]) is int and type(params["flag"]) is bool
    assert again[1].error == {"kind": "start_failed", "message": "m", "evidence": ["x"]}


def test_each_append_is_one_fsynced_line(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    store.append(make_record("p-1"))
    assert synced, "append returned without fsync"
    lines = (store.path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["point_id"] == "p-1"


def test_a_killed_writer_leaves_every_fsynced_record(tmp_path: Path) -> None:
    """A child process appends records and is killed with SIGKILL: every record it was told about is there."""
    store = RunStore.create(tmp_path, "demo", {"name": "demo"}, PLAN)
    script = textwrap.dedent(
        f"""
        import sys
        from orchestrator.runs.store import RunStore, Record
        store = RunStore.open({str(store.path)!r})
        for i in range(1000000):
            store.append(Record(run_id="r", experiment="demo", deployment_id="d", point_id=f"p-{{i}}",
                config_hash="c", host="h", variant="v", mode="concurrency", concurrency=1, status="ok",
                started_at="t", finished_at="t"))
            print(i, flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        acknowledged = -1
        for line in proc.stdout:
            acknowledged = int(line)
            if acknowledged >= 20:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    records = RunStore.open(store.path).records()
    ids = [r.point_id for r in records]
    assert {f"p-{i}" for i in range(acknowledged + 1)} <= set(ids)
    assert len(ids) == len(set(ids))


def test_a_torn_last_line_is_skipped_and_counted_then_sealed(store: RunStore) -> None:
    store.append(make_record("p-1"))
    good = make_record("p-2").model_dump_json()
    with open(store.path / "records.jsonl", "a") as fh:
        fh.write(good[: len(good) // 2])  # what kill -9 in the middle of a write leaves
    reopened = RunStore.open(store.path)
    assert [r.point_id for r in reopened.records()] == ["p-1"]
    assert len(reopened.skipped_lines) == 1
    assert reopened.skipped_lines[0].line_number == 2
    assert "not JSON" in reopened.skipped_lines[0].reason

    # The next append must not glue itself onto the fragment.
    reopened.append(make_record("p-3"))
    again = RunStore.open(store.path)
    assert [r.point_id for r in again.records()] == ["p-1", "p-3"]
    assert len(again.skipped_lines) == 1


def test_a_line_that_is_json_but_not_a_record_is_skipped(store: RunStore) -> None:
    with open(store.path / "records.jsonl", "a") as fh:
        fh.write('{"point_id": "p-1"}\n[1, 2]\n\n')
    store.append(make_record("p-2"))
    records = store.records()
    assert [r.point_id for r in records] == ["p-2"]
    assert [s.line_number for s in store.skipped_lines] == [1, 2]


def test_resume_bookkeeping_last_attempt_wins(store: RunStore) -> None:
    store.append(make_record("p-ok"))
    store.append(make_record("p-failed", "failed"))
    store.append(make_record("p-skipped", "skipped"))
    store.append(make_record("p-retried", "failed"))
    store.append(make_record("p-retried", "ok", attempt=2))
    store.append(make_record("p-regressed", "ok"))
    store.append(make_record("p-regressed", "failed", attempt=2))
    store.append(make_record("p-ok", host="other-host", status="failed"))

    reopened = RunStore.open(store.path)
    assert reopened.final_point_keys() == {
        ("local", "p-ok"),
        ("local", "p-failed"),
        ("local", "p-retried"),
        ("local", "p-regressed"),
        ("other-host", "p-ok"),
    }
    assert reopened.final_point_keys(retry_failed=True) == {("local", "p-ok"), ("local", "p-retried")}
    assert reopened.next_attempt("local", "p-retried") == 3
    assert reopened.next_attempt("local", "never-ran") == 1
    latest = reopened.latest_records()
    assert latest[("local", "p-regressed")].status == "failed"


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        pytest.param(RUN_SCHEMA_VERSION + 1, "upgrade specsweep", id="newer"),
        pytest.param(0, "specsweep version that wrote it", id="older"),
        pytest.param(None, "specsweep version that wrote it", id="missing"),
    ],
)
def test_unknown_schema_is_refused_with_what_to_do(store: RunStore, version: int | None, expected: str) -> None:
    info = json.loads((store.path / "run.json").read_text())
    info["schema_version"] = version
    (store.path / "run.json").write_text(json.dumps(info))
    with pytest.raises(SchemaVersionError, match=expected):
        RunStore.open(store.path)


def test_a_record_of_a_newer_schema_is_refused_not_skipped(store: RunStore) -> None:
    line = json.loads(make_record("p-1").model_dump_json())
    line["schema_version"] = RUN_SCHEMA_VERSION + 1
    with open(store.path / "records.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")
    with pytest.raises(SchemaVersionError, match="upgrade"):
        RunStore.open(store.path).records()


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a run directory"):
        RunStore.open(tmp_path)


def test_set_state_stamps_end_and_counts_resumes(store: RunStore) -> None:
    store.set_state("interrupted")
    info = RunStore.open(store.path).info
    assert info.state == "interrupted" and info.ended_at is not None
    resumed = RunStore.open(store.path)
    resumed.set_state("running")
    info = RunStore.open(store.path).info
    assert info.state == "running" and info.ended_at is None and len(info.resumed_at) == 1
    resumed.set_state("done")
    assert RunStore.open(store.path).info.state == "done"


def test_windows_and_events(store: RunStore) -> None:
    rel = store.write_window("p-1", "Decode batch, accept len: 3.50\n")
    assert rel == "windows/p-1.log"
    assert (store.path / rel).read_text() == "Decode batch, accept len: 3.50\n"
    rel_host = store.write_window("p-1", "x", host="root@gpu-box:22", attempt=2)
    assert rel_host == "windows/root_gpu-box_22/p-1.attempt2.log"
    assert (store.path / rel_host).is_file()
    assert store.write_window("../../etc/passwd", "x").startswith("windows/")

    store.event("deploy", deployment="d-1", host="local")
    store.event("restore", ok=True)
    events = RunStore.open(store.path).events()
    assert [e["kind"] for e in events] == ["deploy", "restore"]
    assert events[0]["deployment"] == "d-1" and events[0]["time"].endswith("Z")


def test_latest_and_resolve(tmp_path: Path) -> None:
    first = RunStore.create(tmp_path, "demo", {}, PLAN, now=datetime(2026, 5, 30, 0, 0, tzinfo=UTC))
    second = RunStore.create(tmp_path, "demo", {}, PLAN, now=datetime(2026, 5, 31, 0, 0, tzinfo=UTC))
    assert find_latest(tmp_path, "demo") == second.path
    assert RunStore.resolve("latest", tmp_path, "demo").run_id == second.run_id
    assert RunStore.resolve(first.path, tmp_path, "demo").run_id == first.run_id
    with pytest.raises(StoreError, match="no runs"):
        find_latest(tmp_path, "other")


def test_disk_full_becomes_a_store_error_naming_the_file(store: RunStore) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    target = store.path / "records.jsonl"
    target.unlink()
    target.symlink_to("/dev/full")
    with pytest.raises(StoreError, match=r"records\.jsonl: disk full"):
        store.append(make_record("p-1"))


def test_unwritable_root_becomes_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StoreError, match="cannot create a run directory"):
        RunStore.create(blocker, "demo", {}, PLAN)


def test_permission_denied_becomes_a_store_error(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root ignores file modes, so the refusal is injected at the OS call.
    def refuse(*_args: object, **_kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(StoreError, match="Permission denied"):
        store.event("deploy")


def test_a_line_nested_beyond_the_parser_is_a_bad_line_not_an_internal_error(tmp_path: Path) -> None:
    """A forged records.jsonl or events.jsonl line nested a million deep (issue 28, item 9): read as one
    unreadable line; run.json nested so is a StoreError naming the file; `specsweep report` says so in one
    line instead of ending with a RecursionError."""
    import shutil

    from orchestrator.errors import StoreError
    from orchestrator.runs.reading import parse_json
    from orchestrator.runs.store import RunStore, read_json_lines

    deep = "[" * 1_000_000 + "]" * 1_000_000
    with pytest.raises(json.JSONDecodeError):
        parse_json(deep)
    run = tmp_path / "clean"
    shutil.copytree(Path(__file__).parents[1] / "data" / "runs" / "clean", run)
    good = (run / "records.jsonl").read_text().splitlines()
    (run / "records.jsonl").write_text("\n".join([*good, deep, '{"a": ' * 100_000 + "1" + "}" * 100_000]) + "\n")
    (run / "events.jsonl").write_text(deep + "\n")
    assert len(read_json_lines(run / "records.jsonl")) == len(good)
    assert len(RunStore.open(run).records()) == len(good)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", str(run), "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert "internal error" not in done.stderr and "RecursionError" not in done.stderr, done.stderr
    assert done.returncode in (0, 3), done.stderr
    (run / "run.json").write_text(deep)
    with pytest.raises(StoreError, match=r"run\.json: not valid JSON"):
        RunStore.open(run)


def test_latest_is_the_run_made_last_even_after_the_clock_stepped_back(tmp_path: Path) -> None:
    """Issue 28, item 8: after a backward clock step the newer run has the older name; `latest`, `latest~1`,
    `ls` and `--resume latest` follow the order the runs were made in (their sequence), not their names."""
    from orchestrator.runs.runref import all_runs, resolve_run, runs_of

    root = tmp_path / "results"
    first = RunStore.create(root, "demo", {"name": "demo"}, PLAN, now=datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    other = RunStore.create(root, "other", {"name": "other"}, PLAN, now=datetime(2026, 12, 1, 12, 30, tzinfo=UTC))
    stepped = RunStore.create(root, "demo", {"name": "demo"}, PLAN, now=datetime(2026, 12, 1, 11, 0, tzinfo=UTC))
    assert stepped.path.name < first.path.name  # the clock stepped back: by name it would be the older run
    assert [first.info.sequence, other.info.sequence, stepped.info.sequence] == [1, 2, 3]
    assert find_latest(root, "demo") == stepped.path
    assert runs_of(root, "demo") == [first.path, stepped.path]
    assert all_runs(root) == [first.path, other.path, stepped.path]
    assert resolve_run("latest", root) == stepped.path
    assert resolve_run("demo/latest~1", root) == first.path
    # A run made before runs had a sequence sorts before every run that has one, by its name.
    old = root / "demo" / "20270101T000000Z-abcdef"
    old.mkdir()
    raw = json.loads((first.path / "run.json").read_text())
    raw.pop("sequence")
    (old / "run.json").write_text(json.dumps({**raw, "run_id": old.name}))
    assert runs_of(root, "demo") == [old, first.path, stepped.path]


def test_latest_refuses_when_the_newest_runs_run_json_cannot_be_read(tmp_path: Path) -> None:
    """An unreadable newest run.json must not make ``latest`` silently the older run (``--resume latest``
    would then continue a finished one)."""
    from datetime import UTC, datetime

    older = RunStore.create(tmp_path, "demo", {"name": "demo"}, {}, now=datetime(2026, 1, 1, tzinfo=UTC))
    older.release()
    newer = RunStore.create(tmp_path, "demo", {"name": "demo"}, {}, now=datetime(2026, 1, 2, tzinfo=UTC))
    newer.release()
    assert find_latest(tmp_path, "demo") == newer.path
    (newer.path / "run.json").write_text('{"schema_version": 1, "run_id": ')  # torn
    with pytest.raises(StoreError, match="cannot be read") as info:
        find_latest(tmp_path, "demo")
    assert str(newer.path) in str(info.value)


def test_records_share_their_equal_strings_and_identities_may_drop_the_figures(tmp_path: Path) -> None:
    """A run's records repeat the same keys and prose (every window's definitions): read once each, not once a
    record (recommend of 20,000 records above 1 GB: bench/RESULTS-scale.md); a reader of identities drops the
    figures of the records the store accepts, and the store accepts and skips the same lines either way."""
    import shutil

    run = shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "runs" / "sim-demo", tmp_path / "run")
    with (run / "records.jsonl").open("a", encoding="utf-8") as stream:
        stream.write('{"not": "a record"}\n')
    store = RunStore.open(run)
    records = store.records()
    first, second = [r.server for r in records if r.server and r.server.get("definitions")][:2]
    assert first["definitions"] == second["definitions"]
    shared = [k for k, text in first["definitions"].items() if text is second["definitions"][k]]
    assert shared == list(first["definitions"]), "equal definitions are one string"
    light = store.records(figures=False)
    assert [r.key for r in light] == [r.key for r in records] and len(store.skipped_lines) == 1
    assert all(r.client is None and r.server is None and r.intervals is None for r in light)
    assert [r.model_dump(exclude={"client", "server", "intervals", "telemetry", "cache_flush"}) for r in light] == [
        r.model_dump(exclude={"client", "server", "intervals", "telemetry", "cache_flush"}) for r in records
    ]
