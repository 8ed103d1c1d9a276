"""llama.cpp's own per-request statistics code, compiled: the oracle of tests/contract/test_llamacpp_contract.py.

The code is taken as text out of the llama.cpp tree that scripts/get-llama-server.sh unpacks (the tree vendored
in the llama-cpp-python 0.3.36 sdist, ``$SPECSWEEP_CACHE/src/llama_cpp_python-0.3.36/vendor/llama.cpp``) and
compiled with the C++ compiler into a small program, around stand-ins for what it touches (a slot with its
``stats`` and ``n_accepted_per_pos``, the speculative object's ``common_speculative_n_max``):

- ``slot.stats.n_draft_tokens += draft.size();`` (tools/server/server-context.cpp ``update_slots``, where a
  slot's draft is made),
- the statements of ``update_slots`` that count one verified draft (from ``size_t n_accepted = ids.size() -
  1;`` to the ``n_accepted_per_pos[i]++`` loop: accepted drafts, verify steps, the per-position counts),
- ``server_slot::print_timings`` from ``const int32_t n_draft_total`` to the line before
  ``common_speculative_print_stats``: the ``draft acceptance = ...`` line and the ``acc per pos = (...)``
  line with their format strings,
- the ``SLT_INF`` / ``SLT_TRC`` macros (tools/server/server-common.h: the ``slot print_timing: id %2d | task
  %d | `` prefix) and ``string_format`` (common/common.cpp).

``LOG_INF`` and ``LOG_TRC`` print to stdout (llama-server's default log has neither time stamps nor level
prefixes, as the captures in tests/data/llamacpp/ show; ``acc per pos`` is printed at ``-lv 4`` only, so
``trace`` says whether to keep it).

Input, per request: the drafted and the accepted tokens of each verify step; output: what print_timings logs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["LLAMA_CPP", "compile_harness", "llama_cpp_tree", "print_timings"]

LLAMA_CPP = (
    Path(os.environ.get("SPECSWEEP_CACHE", Path.home() / ".cache" / "specsweep"))
    / "src"
    / "llama_cpp_python-0.3.36"
    / "vendor"
    / "llama.cpp"
)


def llama_cpp_tree() -> Path | str:
    """The llama.cpp tree, or why the tests that read it skip (the ``llamacpp_tree`` marker; scripts/test.sh
    unpacks it beside the running suite, tests/engine_setup.py)."""
    from tests.engine_setup import wait_for

    stage = wait_for("llama-source")
    if stage is not None and not stage.ok:
        return stage.reason
    if shutil.which("c++") is None:
        return "no C++ compiler (c++) to build the llama.cpp harness"
    if not all((LLAMA_CPP / "tools" / "server" / name).exists() for name in ("server-context.cpp", "server-task.cpp")):
        return f"the llama.cpp tree is not at {LLAMA_CPP}: run scripts/get-llama-server.sh --source"
    return LLAMA_CPP


_HARNESS = r"""
#include <cassert>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#define GGML_ASSERT(x) assert(x)
#define LOG_INF(...) std::printf(__VA_ARGS__)
#define LOG_TRC(...) do { if (g_trace) std::printf(__VA_ARGS__); } while (0)

static bool g_trace = false;
static size_t g_n_max = 0;

@MACROS@

@STRING_FORMAT@

struct common_speculative {};
static size_t common_speculative_n_max(const common_speculative *) { return g_n_max; }
struct spec_holder {
    common_speculative s;
    common_speculative * get() { return &s; }
};
struct task_t { int id; };
struct stats_t {
    uint64_t n_draft_tokens      = 0;
    uint64_t n_draft_accepted    = 0;
    uint64_t n_draft_verif_steps = 0;
    void update_gen_last() {}
};

struct server_slot {
    int id = 0;
    task_t * task = nullptr;
    stats_t stats;
    std::vector<uint64_t> n_accepted_per_pos;
    bool spec_is_replay = false;

    void drafted(size_t n) {
        server_slot & slot = *this;
        std::vector<int> draft(n);
        @DRAFTED@
    }

