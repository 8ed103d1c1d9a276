"""The package's import graph: every module imports on its own, and no two modules import each other.

A module that only imports after another one was imported first (a circle resolved by import order), or two
modules that need each other (even through a function-level import), make every change to one of them a change
to both. The graph is read from the source (module-level, function-level and ``TYPE_CHECKING`` imports alike);
a module importing its own package (``from orchestrator.metrics import sglang`` inside the package) is the
usual package shape, not a circle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m != name and m not in ancestors}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_two_modules_import_each_other() -> None:
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    circles = [" <-> ".join(f"{m} (imports {', '.join(sorted(graph[m] & set(c)))})" for m in c) for c in _cycles(graph)]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_runner_seam_is_layered() -> None:
    """Measuring a point, the launchers, the schedule and the policy know nothing of the sweep loop, of how a
    run is opened or of playbooks; the experiment model knows nothing of the plan."""
    known = _modules()
    below = [
        "orchestrator.sweep.measure",
        "orchestrator.metrics.scrape",
        "orchestrator.launchers",
        "orchestrator.launchers.base",
        "orchestrator.launchers.hosts",
        "orchestrator.sweep.schedule",
        "orchestrator.sweep.policy",
        "orchestrator.sweep.frame",
        "orchestrator.experiment.rendering",
        "orchestrator.runs.identity",
    ]
    above = {"orchestrator.sweep.runner", "orchestrator.sweep.opening", "orchestrator.playbooks.runner"}
    for name in below:
        assert not (_imports(name, known[name], known) & above), name
    assert not (
        _imports("orchestrator.experiment.schema", known["orchestrator.experiment.schema"], known)
        & {"orchestrator.plan.deployments"}
    )
    rendering = _imports("orchestrator.experiment.rendering", known["orchestrator.experiment.rendering"], known)
    assert not rendering & {"orchestrator.experiment.schema", "orchestrator.plan.deployments"}


_CHILD = r"""
import importlib, json, os, sys
for library in json.loads(sys.argv[2]):  # third-party libraries only: loaded once, shared by the children
    try:
        importlib.import_module(library)
    except Exception:
        pass
failures = {}
for name in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that has imported nothing of the package: the module must import on its own
        os.close(read)
        try:
            __import__(name)
            code, text = 0, b""
        except BaseException as exc:
            code, text = 1, f"{type(exc).__name__}: {exc}".encode()
        os.write(write, text)
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        text = fh.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if status:
        failures[name] = text or f"exit status {status}"
print(json.dumps(failures))
"""


def _third_party(known: dict[str, Path]) -> list[str]:
    roots: set[str] = set()
    for path in known.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                roots.add(node.module.split(".")[0])
    return sorted(r for r in roots if r != "orchestrator" and r not in sys.stdlib_module_names)


# The modules in shards, each its own test, so that pytest-xdist's workers share them (one interpreter walking
# every module in turn was the suite's slowest test: about 3 minutes on a busy machine).
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_module_imports_alone_in_a_fresh_interpreter(shard: int) -> None:
    known = _modules()
    names = sorted(known)[shard::SHARDS]
    assert names
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(names), json.dumps(_third_party(known))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stderr
    failures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not failures, failures
