"""The simulator's dialects without a network: exposition text, log lines and response fields, each against
the engine's own format (the dialect modules cite the engine files; the llama.cpp captures in
tests/data/llamacpp are the real engine's output)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import ClassVar

import pytest

from orchestrator.sim.config import parse_args
from orchestrator.sim.dialects import Dialect, make_dialect
from orchestrator.sim.expo import Family, float_to_go_string, format_cpp_double, render
from orchestrator.sim.stats import Counts, ServerStats

DATA = Path(__file__).resolve().parent.parent / "data" / "llamacpp"

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def dialect(*argv: str) -> tuple[Dialect, list[str]]:
    lines: list[str] = []
    d = make_dialect(parse_args(["--profile", "tiny", *argv]), lines.append)
    cfg = d.config
    d.groups = [ServerStats(model=cfg.model, speculative=cfg.algorithm != "ar") for _ in range(cfg.schedulers)]
    d.drafted = d.draft_depth = cfg.draft_tokens if cfg.algorithm == "linear" else 0
    d.setup_groups()
    return d, lines


def check_exposition(text: str) -> dict[str, str]:
    """Strict Prometheus text checks; returns family -> type. Uses prometheus_client's parser if installed."""
    types: dict[str, str] = {}
    helps: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in ("counter", "gauge"), line
            assert name in helps, f"TYPE before HELP: {line}"
            types[name] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            name = match.group(1)
            assert name in types or name.removesuffix("_created") + "_total" in types, line
            float(match.group(3))
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return types
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, kind in types.items():
        base = name.removesuffix("_total") if kind == "counter" else name
        assert families[base].type == kind
    return types


def step(drafted: int, accepted: list[int]) -> Counts:
    """One decode step of ``len(accepted)`` requests, each committing ``accepted[i]`` drafts."""
    c = Counts(steps=1, request_steps=len(accepted), tokens=sum(accepted) + len(accepted))
    c.drafts, c.draft_tokens, c.accepted = len(accepted), drafted * len(accepted), sum(accepted)
    for a in accepted:
        c.count(a)
    return c


def test_float_formatting_is_prometheus_clients_and_cpps() -> None:
    assert float_to_go_string(7557572) == "7.557572e+06"
    assert float_to_go_string(12) == "12.0" and float_to_go_string(0.35) == "0.35"
    assert float_to_go_string(math.nan) == "NaN" and float_to_go_string(math.inf) == "+Inf"
    # llama-server's own /metrics (tests/data/llamacpp/*.metrics.after).
    assert [format_cpp_double(v) for v in (102.0, 2.03223, 159.494, 1.65116)] == [
        "102",
        "2.03223",
        "159.494",
        "1.65116",
    ]
    assert format_cpp_double(61) == "61"


def test_render_sorts_labels_and_adds_created_only_when_asked() -> None:
    fam = Family("x:c_total", "A counter.", "counter", created=5.0).add({"b": "2", "a": 'q"1'}, 3)
    text = render([fam, Family("x:empty", "No series.", "gauge")])
    assert text == '# HELP x:c_total A counter.\n# TYPE x:c_total counter\nx:c_total{a="q\\"1",b="2"} 3.0\n'
    assert 'x:c_created{a="q\\"1",b="2"} 5.0' in render([fam], created=True)


