"""llama.cpp's own ``/metrics`` writer, compiled: the oracle of tests/contract/test_prometheus_windows_contract.py.

The code is taken as text out of the llama.cpp tree that scripts/get-llama-server.sh unpacks (the tree vendored
in the llama-cpp-python 0.3.36 sdist, ``llamacpp_timings.LLAMA_CPP``) and compiled into a small program:

- ``struct server_metrics`` (tools/server/server-common.h: the cumulative ``uint64_t`` counts and the buckets),
- ``struct metric_item`` (tools/server/server-task.h, inside ``server_task_result_metrics``: ``double value``),
- ``server_task_result_metrics::to_metrics`` (tools/server/server-task.cpp): the Prometheus text, every value
  streamed into a default ``std::stringstream``,

around a stand-in for ``server_task_result_metrics`` (its two immediate gauges, its ``metrics``) and for
``ggml_time_us`` (``server_metrics::init`` calls it; nothing here does).

Input: ``predicted draft_tokens accepted drafts positions count...``; output: what ``GET /metrics`` answers.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from tests.contract.llamacpp_timings import LLAMA_CPP

__all__ = ["compile_metrics", "metrics_text"]

_HARNESS = r"""
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

static int64_t ggml_time_us() { return 0; }

@SERVER_METRICS@

struct server_task_result_metrics {
    int n_processing_slots = 0;
    int n_tasks_deferred = 0;
    server_metrics metrics;
    @METRIC_ITEM@
    std::string to_metrics();
};

@TO_METRICS@

int main() {
    server_task_result_metrics res;
    unsigned long long predicted = 0, draft_tokens = 0, accepted = 0, drafts = 0, positions = 0;
    int read = std::scanf("%llu %llu %llu %llu %llu", &predicted, &draft_tokens, &accepted, &drafts, &positions);
    if (read != 5) return 2;
    res.metrics.predict.count = predicted;
    res.metrics.n_draft_tokens = draft_tokens;
    res.metrics.n_draft_accepted = accepted;
    res.metrics.n_draft_verif_steps = drafts;
    for (unsigned long long i = 0; i < positions; ++i) {
        unsigned long long n = 0;
        if (std::scanf("%llu", &n) != 1) return 2;
        res.metrics.n_accepted_per_pos.push_back(n);
    }
    std::fputs(res.to_metrics().c_str(), stdout);
    return 0;
}
"""


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i : text.index(end, i) + len(end)]


def harness_source(root: Path = LLAMA_CPP) -> str:
    server = root / "tools" / "server"
    common_h = (server / "server-common.h").read_text()
    task_h = (server / "server-task.h").read_text()
    task_cpp = (server / "server-task.cpp").read_text()
    return (
        _HARNESS.replace("@SERVER_METRICS@", _between(common_h, "struct server_metrics {", "\n};\n"))
        .replace("@METRIC_ITEM@", _between(task_h, "struct metric_item {", "};"))
        .replace("@TO_METRICS@", _between(task_cpp, "std::string server_task_result_metrics::to_metrics() {", "\n}\n"))
    )


def compile_metrics(work: Path, root: Path = LLAMA_CPP) -> Path:
    """Compile the program into ``work`` (once per source text) and return its path."""
    source = harness_source(root)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    binary = work / f"to-metrics-{digest}"
    if not binary.exists():
        path = work / f"to-metrics-{digest}.cpp"
        path.write_text(source)
        subprocess.run(["c++", "-std=c++17", "-O1", "-o", str(binary), str(path)], check=True, capture_output=True)
    return binary


def metrics_text(
    binary: Path, *, predicted: int, draft_tokens: int, accepted: int, drafts: int, per_position: list[int]
) -> str:
    """What llama-server's ``/metrics`` answers for these cumulative counts."""
    numbers = [predicted, draft_tokens, accepted, drafts, len(per_position), *per_position]
    done = subprocess.run(
        [str(binary)], input=" ".join(map(str, numbers)) + "\n", capture_output=True, text=True, check=True
    )
    return done.stdout
