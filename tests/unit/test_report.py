"""Reports: every file built from a copied run directory with the network cut off, a self-contained and
escaped HTML page, figures that are drawn only when there is something to draw, and the two commands."""

from __future__ import annotations

import csv
import json
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from orchestrator.analysis import analyse
from orchestrator.analysis.answer import answer, answer_of
from orchestrator.cli.app import main
from orchestrator.errors import StoreError
from orchestrator.report import ReportResult, build_report, figures, report_blocks, tables
from orchestrator.report.render import to_html, to_markdown
from orchestrator.runs.store import Record, RunStore

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
PNG = b"\x89PNG\r\n\x1a\n"


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"the report tried to reach the network: {args}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> ReportResult:
    """The field-report run copied to a new place and reported once, with every network call refused."""
    run = shutil.copytree(RUNS / "field-report", tmp_path_factory.mktemp("copy") / "field-report")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse)
        patch.setattr(socket, "create_connection", _refuse)
        patch.setattr(socket, "getaddrinfo", _refuse)
        return build_report(run)


@pytest.fixture
def field_run(tmp_path: Path) -> Path:
    return shutil.copytree(RUNS / "field-report", tmp_path / "field-report")


def test_report_builds_from_a_copied_run_directory_without_network(built: ReportResult) -> None:
    run = built.directory
    written = {"report.html", "report.md", "summary.csv", "records.parquet", "checks.json", "answer.json"}
    assert set(built.files) == written
    expected = {
        "throughput_vs_concurrency",
        "accept_len_heatmap",
        "speedup_vs_ar",
        "speedup_vs_linear",
        "latency_percentiles",
        "pareto",
    }
    assert set(built.figures) == expected
    for path in built.figures.values():
        assert path.parent == run / "figures" and path.read_bytes().startswith(PNG)

    summary = pd.read_csv(run / "summary.csv")
    assert len(summary) == 44 and {"budget", "topk", "speedup_vs_ar", "accept_len"} <= set(summary.columns)
    frame = pd.read_parquet(run / "records.parquet")
    assert len(frame) == 44 and "ddtree_avg_accepted_depth" in frame.columns

    checks = json.loads((run / "checks.json").read_text())
    assert checks["schema_version"] == 1 and checks["run_id"] == "20260530T003000Z-f1e1d5"
    assert checks["counts"]["error"] == len([f for f in checks["findings"] if f["severity"] == "error"]) > 0
    assert checks["settings"]["chain_tolerance"] == 0.1
    assert checks["baselines"] == {"ar": "autoregressive", "linear": "linear"}


def test_html_is_self_contained_and_in_reading_order(built: ReportResult) -> None:
    page = built.files["report.html"].read_text()
    assert page.count("data:image/png;base64,") == len(built.figures)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page must not fetch anything"
    assert "<script" not in page
    order = [page.index(f"<h2>{title}</h2>") for title in ("Findings", "Winners", "Figures", "Tables", "Failed points")]
    assert order == sorted(order)
    assert "accepted depth 5.00 exceeds commit length 2.00" in page
    markdown = built.files["report.md"].read_text()
    assert "](figures/throughput_vs_concurrency.png)" in markdown
    assert markdown.index("## Findings") < markdown.index("## Winners") < markdown.index("## Failed points")
    assert "CUDA out of memory" in markdown  # the failed point's evidence


def test_clean_run_report_says_every_check_passed(tmp_path: Path) -> None:
    analysis = analyse(RUNS / "clean")
    markdown = to_markdown(report_blocks(answer_of(analysis), {}, tmp_path))
    assert "No errors or warnings: every check passed" in markdown
    assert "None: every point completed." in markdown
    assert "| C=128 | linear | 4,400.0 |" in markdown


def _record(variant: str, **fields: Any) -> Record:
    base: dict[str, Any] = {
        "run_id": "r",
        "experiment": "demo",
        "deployment_id": f"d-{variant}",
        "point_id": f"p-{variant}-{fields.get('rate') or fields.get('concurrency')}-{fields.get('host', 'h')}",
        "config_hash": "c",
        "host": "h",
        "variant": variant,
        "mode": "concurrency",
        "concurrency": 1,
        "status": "ok",
        "started_at": "t0",
        "finished_at": "t1",
        "baseline": variant == "autoregressive",
        "client": {"requests": 32, "output_tok_s": 100.0, "per_user_tok_s": 100.0},
    }
    base.update(fields)
    return Record(**base)


