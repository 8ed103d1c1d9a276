"""Logs as a terminal and a log shipper see them read as the plain log (orchestrator/engines/lines.py plain_log).

llama.cpp: a real capture (tests/data/llamacpp/draft-simple-k8.log, llama-server with time stamps and level
prefixes) rewritten line by line as the vendored tree's ``common_log_entry::print`` (common/log.cpp,
llama-cpp-python 0.3.36) writes the same entries with ``--log-colors on`` (the time in ``LOG_COL_BLUE``, ``I `` in
``LOG_COL_GREEN`` then ``LOG_COL_DEFAULT``; ``W ``/``E ``/``D `` coloured, their reset written after the message, so
at the start of the next line: common/log.h ``LOG_COL_*``) and with ``--log-jsonl`` (``{"type": "log", "time": us,
"level": level_str, "msg": ...}``). vLLM's coloured and JSON formatters are run in tests/contract/test_vllm_contract.py,
SGLang's lines through a JSON formatter in tests/contract/test_sglang_contract.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.engines.lines import plain_log
from orchestrator.metrics import parse_window

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "llamacpp" / "draft-simple-k8.log"
_PREFIX = re.compile(r"^(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) ([IWED]) (.*)$")
# common/log.h
BLUE, GREEN, MAGENTA, RED, YELLOW, DEFAULT = (f"\x1b[{n}m" for n in (34, 32, 35, 31, 33, 0))
_LEVEL = {
    "I": (GREEN, DEFAULT, "info"),
    "W": (MAGENTA, "", "warn"),
    "E": (RED, "", "error"),
    "D": (YELLOW, "", "debug"),
}


def _entries(text: str) -> list[tuple[int, str, str] | str]:
    """(microseconds, level letter, message) per prefixed line of the capture; other lines as they are."""
    out: list[tuple[int, str, str] | str] = []
    for line in text.splitlines():
        match = _PREFIX.match(line)
        if match is None:
            out.append(line)
            continue
        minutes, seconds, ms, us, level, message = match.groups()
        out.append(((((int(minutes) * 60 + int(seconds)) * 1000 + int(ms)) * 1000 + int(us)), level, message))
    return out


def coloured(text: str) -> str:
    """common_log_entry::print with colours on: the prefix, the message, and the reset after W/E/D messages."""
    out = []
    for entry in _entries(text):
        if isinstance(entry, str):
            out.append(entry + "\n")
            continue
        t, level, message = entry
        stamp = f"{t // 1000000 // 60}.{t // 1000000 % 60:02d}.{t // 1000 % 1000:03d}.{t % 1000:03d}"
        colour, after, _ = _LEVEL[level]
        tail = DEFAULT if level in "WED" else ""
        out.append(f"{BLUE}{stamp}{DEFAULT} {colour}{level} {after}{message}\n{tail}")
    return "".join(out)


def jsonl(text: str) -> str:
    """common_log_entry::print with --log-jsonl: one object per entry; a line without a prefix is a message of
    its own (level none)."""
    out = []
    for entry in _entries(text):
        if isinstance(entry, str):
            obj: dict[str, object] = {"type": "log", "time": 0, "level": "none", "msg": entry + "\n"}
        else:
            t, level, message = entry
            obj = {"type": "log", "time": t, "level": _LEVEL[level][2], "msg": message + "\n"}
        out.append(json.dumps(obj) + "\n")
    return "".join(out)


@pytest.mark.parametrize("form", [coloured, jsonl], ids=["colours", "jsonl"])
def test_llamacpp_coloured_and_jsonl_logs_read_as_the_plain_one(form: object) -> None:
    plain_text = CAPTURE.read_text()
    text = form(plain_text)  # type: ignore[operator]
    assert text != plain_text
    plain, read = parse_window("llamacpp", plain_text), parse_window("llamacpp", text)
    assert plain.accept_len is not None and plain.lines_matched > 0
    assert (read.lines_matched, read.lines_skipped) == (plain.lines_matched, plain.lines_skipped)
    assert [s.to_dict() for s in read.samples] == [s.to_dict() for s in plain.samples]
    assert (read.accept_len, read.acceptance_rate, read.gen_throughput) == (
        plain.accept_len,
        plain.acceptance_rate,
        plain.gen_throughput,
    )
    assert read.integrity.whole == plain.integrity.whole


def test_a_reset_code_at_the_start_of_a_line_is_gone() -> None:
    # A warning's reset lands before the next entry: the parsers see the line as the engine wrote its text.
    text = coloured("0.00.004.523 W srv  warn me\n0.20.675.490 I slot print_timing: id  3 | task 1 | x\n")
    assert plain_log(text).splitlines()[1] == "0.20.675.490 I slot print_timing: id  3 | task 1 | x"


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        pytest.param('{"message": "m", "levelname": "INFO", "asctime": "t"}', "INFO t m", id="python-json-logger"),
        pytest.param('{"type":"log","time":5,"level":"info","msg":"m\\n"}', "info 5 m", id="llama-jsonl"),
        pytest.param('{"log":"m\\n","stream":"stderr","time":"t"}', "t m", id="docker-json-file"),
        pytest.param('{"message": 5}', '{"message": 5}', id="not-a-text-message"),
        pytest.param('{"a": "message"}', '{"a": "message"}', id="no-message-key"),
        pytest.param('x {"message": "m"}', 'x {"message": "m"}', id="not-a-whole-line"),
    ],
)
def test_json_records_become_level_time_message(line: str, plain: str) -> None:
    assert plain_log(line + "\n") == plain + "\n"


def test_a_plain_log_is_returned_as_it_is() -> None:
    text = CAPTURE.read_text()
    assert plain_log(text) is text


def _vllm_engine(gen: float, stamp: str, form: str) -> str:
    """One vLLM engine line as its formatters write it (vllm/logger.py _FORMAT; ColoredFormatter's codes, checked
    against vLLM's own class in tests/contract/test_vllm_contract.py; the JSON formatter's record)."""
    message = (
        f"Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
        "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%"
    )
    if form == "json":
        record = {"asctime": f"2026-{stamp},123", "levelname": "INFO", "name": "vllm.v1.metrics.loggers"}
        return json.dumps({**record, "processName": "MainProcess", "process": 7, "message": message})
    return (
        "\x1b[0;36m(APIServer pid=7)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m"
        f"{stamp}\x1b[0m \x1b[90m[loggers.py:335]\x1b[0m {message}"
    )


@pytest.mark.parametrize("form", ["colour", "json"])
def test_vllm_rounds_only_the_time_stamps_count_are_counted_from_coloured_and_json_lines(form: str) -> None:
    # Every engine idle in round 1 (0.0 printed): rounds 2-3 are logged at DEBUG only; the stamps, 10 s apart,
    # say two rounds are missing before round 4 (tests/unit/test_window_weights.py, the plain form). Without
    # the stamps the window has no throughput (missing_intervals).
    stamps = ["05-30 00:00:00", "05-30 00:00:10", "05-30 00:00:40"]
    text = "\n".join(_vllm_engine(g, s, form) for g, s in zip((90.0, 0.0, 60.0), stamps, strict=True)) + "\n"
    wm = parse_window("vllm", text)
    assert wm.details["hidden_rounds"] == 2
    assert wm.gen_throughput == pytest.approx((90 + 0 + 0 + 0 + 60) / 5)
    assert wm.integrity.whole


def test_the_simulators_coloured_log_fault_writes_what_log_cpp_writes() -> None:
    from orchestrator.sim.dialects import dialect_class

    lines: list[str] = []
    log = dialect_class("llamacpp").coloured(lines.append)
    for line in CAPTURE.read_text().splitlines():
        log(line)
    got, want = "".join(line + "\n" for line in lines), coloured(CAPTURE.read_text())
    # A warning's reset is written before the next entry; after the last one it is still to come.
    assert got in (want, want.removesuffix("\x1b[0m"))
    assert "\x1b[32mI \x1b[0m" in got and "\x1b[35mW " in got
