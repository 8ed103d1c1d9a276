"""The engine's own account of itself: version and definition-relevant settings, from each engine's endpoint."""

from __future__ import annotations

import json

import pytest

from orchestrator.engines.info import engine_info_from, read_engine_info
from orchestrator.engines.registry import get_engine

# Shapes as the engines build them: SGLang's get_server_info spreads the server arguments and the scheduler
# info, then adds internal_states and version (python/sglang/srt/entrypoints/http_server.py); vLLM's /version
# is {"version": VLLM_VERSION} (vllm/entrypoints/openai/api_server.py); llama.cpp's /props carries
# build_info and default_generation_settings (tools/server/server.cpp).
SGLANG_BODY = {
    "model_path": "/models/Kimi-K2.6",
    "tp_size": 8,
    "dp_size": 1,
    "enable_dp_attention": False,
    "decode_log_interval": 40,
    "speculative_algorithm": "EAGLE",
    "speculative_num_draft_tokens": 16,
    "max_total_num_tokens": 123456,
    "internal_states": [{"avg_spec_accept_length": 3.1}],
    "version": "0.5.4",
}


@pytest.mark.parametrize(
    ("engine", "body", "version"),
    [
        pytest.param("sglang", SGLANG_BODY, "0.5.4", id="sglang"),
        pytest.param("vllm", {"version": "0.11.0"}, "0.11.0", id="vllm"),
        pytest.param("llamacpp", {"build_info": "b6000-abc1234", "total_slots": 4}, "b6000-abc1234", id="llamacpp"),
    ],
)
def test_version_from_each_engines_endpoint(engine: str, body: dict[str, object], version: str) -> None:
    path = get_engine(engine).info_paths[0]
    info = engine_info_from(engine, path, 200, json.dumps(body))
    assert info["version"] == version
    assert info["source"].startswith(f"GET {path} ")
    assert "error" not in info


def test_sglang_settings_kept_but_not_internal_states() -> None:
    info = engine_info_from("sglang", "/get_server_info", 200, json.dumps(SGLANG_BODY))
    assert info["settings"]["speculative_algorithm"] == "EAGLE"
    assert info["settings"]["tp_size"] == 8
    assert "internal_states" not in info["settings"]
    assert "max_total_num_tokens" not in info["settings"]


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        pytest.param(None, None, "no answer", id="down"),
        pytest.param(404, "Not Found", "HTTP 404", id="404"),
        pytest.param(200, "<html>", "the answer is not JSON", id="not-json"),
        pytest.param(200, "[1, 2]", "the answer is not a JSON object", id="list"),
        pytest.param(200, "{}", "no 'version' in the answer", id="no-version"),
    ],
)
def test_no_version_says_why(status: int | None, body: str | None, error: str) -> None:
    info = engine_info_from("vllm", "/version", status, body)
    assert info["version"] is None
    assert info["error"] == error


def test_read_engine_info_asks_the_engines_path() -> None:
    asked: list[str] = []

    def fetch(path: str) -> tuple[int | None, str | None]:
        asked.append(path)
        return 200, '{"version": "0.9.2"}'

    assert read_engine_info("vllm", fetch)["version"] == "0.9.2"
    assert asked == ["/version"]


def test_sglang_falls_back_to_the_deprecated_path() -> None:
    # SGLang 0.5.23 serves /server_info; earlier versions only /get_server_info.
    def fetch(path: str) -> tuple[int | None, str | None]:
        return (404, '{"detail":"Not Found"}') if path == "/server_info" else (200, json.dumps(SGLANG_BODY))

    info = read_engine_info("sglang", fetch)
    assert info["version"] == "0.5.4"
    assert info["source"] == "GET /get_server_info .version"