def test_sglang_metrics_names_labels_and_counting() -> None:
    d, lines = dialect("--algorithm", "linear", "--draft-tokens", "4", "--decode-log-interval", "2")
    before = d.metrics_text()
    assert "sglang:generation_tokens_total" not in before  # a series exists only once first incremented
    stats = d.groups[0]
    stats.running = 2
    d.decode_step(0, step(4, [4, 1]), 1.0)
    d.decode_step(0, step(4, [2, 0]), 2.0)
    (line,) = [x for x in lines if "Decode batch" in x]
    # accept len = tokens / verify steps = (7 + 4) / 4; accept rate = accepted / (steps x drafts) = 7 / 16
    assert line.endswith(
        "Decode batch, #running-req: 2, #token: 0, token usage: 0.00, accept len: 2.75, accept rate: 0.44, "
        f"cuda graph: True, gen throughput (token/s): {float(line.rsplit('(token/s): ', 1)[1].split(',')[0]):.2f}, "
        "#queue-req: 0"
    )
    assert re.match(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Decode batch", line)  # tp_size 1: no TP prefix

    class Req:
        log_metrics, streaming = True, False
        prompt_tokens, completion_tokens, spec_verify_ct = 10, 12, 4

    d.request_finished(Req(), 3.0)  # type: ignore[arg-type]
    text = d.metrics_text()
    types = check_exposition(text)
    assert types["sglang:spec_verify_calls_total"] == "counter"
    assert types["sglang:spec_accept_length"] == "gauge"
    assert 'sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="sim"} 12.0' in text
    assert 'sglang:spec_verify_calls_total{engine_type="unified",model_name="sim"} 4.0' in text
    assert (
        'sglang:spec_accept_length{engine_type="unified",model_name="sim",moe_ep_rank="0",pp_rank="0",tp_rank="0"} '
        "2.75" in text
    )
    for invented in ("spec_verify_steps_total", "spec_draft_tokens_total", "spec_accepted_tokens_total"):
        assert invented not in text


def test_sglang_dp_groups_have_their_own_prefix_and_labels() -> None:
    d, lines = dialect("--tp-size", "8", "--dp-size", "2", "--algorithm", "linear", "--decode-log-interval", "1")
    d.decode_step(0, step(16, [3]), 1.0)
    d.decode_step(1, step(16, [5]), 1.0)
    decode = [x for x in lines if "Decode batch" in x]
    assert [re.search(r"\] Decode", x) is not None for x in decode] == [True, True]
    assert " DP0 TP0] " in decode[0] and " DP1 TP4] " in decode[1]
    text = d.metrics_text()
    check_exposition(text)
    assert 'dp_rank="0"' in text and 'dp_rank="1",engine_type="unified"' in text and 'tp_rank="4"' in text


@pytest.mark.parametrize(
    ("version", "ending", "rate"),
    [
        pytest.param("0.5.23", ", #queue-req: 0", "accept rate: 0.44, ", id="0.5.23-drafts-only"),
        pytest.param("0.5.10", ", #queue-req: 0", "accept rate: 0.55, ", id="0.5.10-bonus-counted"),
        pytest.param("0.4.10", ", #queue-req: 0, ", None, id="0.4.10-no-rate"),
    ],
)
def test_sglang_versions(version: str, ending: str, rate: str | None) -> None:
    d, lines = dialect(
        "--engine-version", version, "--algorithm", "linear", "--draft-tokens", "4", "--decode-log-interval", "1"
    )
    d.decode_step(0, step(4, [4, 1, 2, 0]), 1.0)
    (line,) = lines
    assert line.endswith(ending)
    assert ("Decode batch. " in line) == (version == "0.4.10")
    if rate is None:
        assert "accept rate" not in line
    else:  # 0.5.10: (tokens incl. bonus) / (steps x num_draft_tokens) = 11 / 20; 0.5.11+: 7 / 16
        assert rate in line


def test_vllm_lines_are_vllms() -> None:
    d, lines = dialect("--engine", "vllm", "--algorithm", "linear", "--draft-tokens", "3")
    d.decode_step(0, step(3, [3, 1]), 0.5)
    d.decode_step(0, step(3, [0, 2]), 0.6)
    d.tick(d._engines[0].last_log + 2.0)  # type: ignore[attr-defined]
    engine, spec = lines
    assert re.fullmatch(
        r"\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[loggers\.py:335\] Engine 000: Avg prompt throughput: "
        r"0\.0 tokens/s, Avg generation throughput: 5\.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache "
        r"usage: 0\.0%, Prefix cache hit rate: 0\.0%",
        engine,
    )
    # accepted 6 of 12, drafts 4: mean 1 + 6/4; per position: >=1: 3, >=2: 2, >=3: 1 of 4 drafts
    assert re.fullmatch(
        r"\(APIServer pid=\d+\) INFO .* \[metrics\.py:120\] SpecDecoding metrics: Mean acceptance length: 2\.50, "
        r"Accepted throughput: \d+\.\d\d tokens/s, Drafted throughput: \d+\.\d\d tokens/s, Accepted: 6 tokens, "
        r"Drafted: 12 tokens, Per-position acceptance rate: 0\.750, 0\.500, 0\.250, Avg Draft acceptance rate: 50\.0%",
        spec,
    )
    text = d.metrics_text()
    types = check_exposition(text)
    assert types["vllm:spec_decode_num_drafts_total"] == "counter"
    assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name="sim"} 4.0' in text
    assert 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="sim",position="2"} 1.0' in text
    assert "vllm:spec_decode_num_drafts_created" in text  # single-process registry
    assert 'vllm:generation_tokens_total{engine="0",model_name="sim"} 10.0' in text
    lines.clear()
    d.tick(d._engines[0].last_log + 2.0)  # type: ignore[attr-defined]
    d.tick(d._engines[0].last_log + 2.0)  # type: ignore[attr-defined]
    assert len(lines) == 1 and "Engine 000" in lines[0]  # one more Engine line, then idle: logger.debug


