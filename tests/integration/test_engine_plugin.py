"""An engine from outside specsweep: a package of its own registers it (entry point group ``specsweep.engines``)
and the real CLI reads its lines, as docs/adding-an-engine.md says a user does it.

The package here is written to a temporary folder with a ``dist-info`` beside it (what ``pip install`` leaves),
found by ``importlib.metadata`` through ``PYTHONPATH``; nothing of it is in specsweep's source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.engines.base import Engine, EngineBase
from orchestrator.engines.registry import engine_names, get_engine, register_engine
from tests.timing import scaled

_PACKAGE = '''
"""A toy engine that prints ``TOYSPEC steps=S tokens=T`` lines."""
import re
from dataclasses import dataclass

from orchestrator.engines.base import EngineBase, WindowFigures
from orchestrator.engines.samples import ParseResult, UserSample

_LINE = re.compile(r"TOYSPEC steps=(\\d+) tokens=(\\d+)")


@dataclass(frozen=True)
class Toy(EngineBase):
    def parse_log(self, text):
        result = ParseResult()
        offset = 0
        for line in text.splitlines(keepends=True):
            match = _LINE.search(line)
            if match:
                groups = {"steps": int(match[1]), "tokens": int(match[2])}
                result.samples.append(UserSample(parser="toy", groups=groups))
                result.read(offset)
            elif "TOYSPEC" in line:
                result.skip(offset, line)
            offset += len(line)
        return result

    def aggregate(self, result, *, edges, version):
        steps = sum(s.groups["steps"] for s in result.samples)
        tokens = sum(s.groups["tokens"] for s in result.samples)
        figures = {"accept_len": tokens / steps if steps else None, "acceptance_rate": None,
                   "gen_throughput": None, "details": {"steps": steps, "tokens": tokens}}
        return WindowFigures(figures, {"accept_len": "toy: sum(tokens) / sum(steps)"}, intervals=False)


ENGINE = Toy(name="toyengine", summary="a toy engine", markers=("TOYSPEC",))
'''


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "toyengine_pkg").mkdir(parents=True)
    (root / "toyengine_pkg" / "__init__.py").write_text(textwrap.dedent(_PACKAGE))
    info = root / "toyengine_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyengine-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[specsweep.engines]\ntoyengine = toyengine_pkg:ENGINE\n")
    return root


def _cli(args: list[str], plugin: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=scaled(120),
    )


def test_parse_reads_a_log_with_an_engine_a_package_registers(plugin_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "toy.log"
    log.write_text("boot\nTOYSPEC steps=10 tokens=31\nnoise\nTOYSPEC steps=5 tokens=14\nTOYSPEC broken\n")
    done = _cli(["parse", "--engine", "toyengine", "--json", str(log)], plugin_path, tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["engine"] == "toyengine"
    assert out["accept_len"] == pytest.approx(45 / 15)
    assert out["lines_matched"] == 2 and out["lines_skipped"] == 1
    assert out["definitions"]["accept_len"] == "toy: sum(tokens) / sum(steps)"


def test_an_experiment_may_name_the_registered_engine(plugin_path: Path, tmp_path: Path) -> None:
    experiment = tmp_path / "toy.yaml"
    experiment.write_text(
        "name: toy\nservice: {kind: process, command: 'sleep 60'}\nserver: {url: 'http://127.0.0.1:18999'}\n"
        "engine: toyengine\nvariants: {autoregressive: {}}\nload: {concurrency: [1]}\n"
    )
    done = _cli(["validate", str(experiment)], plugin_path, tmp_path)
    assert done.returncode == 0, done.stderr
    typo = experiment.read_text().replace("engine: toyengine", "engine: toyengin")
    experiment.write_text(typo)
    done = _cli(["validate", str(experiment)], plugin_path, tmp_path)
    assert done.returncode == 2
    assert f"{experiment}:4:1" in done.stderr and "did you mean 'toyengine'?" in done.stderr


def test_the_cli_refuses_an_engine_nobody_registered(plugin_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "toy.log"
    log.write_text("TOYSPEC steps=1 tokens=2\n")
    done = _cli(["parse", "--engine", "nosuchengine", str(log)], plugin_path, tmp_path)
    assert done.returncode == 2
    assert "nosuchengine" in done.stderr and "toyengine" in done.stderr  # the choices include the plugin's


def test_register_engine_at_run_time_and_the_protocol() -> None:
    class Quiet(EngineBase):
        pass

    engine = Quiet(name="quiet-test-engine")
    assert isinstance(engine, Engine)
    assert "quiet-test-engine" not in engine_names()
    register_engine(engine)
    assert get_engine("quiet-test-engine") is engine
    assert "quiet-test-engine" in engine_names()
    assert get_engine("sim").family == "sglang"  # the built-ins stay first and unchanged


def test_a_new_engine_is_its_package_and_one_registry_line(
    plugin_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The throwaway package above and its one registry line (the entry point) reach every stage that reads an
    engine, with no other file of specsweep changed; as a built-in (its package under orchestrator/engines/, one
    line in ``BUILTIN``) the import contract covers it without an edit to pyproject.toml."""
    import grimp

    from orchestrator.engines import registry
    from orchestrator.experiment import load_experiment
    from orchestrator.metrics import parse_window
    from tests.importcontracts import EnginePackagesContract

    for name in ("_registered", "_loaded"):
        monkeypatch.setattr(registry, name, dict(getattr(registry, name)))
    monkeypatch.setattr(registry, "_found", None)  # the entry points are read again, with the package's
    monkeypatch.syspath_prepend(str(plugin_path))
    assert "toyengine" in engine_names()
    assert get_engine("toyengine").summary == "a toy engine"
    experiment = tmp_path / "toy.yaml"
    experiment.write_text(
        "name: toy\nservice: {kind: process, command: 'sleep 60'}\nserver: {url: 'http://127.0.0.1:18999'}\n"
        "engine: toyengine\nvariants: {autoregressive: {}}\nload: {concurrency: [1]}\n"
    )
    assert load_experiment(experiment).engine == "toyengine"
    window = parse_window("toyengine", "TOYSPEC steps=4 tokens=10\nnoise\n", [("n", r"noise")])
    assert window.accept_len == pytest.approx(2.5) and window.user["n"]["matches"] == 1

    # As a built-in: the package beside specsweep's own engines, one line in BUILTIN.
    package = tmp_path / "builtin" / "toyengine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(_PACKAGE))
    import orchestrator.engines

    monkeypatch.setattr(orchestrator.engines, "__path__", [*orchestrator.engines.__path__, str(package.parent)])
    monkeypatch.setattr(registry, "BUILTIN", {**registry.BUILTIN, "toyengine": "orchestrator.engines.toyengine:ENGINE"})
    monkeypatch.setattr(registry, "_found", {})
    registry._loaded.pop("toyengine")
    for module in ("toyengine_pkg", "orchestrator.engines.toyengine"):  # imported afresh, as they were after
        monkeypatch.setitem(sys.modules, module, None)
        monkeypatch.delitem(sys.modules, module)
    assert type(get_engine("toyengine")).__module__ == "orchestrator.engines.toyengine"
    assert "orchestrator.engines.toyengine" in registry.builtin_packages()
    contract = EnginePackagesContract("seam", {"root_packages": ["orchestrator"]}, {})
    graph = grimp.ImportGraph()
    for module in ["orchestrator", "orchestrator.metrics", "orchestrator.engines", *registry.builtin_packages()]:
        graph.add_module(module)
    assert contract.check(graph, verbose=False).kept
    graph.add_import(
        importer="orchestrator.metrics", imported="orchestrator.engines.toyengine", line_number=1, line_contents=""
    )
    assert not contract.check(graph, verbose=False).kept
