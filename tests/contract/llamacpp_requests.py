"""llama.cpp's per-request log lines around ``print_timings``, compiled: a request's launch, its timings, its release.

``llamacpp_timings.py`` compiles the statements that count a request's drafts and print its ``draft acceptance``
lines. This adds, taken as text from the same tree (tools/server/server-context.cpp, the llama-cpp-python 0.3.36
vendored copy):

- ``SLT_INF(slot, "processing task, is_child = %d\\n", slot.task->is_child());``, which
  ``launch_slot_with_task`` logs when a request takes a slot,
- ``SLT_INF(*this, "stop processing: n_tokens = %d, truncated = %d\\n", prompt.n_tokens(), truncated);``, which
  ``server_slot::release`` logs whenever a slot is freed: after ``print_timings`` when a request finishes, alone
  when it is cancelled in flight (``SERVER_TASK_TYPE_CANCEL`` calls ``slot.release()`` only),

each inside a function of the name llama.cpp gives it, so ``__func__`` (cut to 12 characters by ``SLT_INF``) is
llama.cpp's. Per request the input says whether its launch line is in the log (a saved log may begin after it) and
whether it finished (``print_timings`` then ``release``) or was cancelled (``release`` alone).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.contract.llamacpp_timings import LLAMA_CPP, harness_source

__all__ = ["Request", "compile_requests", "request_lines"]

_LAUNCH = 'SLT_INF(slot, "processing task, is_child = %d\\n", slot.task->is_child());'
_RELEASE = 'SLT_INF(*this, "stop processing: n_tokens = %d, truncated = %d\\n", prompt.n_tokens(), truncated);'

_METHODS = r"""
    struct prompt_t { int n_tokens() const { return 128; } } prompt;
    bool truncated = false;

    void launch_slot_with_task() {
        server_slot & slot = *this;
        @LAUNCH@
    }

    void release() {
        @RELEASE@
    }

    void print_timings() const {"""

_MAIN = r"""int main() {
    int trace = 0;
    size_t n_max = 0;
    int requests = 0;
    if (std::scanf("%d %zu %d", &trace, &n_max, &requests) != 3) return 2;
    g_trace = trace != 0;
    g_n_max = n_max;
    for (int r = 0; r < requests; ++r) {
        int slot_id = 0, task_id = 0, steps = 0, launch_logged = 0, finished = 0;
        if (std::scanf("%d %d %d %d %d", &slot_id, &task_id, &steps, &launch_logged, &finished) != 5) return 2;
        task_t task{task_id};
        server_slot slot;
        slot.id = slot_id;
        slot.task = &task;
        if (launch_logged) slot.launch_slot_with_task();
        for (int s = 0; s < steps; ++s) {
            size_t drafted = 0, accepted = 0;
            if (std::scanf("%zu %zu", &drafted, &accepted) != 2) return 2;
            slot.drafted(drafted);
            slot.verified(accepted);
        }
        if (finished) slot.print_timings();
        slot.release();
    }
    return 0;
}
"""


def _source(root: Path) -> str:
    context = (root / "tools" / "server" / "server-context.cpp").read_text()
    for statement in (_LAUNCH, _RELEASE):
        if statement not in context:
            raise RuntimeError(f"server-context.cpp: {statement!r} is not where it was")
    base = harness_source(root)
    child = "struct task_t { int id; bool is_child() const { return false; } };"
    base = base.replace("struct task_t { int id; };", child)
    base = base.replace(
        "    void print_timings() const {", _METHODS.replace("@LAUNCH@", _LAUNCH).replace("@RELEASE@", _RELEASE), 1
    )
    return base[: base.index("int main() {")] + _MAIN


def compile_requests(work: Path, root: Path = LLAMA_CPP) -> Path:
    """Compile the program into ``work`` (once per source text) and return its path."""
    source = _source(root)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    binary = work / f"requests-{digest}"
    if not binary.exists():
        path = work / f"requests-{digest}.cpp"
        path.write_text(source)
        subprocess.run(["c++", "-std=c++17", "-O1", "-o", str(binary), str(path)], check=True, capture_output=True)
    return binary


@dataclass(frozen=True)
class Request:
    """One request: each verify step's (drafted, accepted) tokens; whether the log holds its launch line, and
    whether it finished (False: cancelled in flight, released without print_timings)."""

    steps: list[tuple[int, int]]
    launch_logged: bool = True
    finished: bool = True


def request_lines(binary: Path, requests: list[Request], *, n_max: int, trace: bool = False) -> str:
    """What llama-server logs for these requests, one after another (task ids from 1, slots 0 to 3)."""
    parts = [f"{int(trace)} {n_max} {len(requests)}"]
    for task, req in enumerate(requests):
        parts.append(f"{task % 4} {task + 1} {len(req.steps)} {int(req.launch_logged)} {int(req.finished)}")
        parts.extend(f"{d} {a}" for d, a in req.steps)
    done = subprocess.run([str(binary)], input="\n".join(parts) + "\n", capture_output=True, text=True, check=True)
    return re.sub(r"\r", "", done.stdout)