@pytest.mark.parametrize(
    ("version", "pattern"),
    [
        ("0.10.2", r"INFO .* \[metrics\.py:96\] SpecDecoding metrics: Mean acceptance length: 2\.50, Accepted thr"),
        (
            "0.9.2",
            r"INFO .* \[metrics\.py:87\] SpecDecoding metrics: Draft acceptance rate: 50\.0%, Mean acceptance "
            r"length: 2\.50, Accepted: 6 tokens, Drafted: 12 tokens, Per-position acceptance rate: 0\.750, 0\.500",
        ),
        ("0.8.5.post1", r"INFO .* \[metrics\.py:82\] .*Mean acceptance length: 1\.50, "),  # no bonus in 0.8.5
        (
            "0.8.4",
            r"INFO .* \[metrics\.py:53\] SpecDecoding metrics: Draft acceptance rate: 50\.0%, Accepted: 6 "
            r"tokens, Drafted: 12 tokens",
        ),
    ],
)
def test_vllm_older_spec_lines(version: str, pattern: str) -> None:
    d, lines = dialect("--engine", "vllm", "--engine-version", version, "--algorithm", "linear", "--draft-tokens", "3")
    d.decode_step(0, step(3, [3, 1]), 0.5)
    d.decode_step(0, step(3, [0, 2]), 0.6)
    d.tick(d._engines[0].last_log + 2.0)  # type: ignore[attr-defined]
    assert not lines[1].startswith("(APIServer")
    assert re.match(pattern, lines[1]), lines[1]
    text = d.metrics_text()
    check_exposition(text)
    assert ("vllm:spec_decode_num_drafts_total" in text) == (version != "0.8.4")


def test_vllm_refuses_trees() -> None:
    from orchestrator.errors import ConfigError

    with pytest.raises(ConfigError, match="vllm dialect simulates ar, linear"):
        dialect("--engine", "vllm", "--algorithm", "ddtree")


def test_llamacpp_exposition_matches_the_real_servers() -> None:
    d, _ = dialect("--engine", "llamacpp", "--algorithm", "linear", "--draft-tokens", "16")
    ours = d.metrics_text()
    real = (DATA / "ngram-simple-n3-m16.metrics.after").read_text()

    def shape(text: str) -> list[str]:  # every line with its number replaced
        return [re.sub(r" [-+.\deE]+$", " N", line) for line in text.splitlines() if "per_pos" not in line]

    assert shape(ours) == shape(real)
    check_exposition(real)


def test_llamacpp_request_block_matches_the_capture() -> None:
    d, lines = dialect("--engine", "llamacpp", "--algorithm", "linear", "--draft-tokens", "16")

    class Req:
        extra: ClassVar[dict[str, object]] = {"slot": 3, "task": 1}
        prompt_tokens, completion_tokens = 13, 128
        spec_verify_ct, spec_accepted, spec_drafted, spec_hist = 20, 46, 123, [0] * 20
        admitted_at, first_token_at, finished_at, arrival = 0.0, 0.24612, 0.24612 + 11.589824, 0.0

    d.request_finished(Req(), 12.0)  # type: ignore[arg-type]
    ours = [re.sub(r"^\d+\.\d\d\.\d{3}\.\d{3} ", "", line) for line in lines]
    capture = (DATA / "ngram-simple-n3-m16.log").read_text().splitlines()
    real = [re.sub(r"^\d+\.\d\d\.\d{3}\.\d{3} ", "", line) for line in capture if "| task 1 |" in line]
    # The ``n_gen = ..., tg = ...`` progress line (printed at most every 3 s while generating) is not simulated.
    real = [line for line in real if ("print_timing" in line and "n_gen =" not in line) or "release" in line]
    # The same block, numbers aside (graphs reused counts this build's graph reuse; ours counts decode calls).
    assert [re.sub(r" *[\d.]+", " N", x) for x in ours] == [re.sub(r" *[\d.]+", " N", x) for x in real]
    assert ours[1] == real[1]  # "eval time = 11589.82 ms / 128 tokens (91.26 ms per token, 10.96 tokens per second)"
    assert ours[4].endswith("draft acceptance = 0.37398 (   46 accepted /   123 generated), mean len =  3.30")
