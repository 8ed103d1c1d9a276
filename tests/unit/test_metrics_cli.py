"""`specsweep parse`: the command over saved logs, text and JSON output, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.cli.commands import parse
from orchestrator.errors import MetricsError
from tests.timing import scaled

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"


@pytest.fixture
def app() -> typer.Typer:
    # Only this command: the test does not depend on the other commands' modules.
    application = typer.Typer()
    parse.register(application)

    @application.callback()
    def _root() -> None:
        """specsweep"""

    return application


def test_json_output(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["parse", "--engine", "sglang", str(DATA / "sglang_tp4_short_iso.log"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["engine"] == "sglang"
    assert (data["lines_matched"], data["lines_skipped"], data["lines_duplicate"]) == (3, 0, 9)
    assert data["accept_len"] == pytest.approx(3.5)  # an estimate within the bounds the lines allow:
    assert data["exactness"]["accept_len"]["kind"] == "bounded"
    # the printed 3.00 .. 4.00 (± 0.005) above, and below down to 1: without responses a saved SGLang log may count
    # drafts past a request's end, as a sweep without responses says (orchestrator/engines/sglang/overshoot.py)
    assert data["exactness"]["accept_len"]["bounds"] == pytest.approx([1.0, 4.005])
    assert len(data["samples"]) == 3
    assert data["samples"][0]["kind"] == "sglang_decode"


def test_stdin_and_user_regex(app: typer.Typer) -> None:
    text = (DATA / "sim_ddtree_cat.log").read_text()
    result = CliRunner().invoke(
        app, ["parse", "-e", "sim", "-", "--json", "-r", r"nodes=avg_actual_nodes=(?P<n>[\d.]+)"], input=text
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["avg_commit_len"], data["ddtree_lines"]) == (pytest.approx(10 / 3), 2)  # bs-weighted: (2 + 2*4) / 3
    assert data["user_parsers"]["nodes"]["groups"]["n"]["mean"] == 8.0


@pytest.mark.parametrize(
    ("engine", "name", "figure"),
    [
        ("sglang", "sglang_tp4_short_iso.log", "3.5"),
        ("vllm", "vllm_v1.log", "3.059"),
        ("llamacpp", "../llamacpp/ngram-simple-n3-m16.log", "5.614"),
    ],
)
def test_table_output(app: typer.Typer, engine: str, name: str, figure: str) -> None:
    result = CliRunner().invoke(app, ["parse", "--engine", engine, str(DATA / name)])
    assert result.exit_code == 0, result.output
    assert "accept_len" in result.stdout
    assert figure in result.stdout
    assert "samples" in result.stdout


def test_unknown_engine_is_a_usage_error(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["parse", "--engine", "tgi", str(DATA / "vllm_v1.log")])
    assert result.exit_code == 2
    assert "tgi" in result.output


def test_bad_regex_option_is_a_usage_error(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["parse", "-e", "sglang", str(DATA / "vllm_v1.log"), "-r", "no-equals-sign"])
    assert result.exit_code == 2


def test_missing_file_is_a_metrics_error(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["parse", "-e", "sglang", str(tmp_path / "absent.log")])
    assert isinstance(result.exception, MetricsError)
    assert "absent.log" in str(result.exception)


def test_real_cli_as_a_subprocess() -> None:
    log = str(DATA / "vllm_v1.log")
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "parse", "--engine", "vllm", log, "--json"],
        capture_output=True, text=True, timeout=scaled(120), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["accept_len"] == pytest.approx(1 + 350 / 170)


# Two scrapes of vLLM's spec-decode counters as prometheus_client writes them (names and labels from
# vllm/v1/spec_decode/metrics.py SpecDecodingProm; the contract tests check them against vLLM's own code).
_VLLM_BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 20.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
"""


def test_prometheus_pair(app: typer.Typer, tmp_path: Path) -> None:
    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    before.write_text(_VLLM_BEFORE)
    after.write_text(
        _VLLM_BEFORE.replace("} 10.0", "} 110.0")
        .replace("} 30.0", "} 330.0")
        .replace("} 20.0", "} 270.0")
        .replace("} 100.0", "} 460.0")
    )
    args = ["parse", "--engine", "vllm", "--prometheus", str(before), str(after), "--elapsed", "2", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["accept_len"] == pytest.approx(1 + 250 / 100)
    assert data["acceptance_rate"] == pytest.approx(250 / 300)
    assert data["gen_throughput"] == pytest.approx(360 / 2)
    assert data["details"]["drafts"] == pytest.approx(100)
    table = CliRunner().invoke(app, args[:-1])
    assert table.exit_code == 0 and "3.5" in table.stdout


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["parse", "--engine", "vllm"], id="neither"),
        pytest.param(["parse", "--engine", "vllm", "log.txt", "--prometheus", "a", "b"], id="both"),
    ],
)
def test_prometheus_or_log_not_both(app: typer.Typer, args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