    void verified(size_t accepted) {
        server_slot & slot = *this;
        spec_holder spec;
        const std::vector<int> ids(accepted + 1);
        @VERIFIED@
    }

    void print_timings() const {
        @REPORT@
    }
};

int main() {
    int trace = 0;
    size_t n_max = 0;
    int requests = 0;
    if (std::scanf("%d %zu %d", &trace, &n_max, &requests) != 3) return 2;
    g_trace = trace != 0;
    g_n_max = n_max;
    for (int r = 0; r < requests; ++r) {
        int slot_id = 0, task_id = 0, steps = 0;
        if (std::scanf("%d %d %d", &slot_id, &task_id, &steps) != 3) return 2;
        task_t task{task_id};
        server_slot slot;
        slot.id = slot_id;
        slot.task = &task;
        for (int s = 0; s < steps; ++s) {
            size_t drafted = 0, accepted = 0;
            if (std::scanf("%zu %zu", &drafted, &accepted) != 2) return 2;
            slot.drafted(drafted);
            slot.verified(accepted);
        }
        slot.print_timings();
    }
    return 0;
}
"""


def _between(text: str, start: str, end: str, *, include_end: bool) -> str:
    i = text.index(start)
    j = text.index(end, i)
    return text[i : j + len(end)] if include_end else text[i:j]


def harness_source(root: Path = LLAMA_CPP) -> str:
    """The program: llama.cpp's own statements (module docstring) in the harness around them."""
    context = (root / "tools" / "server" / "server-context.cpp").read_text()
    common_h = (root / "tools" / "server" / "server-common.h").read_text()
    common_cpp = (root / "common" / "common.cpp").read_text()
    macros = "\n".join(
        line for line in common_h.splitlines() if line.startswith(("#define SLT_INF(", "#define SLT_TRC("))
    )
    if macros.count("#define") != 2:
        raise RuntimeError("server-common.h: no SLT_INF / SLT_TRC macros")
    string_format = _between(
        common_cpp, "std::string string_format(const char * fmt, ...) {", "\n}\n", include_end=True
    )
    drafted = "slot.stats.n_draft_tokens += draft.size();"
    if drafted not in context:
        raise RuntimeError("server-context.cpp: the drafted-token count is not where it was")
    verified = _between(context, "size_t n_accepted = ids.size() - 1;", "n_accepted_per_pos[i]++;", include_end=True)
    verified += "\n}"  # the loop's closing brace
    body = _between(context, "void print_timings() const {", "common_speculative_print_stats(spec);", include_end=False)
    report = body[body.index("const int32_t n_draft_total") :]
    return (
        _HARNESS.replace("@MACROS@", macros)
        .replace("@STRING_FORMAT@", string_format)
        .replace("@DRAFTED@", drafted)
        .replace("@VERIFIED@", verified)
        .replace("@REPORT@", report)
    )


def compile_harness(work: Path, root: Path = LLAMA_CPP) -> Path:
    """Compile the program into ``work`` (once per source text) and return its path."""
    source = harness_source(root)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    binary = work / f"print-timings-{digest}"
    if not binary.exists():
        path = work / f"print-timings-{digest}.cpp"
        path.write_text(source)
        subprocess.run(["c++", "-std=c++17", "-O1", "-o", str(binary), str(path)], check=True, capture_output=True)
    return binary


def print_timings(binary: Path, requests: list[list[tuple[int, int]]], *, n_max: int, trace: bool) -> str:
    """What print_timings logs for each request, given each verify step's (drafted, accepted) tokens."""
    parts = [f"{int(trace)} {n_max} {len(requests)}"]
    for task, steps in enumerate(requests):
        parts.append(f"{task % 4} {task + 1} {len(steps)}")
        parts.extend(f"{d} {a}" for d, a in steps)
    done = subprocess.run([str(binary)], input="\n".join(parts) + "\n", capture_output=True, text=True, check=True)
    return re.sub(r"\r", "", done.stdout)