def test_untrusted_text_is_escaped(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo", "baselines": ["autoregressive"]}, {})
    store.append(_record("autoregressive"))
    store.append(
        _record(
            "evil",
            status="failed",
            client=None,
            error={"kind": "start_failed", "message": "<script>alert(1)</script>", "evidence": ["<img src=x>"]},
        )
    )
    page = to_html(report_blocks(answer(store.path), {}, store.path), title="<b>run</b>")
    assert "<title>&lt;b&gt;run&lt;/b&gt;</title>" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x>" not in page and "&lt;img src=x&gt;" in page


def test_the_accept_length_table_says_where_its_figures_come_from_and_how_exact(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo", "baselines": ["autoregressive"]}, {})
    store.append(_record("autoregressive"))
    bounded = {"accept_len": 3.5, "exactness": {"accept_len": {"kind": "bounded", "bounds": [3.0, 4.0]}}}
    exact = {"requests": 32, "output_tok_s": 180.0, "per_user_tok_s": 180.0}
    exact["spec"] = {"accept_len": 3.2, "exactness": {"accept_len": {"kind": "exact"}}}
    store.append(_record("linear", concurrency=1, server=bounded, client=exact))
    store.append(_record("linear", concurrency=2, server=bounded))
    store.release()
    analysis = analyse(store.path)
    assert tables.accept_sources_note(answer_of(analysis)) == "from client (exact) 1 point; server (bounded) 1 point"
    markdown = to_markdown(report_blocks(answer_of(analysis), {}, store.path))
    assert "Accept length (tokens per verify step, bonus included), from client (exact) 1 point" in markdown
    summary = tables.summary_table(analysis)
    linear = summary[summary["variant"] == "linear"].set_index("load")["accept_len_exactness"]
    assert linear.to_dict() == {1.0: "exact", 2.0: "bounded"}


def test_a_run_without_records_still_reports(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo", "baselines": ["autoregressive", "linear"]}, {})
    markdown = to_markdown(report_blocks(answer(store.path), {}, store.path))
    assert "The run has no records yet" in markdown and "every check passed" not in markdown
    store.append(
        _record("autoregressive", status="failed", client=None, error={"kind": "start_failed", "message": "boom"})
    )
    analysis = analyse(store.path)
    assert analysis.best.empty and analysis.pareto.empty
    markdown = to_markdown(report_blocks(answer_of(analysis), {}, store.path))
    assert "No successful point to rank." in markdown and "No table: no point completed." in markdown
    assert "point failed (start_failed): boom" in markdown


def test_figures_only_when_there_is_something_to_draw(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo", "baselines": ["autoregressive"]}, {})
    for rate, tok_s in ((1.0, 90.0), (4.0, 300.0)):
        store.append(
            _record(
                "autoregressive",
                mode="rate",
                concurrency=None,
                rate=rate,
                client={"requests": 32, "output_tok_s": tok_s, "per_user_tok_s": 80.0},
            )
        )
        store.append(
            _record(
                "eagle",
                mode="rate",
                concurrency=None,
                rate=rate,
                params={"k": 4},
                client={"requests": 32, "output_tok_s": tok_s * 1.5, "per_user_tok_s": 95.0},
                server={"engine": "vllm", "accept_len": 2.6},
            )
        )
    analysis = analyse(store.path)
    assert figures.accept_len_heatmap(analysis) is None  # no tree
    assert figures.speedup_heatmaps(analysis, against="linear") is None  # no linear baseline
    assert figures.throughput_vs_load(analysis, mode="concurrency") is None
    assert figures.throughput_vs_load(analysis, mode="rate") is not None
    result = build_report(store.path)
    assert set(result.figures) == {"throughput_vs_rate", "pareto"}  # no latencies, no trees recorded
    assert "rate=4/s" in result.files["report.md"].read_text()


def test_several_hosts_get_a_figure_each(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo", "baselines": ["autoregressive"]}, {})
    for host in ("gpu-a", "gpu-b"):
        for c in (1,):
            store.append(_record("autoregressive", host=host, concurrency=c))
            store.append(
                _record(
                    "ddtree",
                    host=host,
                    concurrency=c,
                    params={"budget": 7, "topk": 1},
                    deployment_id="d-tree",
                    point_id=f"p-tree-{c}-{host}",
                    server={"engine": "sglang", "accept_len": 3.0},
                )
            )
    result = build_report(store.path)
    assert {"throughput_vs_concurrency-gpu-a", "throughput_vs_concurrency-gpu-b"} <= set(result.figures)
    assert "host" in tables.winners_table(result.answer).columns


def test_grouped_findings_name_every_load(field_run: Path) -> None:
    groups = tables.group_findings(analyse(field_run).findings)
    bug = next(g for g in groups if g.check == "depth_vs_commit" and g.config == "ddtree(budget=7, topk=1)")
    assert bug.loads == ["C=1", "C=8", "C=32", "C=128"]
    assert bug.where == "ddtree(budget=7, topk=1) at C=1, C=8, C=32, C=128 on root@gpu-box"
    by_check = tables.findings_by_check(analyse(field_run).findings).set_index("check")
    assert by_check.loc["depth_vs_commit", "points"] == 35


def test_headline_names_the_winner_and_its_failed_checks(field_run: Path) -> None:
    lines = tables.headline(answer(field_run))
    assert lines[0].startswith("C=1: ddtree(budget=7, topk=1) is fastest at 109.7 tok/s (1.12× AR, 1.28× linear)")
    assert "fail checks: depth_vs_commit, topk1_vs_chain" in lines[0]
    assert lines[3].startswith("C=128: linear is fastest at 4400.0 tok/s (1.52× AR)")


# ---- the commands, through the real CLI entry point --------------------------------------------------


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), out, err


def _small_run(root: Path, *, commit_bug: bool) -> Path:
    """An AR baseline and one DDTree point, with or without the commit-path bug's figures."""
    store = RunStore.create(root, "demo", {"name": "demo", "baselines": ["autoregressive"]}, {})
    store.append(_record("autoregressive"))
    depth = 5.0 if commit_bug else 1.0
    store.append(
        _record(
            "ddtree",
            params={"budget": 7, "topk": 4},
            client={"requests": 32, "output_tok_s": 110.0, "per_user_tok_s": 110.0},
            server={"engine": "sglang", "accept_len": 2.0, "avg_commit_len": 2.0, "avg_accepted_depth": depth},
        )
    )
    return store.path


def test_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _small_run(tmp_path, commit_bug=True)
    code, out, _err = _run(["report", str(run), "--json", "--strict"], capsys)
    assert code == 1  # --strict: an error finding fails the command, after the report is written
    payload = json.loads(out)
    assert payload["counts"]["error"] == 1 and Path(payload["files"]["report.html"]).is_file()
    assert payload["findings"][0]["check"] == "depth_vs_commit"


def test_report_command_on_a_clean_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _small_run(tmp_path, commit_bug=False)
    code, out, _err = _run(["report", str(run), "--strict", "--out", str(tmp_path / "elsewhere")], capsys)
    assert code == 0 and "best configuration at each load" in out and "0 errors, 0 warnings" in out
    assert (tmp_path / "elsewhere" / "report.html").is_file() and not (run / "report.html").exists()
    code, out, _err = _run(["report", str(run), "-q"], capsys)
    assert code == 0 and out.strip() == str(run / "report.html")


def test_report_command_refuses_what_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(["report", str(tmp_path)], capsys)
    assert code == StoreError.exit_code and "not a run directory" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_compare_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = shutil.copytree(RUNS / "clean", tmp_path / "clean")
    field = shutil.copytree(RUNS / "field-report", tmp_path / "field")
    code, out, _err = _run(["compare", str(clean), str(field), "--json"], capsys)
    assert code == 0
    payload = json.loads(out)
    assert payload["run_a"] == "20260601T090000Z-c1ea45" and payload["run_b"] == "20260530T003000Z-f1e1d5"
    changed = [p for p in payload["points"] if p["changed"]]
    assert 0 < len(changed) < len(payload["points"]) == 44
    assert {f["check"] for f in payload["findings_new"]} >= {"depth_vs_commit", "topk1_vs_chain"}
    code, out, _err = _run(["compare", str(clean), str(field)], capsys)
    assert code == 0 and "[depth_vs_commit]" in out and "failed" in out


def test_summary_csv_writes_counts_and_parameters_as_whole_numbers() -> None:
    """A failed point has no request count and autoregressive no budget, so pandas held those columns as floats
    and summary.csv said ``12.0`` requests (issue 59, item 7): every count, parameter and concurrency is a whole
    number, a missing one an empty cell."""
    import dataclasses
    import io

    import numpy as np

    from orchestrator.analysis import analyse
    from orchestrator.report import tables

    analysis = analyse(Path(__file__).parents[1] / "data" / "runs" / "sim-demo")
    frame = analysis.frame.copy()
    frame.loc[frame.index[0], ["requests", "errors", "windows"]] = np.nan  # as a point that never started
    table = tables.summary_table(dataclasses.replace(analysis, frame=frame))
    text = io.StringIO()
    table.to_csv(text, index=False)
    rows = list(csv.DictReader(io.StringIO(text.getvalue())))
    assert (rows[0]["requests"], rows[0]["errors"], rows[0]["windows"]) == ("", "", "")
    for column in ("requests", "errors", "windows", "load", "budget", "topk"):
        cells = [row[column] for row in rows if row[column]]
        assert cells and all(cell.isdigit() for cell in cells), (column, cells)
    assert any(row["output_tok_s"] and "." in row["output_tok_s"] for row in rows)  # figures stay as they were
