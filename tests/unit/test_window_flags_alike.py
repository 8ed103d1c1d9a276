"""The same checks on a sweep's stored record as on ``specsweep parse``'s answer (issue 58, "Truth of the
numbers"): a DDTree line whose accepted depth exceeds its commit length is counted in both, a log of DDTree lines
only draws no "read none of the lines" warning, and a vLLM SpecDecoding line split in two says why the window has
no per-position figure instead of dropping it without a word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.cli.commands import parse
from orchestrator.metrics import parse_window
from orchestrator.metrics.engine_guess import engine_fit
from orchestrator.sweep.measure import server_metrics
from tests.unit.launch_fakes import make_experiment
from tests.unit.test_whole_windows import text, vllm_pair

# The field report's line (DOMAIN.md): DDTree budget=7 topk=1, depth 5 with commit 2.
DDTREE = (
    "[2026-05-30 00:40:{s:02d}] DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=2.00 "
    "avg_commit_len=2.00 avg_accepted_depth=5.00"
)
LOG = "\n".join(DDTREE.format(s=s) for s in range(24)) + "\n"


@pytest.fixture
def app() -> typer.Typer:
    application = typer.Typer()
    parse.register(application)

    @application.callback()
    def _root() -> None:
        """specsweep"""

    return application


def test_the_stored_record_counts_the_lines_parse_warns_of(app: typer.Typer, tmp_path: Path) -> None:
    log = tmp_path / "ddtree.log"
    log.write_text(LOG)
    done = CliRunner().invoke(app, ["parse", "--engine", "sglang", "--window", str(log), "--json"])
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    warned = [w for w in answer["warnings"] if w.startswith("depth_vs_commit:")]
    # every line the text holds, its edge line too (parse has always warned of each)
    assert len(warned) == 24
    assert not any("read none of the" in w for w in answer["warnings"])
    record = server_metrics(
        make_experiment(tmp_path),
        LOG,
        {"requests": 1000, "warmup_requests": 0},
        before=None,
        after=None,
        during=[],
        elapsed_s=1.0,
        version="0.5.23",
        settings={"decode_log_interval": 40},
    )
    details = record["details"]
    assert details["ddtree_lines_depth_above_commit"] == answer["details"]["ddtree_lines_depth_above_commit"] == 24
    assert "avg_accepted_depth=5.00 avg_commit_len=2.00" in details["ddtree_lines_depth_above_commit_examples"]
    assert "ddtree_lines_depth_above_commit" in record["definitions"]


def test_ddtree_lines_alone_are_a_server_metric_read() -> None:
    fit = engine_fit("sglang", LOG)
    assert fit.ddtree == 24 and not fit.silent and fit.describe() is None
    assert engine_fit("sglang", "nothing a parser reads\n").silent


def _split_log() -> str:
    lines = [*vllm_pair(1), *vllm_pair(11), *vllm_pair(21)]
    line = lines[3]
    at = line.index("Per-position")
    lines[3:4] = [line[:at], line[at:]]  # one SpecDecoding line written as two
    return text(lines)


def test_a_split_spec_line_says_why_the_window_has_no_per_position_figure(app: typer.Typer, tmp_path: Path) -> None:
    whole = parse_window("vllm", text([*vllm_pair(1), *vllm_pair(11), *vllm_pair(21)]))
    assert whole.details["per_position_acceptance"] is not None and whole.details["per_position_unread"] is None
    window = parse_window("vllm", _split_log())
    assert window.details["per_position_acceptance"] is None
    assert window.details["per_position_unread"].startswith("1 of 3 SpecDecoding line(s) carry no per-position")
    log = tmp_path / "split.log"
    log.write_text(_split_log())
    done = CliRunner().invoke(app, ["parse", "--engine", "vllm", str(log), "--json"])
    assert done.exit_code == 0, done.output
    assert any(w.startswith("per-position: 1 of 3") for w in json.loads(done.stdout)["warnings"])
