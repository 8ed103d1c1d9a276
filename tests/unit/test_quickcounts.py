"""`ls` of a run without a current answer.json (issue 49, scale): its counts come from the records' identities
and statuses alone (``orchestrator/analysis/quickcounts.py``), not from an answer made per run (101 CPU s for a
listing at 19,800 points), and they are the answer's counts: last attempts, windows of one point combined,
degraded points, records outside the plan, and a line it cannot read surely falls back to the answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import answer as answer_module
from orchestrator.analysis.answer import answer
from orchestrator.analysis.quickcounts import quick_counts
from orchestrator.cli.app import main

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _run(tmp_path: Path, name: str = "sim-demo") -> Path:
    return shutil.copytree(RUNS / name, tmp_path / "results" / name / "20260101T000000Z-aaaaaa")


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines() if line]


def _append(run: Path, *records: dict[str, Any]) -> None:
    with (run / "records.jsonl").open("a", encoding="utf-8") as stream:
        for record in records:
            stream.write(json.dumps(record) + "\n")


@pytest.mark.parametrize("name", ["sim-demo", "field-report", "clean"])
def test_the_quick_counts_are_the_answers_counts(tmp_path: Path, name: str) -> None:
    run = _run(tmp_path, name)
    assert quick_counts(run) == answer(run).counts.to_dict()


def test_last_attempts_windows_degraded_and_records_outside_the_plan(tmp_path: Path) -> None:
    run = _run(tmp_path)
    first, second, third = _records(run)[1:4]
    # A later attempt of a point that failed: the point counts failed.
    _append(run, {**first, "status": "failed", "error": {"kind": "server_died", "message": "gone"}})
    # A point that lost 6 of its 16 requests: degraded (checks.degraded_requests 0.10).
    _append(run, {**second, "client": {**second["client"], "errors": 6, "completed": 10}})
    # A record of a point the plan does not hold: left out of every count.
    _append(run, {**third, "point_id": "p-not-planned", "status": "failed"})
    # A second window of an ok point (load.decide's round) that failed: a point of its own, failed.
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    plan["decide_point_ids"] = ["p-decide-1"]
    (run / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    _append(run, {**third, "point_id": "p-decide-1", "status": "failed", "error": {"kind": "timeout"}})
    made = answer(run).counts.to_dict()
    assert made["failed"] == 2 and made["degraded"] == 1  # the cases are the ones meant
    assert quick_counts(run) == made


def test_a_line_it_cannot_read_surely_gives_none_and_ls_makes_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    _append(run, {**_records(run)[0], "status": "finished"})  # not a status a record may have: the store skips it
    assert quick_counts(run) is None
    expected = answer(run).counts.to_dict()
    with pytest.raises(SystemExit) as exit_info:
        main(["ls", "--results", str(tmp_path / "results"), "--json"])
    assert exit_info.value.code in (0, None)
    (shown,) = json.loads(capsys.readouterr().out)["runs"]
    assert {k: shown[k] for k in ("planned", "ok", "degraded", "failed")} == {
        k: expected[k] for k in ("planned", "ok", "degraded", "failed")
    }


def test_ls_of_a_run_without_answer_json_makes_no_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(tmp_path)
    second = _records(run)[1]
    _append(run, {**second, "client": {**second["client"], "errors": 6, "completed": 10}})
    expected = answer(run).counts.to_dict()
    assert not (run / answer_module.ANSWER_FILE).exists()

    def refused(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("ls made the whole answer")

    monkeypatch.setattr(answer_module, "answer", refused)
    with pytest.raises(SystemExit) as exit_info:
        main(["ls", "--results", str(tmp_path / "results"), "--json"])
    assert exit_info.value.code in (0, None)
    (shown,) = json.loads(capsys.readouterr().out)["runs"]
    assert {k: shown[k] for k in ("planned", "ok", "degraded", "failed")} == {
        k: expected[k] for k in ("planned", "ok", "degraded", "failed")
    }
    assert expected["degraded"] == 1


def test_a_record_of_another_schema_is_not_counted_quickly(tmp_path: Path) -> None:
    from orchestrator.runs.record import RUN_SCHEMA_VERSION

    run = _run(tmp_path)
    assert quick_counts(run) is not None  # this schema's records are read
    assert all(r.get("schema_version", RUN_SCHEMA_VERSION) == RUN_SCHEMA_VERSION for r in _records(run))
    _append(run, {**_records(run)[0], "schema_version": RUN_SCHEMA_VERSION + 1})  # the store refuses the run
    assert quick_counts(run) is None


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [("client", "output_tokens", -40), ("client", "output_tok_s", 1e308), ("server", "accept_len", -1.5)],
)
def test_a_record_the_store_refuses_is_not_counted(tmp_path: Path, section: str, key: str, value: float) -> None:
    """A well-typed line whose figure no measurement gives (orchestrator/runs/plausible.py) is skipped by the
    store: a later attempt of an ok point that failed with such a figure leaves the point ok, in the quick
    counts as in the answer (before, the quick counts took it: one ok point fewer, one failed more)."""
    run = _run(tmp_path)
    first = _records(run)[1]
    assert first["status"] == "ok"
    refused = {**first, "status": "failed", section: {**(first[section] or {}), key: value}}
    _append(run, refused)
    made = answer(run).counts.to_dict()
    assert made["failed"] == 0  # the store skipped the line
    assert quick_counts(run) == made


def test_the_screen_lets_through_every_figure_the_store_could_refuse() -> None:
    """The quick reading asks the store only about lines its screen picks; every line of the sample runs passes
    it (so ls stays quick), and each kind of figure plausible.py refuses is picked."""
    from orchestrator.analysis.quickcounts import _may_be_refused
    from orchestrator.runs.plausible import impossible_figure

    for name in ("sim-demo", "field-report", "clean"):
        for line in (RUNS / name / "records.jsonl").read_bytes().splitlines():
            if line.strip():
                assert not _may_be_refused(line)
    base = _records(RUNS / "sim-demo")[1]
    for section, key, value in [
        ("client", "requests", -1),
        ("client", "duration_s", -0.5),
        ("server", "gen_throughput", 2e18),
        ("server", "lines_total", 10**19),
        ("client", "output_tok_s", 1.5e19),
        ("server", "accept_len", -2.0),
    ]:
        record = {**base, section: {**base[section], key: value}}
        assert impossible_figure({"client": record["client"], "server": record["server"]}) is not None
        for separators in ((", ", ": "), (",", ":"), (" ,\n", " :\t ")):
            assert _may_be_refused(json.dumps(record, separators=separators).encode()), (section, key, value)
    # Numbers a string holds, or a small exponent, or a float's long fraction, are not figures the store refuses.
    for text in (
        b'{"x": "3e5"}',
        b'{"h": "a1234567890123456789"}',
        b'{"a": 1.5e-05}',
        b'{"a": 1.5E-05}',
        b'{"a": 0.00013250000000000002}',
    ):
        assert not _may_be_refused(text), text
    for text in (
        b'{"a": [1, 1e20]}',
        b'{"a": [1, 1E20]}',
        b'{"a": 2e+18}',
        b'{"a": 2E+18}',
        b'{"a": 1.5E+019}',
        b'{"a": -12345678901234567890}',
        b'{"requests":\n -3}',
        b'{"\\u0072equests": -3}',
    ):
        assert _may_be_refused(text), text


def test_chunks_read_in_one_call_count_as_lines_read_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lines are decoded a chunk at a time when the chunk's screen passes; a chunk is split across the file
    # here (3 lines a chunk), and the counts are the answer's.
    from orchestrator.analysis import quickcounts

    monkeypatch.setattr(quickcounts, "_CHUNK_LINES", 3)
    monkeypatch.setattr(quickcounts, "_BLOCK_BYTES", 5000)  # blocks shorter than a line, and of several lines
    run = _run(tmp_path)
    assert quick_counts(run) == answer(run).counts.to_dict()
    # Two records on one line (a line the store cannot read): one call would decode both, the count of lines says
    # otherwise, and the line read alone is not read surely: no quick count.
    first, second = (json.dumps(r) for r in _records(run)[:2])
    with (run / "records.jsonl").open("a", encoding="utf-8") as stream:
        stream.write(first + second + "\n")
    assert quick_counts(run) is None


@pytest.mark.parametrize("block", [1, 700, 40_000])
def test_blocks_are_the_files_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    # The file is read in blocks cut after a newline: their lines are bounded_lines' lines, blank lines and a last
    # line without its newline included; a line longer than MAX_LINE is read as bounded_lines reads it.
    from orchestrator.analysis import quickcounts
    from orchestrator.files import bounded_lines

    path = tmp_path / "records.jsonl"
    path.write_bytes(b"a\n\n  \n" + b"x" * 2000 + b"\nbb\n\ncc")
    monkeypatch.setattr(quickcounts, "_BLOCK_BYTES", block)
    read = b"".join(quickcounts._blocks(path))
    assert read == path.read_bytes()
    assert [line for b in quickcounts._blocks(path) for line in b.splitlines(keepends=True)] == list(
        bounded_lines(path)
    )
    monkeypatch.setattr(quickcounts, "MAX_LINE", 1000)
    with pytest.raises(quickcounts._LongLine):
        list(quickcounts._blocks(path))


def test_a_line_longer_than_max_line_reads_the_file_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.analysis import quickcounts

    run = _run(tmp_path)
    monkeypatch.setattr(quickcounts, "MAX_LINE", 1000)  # every record line is longer: bounded_lines' reading
    assert quick_counts(run) == answer(run).counts.to_dict()


def test_the_typed_plan_counts_as_the_answers_rule(tmp_path: Path) -> None:
    """plan.json read as the few fields the counts need gives the planned points and ids of
    ``layout.planned_points`` and ``_planned_ids`` (the whole plan read), per target too; a plan of another
    shape is read whole."""
    from orchestrator.analysis import quickcounts
    from orchestrator.runs.layout import planned_points

    for name in ("sim-demo", "field-report", "clean"):
        run = _run(tmp_path / name, name)
        whole = json.loads((run / "plan.json").read_text(encoding="utf-8"))
        typed = quickcounts._read_plan(run)
        assert isinstance(typed, quickcounts._Plan)
        dep = str(whole["deployments"][0]["id"])
        for layout in ({}, {dep: ["gpu0", "gpu1"]}):
            assert quickcounts._plan_points(typed, layout) == planned_points(whole, layout)
        for kind in (None, "sweep", "search"):
            assert quickcounts._plan_ids(typed, kind) == quickcounts._planned_ids(whole, kind)
    run = _run(tmp_path / "odd")
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    plan["deployments"].append("not a deployment")
    (run / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    assert quickcounts._read_plan(run) == plan
    assert quick_counts(run) == answer(run).counts.to_dict()


def test_the_threshold_is_read_only_when_the_experiment_names_it(tmp_path: Path) -> None:
    from orchestrator.analysis import quickcounts

    (tmp_path / "experiment.yaml").write_text("name: x\nchecks: {degraded_requests: 0.25}\n", encoding="utf-8")
    assert quickcounts._threshold_of(tmp_path) == 0.25
    (tmp_path / "experiment.yaml").write_text('name: x\nchecks: {"degraded\\x5frequests": 0.3}\n', encoding="utf-8")
    assert quickcounts._threshold_of(tmp_path) == 0.3
    (tmp_path / "experiment.yaml").write_text("name: x\nchecks: {}\n", encoding="utf-8")
    assert quickcounts._threshold_of(tmp_path) == 0.10
    (tmp_path / "experiment.yaml").write_text("checks: {degraded_requests: 2}\n", encoding="utf-8")
    assert quickcounts._threshold_of(tmp_path) is None
