"""The engine seam: an engine is one package plus its registration, and nothing outside orchestrator/engines/
reaches an engine's package but through the registry (docs/architecture.md, "The engine seam").

import-linter keeps the same rule (the ``engine-packages`` contract of pyproject.toml, run by scripts/test.sh,
whose packages tests/importcontracts.py reads from the registry); this test holds the whole package to it too,
reading every import (module-level, function-level, ``TYPE_CHECKING``) and every module path written as a
string, the way a table of ``importlib`` targets hides an import from import-linter. The engine packages are
the registry's (``builtin_packages``, from ``BUILTIN``), written nowhere else.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.registry import BUILTIN, builtin_packages, get_engine
from orchestrator.engines.responses import ResponseFields, response_readers
from orchestrator.errors import ConfigError
from orchestrator.sim.config import parse_args
from orchestrator.sim.dialects import Dialect, dialect_class, make_dialect, spoken_engines

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"

#: The packages of the built-in engines, from the registry itself.
ENGINE_PACKAGES = builtin_packages()


def _references(path: Path) -> set[str]:
    """Every module a source file names: imports at any level, and strings that look like module paths."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("orchestrator."):
            found.add(node.value.partition(":")[0])
    return found


def _reaches(reference: str, package: str) -> bool:
    return reference == package or reference.startswith(package + ".")


def test_every_package_under_engines_is_a_registered_engine() -> None:
    """A folder under orchestrator/engines/ is an engine's package, so the seam's checks cover it; what every
    engine shares (DDTree's lines, a user's regexes, the sample types) is a module beside base.py instead."""
    folders = sorted(f"orchestrator.engines.{path.parent.name}" for path in (PACKAGE / "engines").glob("*/__init__.py"))
    assert folders == list(ENGINE_PACKAGES)
    assert ENGINE_PACKAGES  # the registry names some


def test_the_packages_come_from_the_registry_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.engines import registry

    table = {**BUILTIN, "toy": "orchestrator.engines.toy.engine:ENGINE", "toy2": "orchestrator.engines.toy:OTHER"}
    monkeypatch.setattr(registry, "BUILTIN", table)
    assert "orchestrator.engines.toy" in registry.builtin_packages()
    assert len(registry.builtin_packages()) == len(ENGINE_PACKAGES) + 1


def test_no_module_outside_the_engines_reaches_an_engine_package() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] == ("orchestrator", "engines"):
            continue
        for reference in sorted(_references(path)):
            if any(_reaches(reference, package) for package in ENGINE_PACKAGES):
                offenders.append(f"{relative}: {reference}")
    assert not offenders, "engine packages reached outside orchestrator/engines/:\n" + "\n".join(offenders)


def test_the_check_sees_an_import_and_a_hidden_table(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n"
        "    from orchestrator.engines.vllm.responses import FIELDS\n"
        "TABLE = {'sglang': 'orchestrator.engines.sglang.simdialect:SGLangDialect'}\n",
        encoding="utf-8",
    )
    found = _references(module)
    assert "orchestrator.engines.vllm.responses" in found
    assert "orchestrator.engines.sglang.simdialect" in found


def test_no_engine_package_reaches_another() -> None:
    offenders = []
    for package in ENGINE_PACKAGES:
        folder = ROOT / Path(*package.split("."))
        for path in sorted(folder.rglob("*.py")):
            for reference in sorted(_references(path)):
                others = [p for p in ENGINE_PACKAGES if p != package and _reaches(reference, p)]
                if others:
                    offenders.append(f"{path.relative_to(ROOT)}: {reference}")
    assert not offenders, "\n".join(offenders)


def test_each_engine_gives_its_response_fields() -> None:
    for name in BUILTIN:
        fields = get_engine(name).response_fields()
        assert isinstance(fields, ResponseFields), name
        assert fields.sources and fields.extensions, name


def test_the_response_readers_keep_their_order() -> None:
    """The readers the decoders and response_spec use: every engine's, in the registry's order (the figures
    of the first reader that finds some win), SGLang's meta_info last (it can sit beside an extension)."""
    readers = response_readers()
    assert list(readers.extensions) == ["sglext", "metrics", "timings"]
    assert [read.__qualname__ for read in readers.body_readers] == [
        "read_sglext",
        "read_metrics",
        "read_timings",
        "read_meta_info",
    ]
    assert sorted(readers.sources) == ["llamacpp:timings", "sglang:meta_info", "sglang:sglext", "vllm:metrics"]
    assert len(readers.meta_info) == 1 and len(readers.choices) == 1


def test_the_simulators_engines_are_the_engines_with_a_dialect() -> None:
    spoken = []
    for name in BUILTIN:
        engine = get_engine(name)
        dialect = engine.sim_dialect()
        if dialect is not None and engine.family == name:
            assert issubclass(dialect, Dialect)
            assert dialect.engine == name
            spoken.append(name)
    assert tuple(spoken) == spoken_engines() == ("sglang", "vllm", "llamacpp")
    assert get_engine("sim").sim_dialect() is dialect_class("sglang")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--engine", "vllm", "--dp-size", "2", "--tp-size", "2"],
            "--dp-size is simulated for the sglang dialect only",
            id="dp-size",
        ),
        pytest.param(
            ["--fault", "coloured-log"],
            "the coloured-log fault is the vllm and llamacpp dialects' (SGLang's logger has no colours)",
            id="coloured-log",
        ),
        pytest.param(
            ["--engine", "llamacpp", "--fault", "idle-debug-intervals"],
            "the idle-debug-intervals fault is the vllm dialect's (--engine vllm)",
            id="idle-debug",
        ),
        pytest.param(
            [
                "--engine",
                "vllm",
                "--speculative-config",
                '{"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 8, 2]]}',
            ],
            "num_speculative_tokens_per_batch_size is the vllm dialect's, on a chain "
            "(--engine vllm --algorithm linear)",
            id="schedule-off-a-chain",
        ),
    ],
)
def test_a_dialect_refuses_what_only_another_simulates(argv: list[str], message: str) -> None:
    config = parse_args(["--profile", "tiny", *argv])
    with pytest.raises(ConfigError) as caught:
        make_dialect(config, lambda line: None)
    assert str(caught.value) == message


def test_a_dialect_takes_what_it_simulates() -> None:
    for argv in (["--dp-size", "2", "--tp-size", "2"], ["--engine", "vllm", "--fault", "coloured-log"]):
        dialect = make_dialect(parse_args(["--profile", "tiny", *argv]), lambda line: None)
        assert dialect.engine == (argv[1] if argv[0] == "--engine" else "sglang")


def test_only_vllm_opens_its_port_after_loading() -> None:
    assert [engine for engine in spoken_engines() if dialect_class(engine).http_after_load] == ["vllm"]


def test_an_engine_from_outside_is_read_in_responses_once_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new engine is its package plus its registration: its response fields reach the load generator's
    decoders and the summary's rules with no change to specsweep."""
    import json
    from dataclasses import dataclass

    from orchestrator.engines import registry
    from orchestrator.engines.base import EngineBase
    from orchestrator.engines.responses import ResponseSource, SpecFigures, response_source
    from orchestrator.load.decoders import DECODERS
    from orchestrator.load.records import RequestRecord

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_generation", registry._generation)

    def read(value: object) -> tuple[SpecFigures | None, int | None]:
        steps = value.get("steps") if isinstance(value, dict) else None
        return (SpecFigures("seam:ext", verify_steps=steps, accepted_drafts=7), 5) if steps else (None, None)

    fields = ResponseFields(
        sources={"seam:ext": ResponseSource({"where": "seamext of a toy engine"})}, extensions={"seamext": read}
    )

    @dataclass(frozen=True)
    class Toy(EngineBase):
        def response_fields(self) -> ResponseFields:
            return fields

    assert response_source("seam:ext") is None
    registry.register_engine(Toy(name="seamtoy"))
    assert response_source("seam:ext") is fields.sources["seam:ext"]
    decoder = DECODERS["chat"](RequestRecord(index=0))
    chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}], "seamext": {"steps": 3}}
    decoder.on_event(json.dumps(chunk).encode(), 1.0)
    decoder.finish()
    assert decoder.record.spec == SpecFigures("seam:ext", verify_steps=3, accepted_drafts=7)
    assert decoder.record.input_tokens == 5
    monkeypatch.undo()
    assert response_source("seam:ext") is None  # gone with its registration


def test_the_shared_samples_module_holds_no_engines_sample_type() -> None:
    # Each engine's sample types live in its package (engines/<engine>/samples.py); the shared module keeps the
    # base, DDTree's (a drafter's lines any engine may print) and a user regex's.
    import orchestrator.engines.samples as shared
    from orchestrator.engines.llamacpp import samples as llamacpp
    from orchestrator.engines.sglang import samples as sglang
    from orchestrator.engines.vllm import samples as vllm

    engine_types = [n for n in dir(shared) if n.startswith(("Vllm", "Sglang", "Llama"))]
    assert engine_types == []
    for package in (llamacpp, sglang, vllm):
        own = [getattr(package, n) for n in package.__all__]
        assert own and all(issubclass(t, shared.Sample) for t in own), package.__name__


def _graph(imports: list[tuple[str, str]]) -> Any:
    """An import graph of ``imports`` alone, each module's parents and the engine packages present."""
    import grimp

    graph = grimp.ImportGraph()
    for importer, imported in [*imports, *((p, p) for p in ENGINE_PACKAGES)]:
        for module in (importer, imported):
            parts = module.split(".")
            for depth in range(1, len(parts) + 1):
                graph.add_module(".".join(parts[:depth]))
        if importer != imported:
            graph.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
    return graph


def test_the_import_contract_names_no_engine_package_itself() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "engine-packages"]
    assert contract["type"] == "engine_packages"
    assert not {"protected_modules", "allowed_importers"} & set(contract)
    assert "engine_packages: tests.importcontracts.EnginePackagesContract" in config["contract_types"]
    written = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert not [p for p in ENGINE_PACKAGES if f'"{p}"' in written]  # no hand-written list left to forget


def test_the_import_contract_keeps_every_module_out_of_every_engine_package() -> None:
    from tests.importcontracts import EnginePackagesContract

    contract = EnginePackagesContract("seam", {"root_packages": ["orchestrator"]}, {})
    assert sorted(e.expression for e in contract.protected_modules) == list(ENGINE_PACKAGES)
    sglang, vllm = "orchestrator.engines.sglang", "orchestrator.engines.vllm"
    kept = [
        (f"{sglang}.log", f"{sglang}.samples"),
        (f"{sglang}.log", "orchestrator.engines.lines"),
        ("orchestrator.metrics.window", "orchestrator.engines.registry"),
    ]
    assert contract.check(_graph(kept), verbose=False).kept
    for importer, imported in [
        ("orchestrator.metrics.window", f"{sglang}.log"),  # the rest of specsweep
        ("orchestrator.engines.registry", vllm),  # a shared module of the engines layer
        (f"{vllm}.log", f"{sglang}.samples"),  # another engine's package
    ]:
        check = contract.check(_graph([*kept, (importer, imported)]), verbose=False)
        assert not check.kept, (importer, imported)
    with pytest.raises(ValueError, match="come from the engine registry"):
        EnginePackagesContract("seam", {}, {"protected_modules": [sglang]})


def test_a_new_engines_starter_is_offered_by_init_from_its_package_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """``specsweep init``'s starter file comes from the engine (its ``starter(host)``): a registered engine with
    one is an ``--engine`` choice and its file carries its command, port and variants; one without is not."""
    from dataclasses import dataclass

    from orchestrator.engines import registry
    from orchestrator.engines.base import EngineBase
    from orchestrator.engines.starter import Starter
    from orchestrator.experiment.starter import starter_engines, starter_experiment

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_generation", registry._generation)

    @dataclass(frozen=True)
    class Toy(EngineBase):
        def starter(self, host: str) -> Starter:
            return Starter(
                title="A toy server.",
                name="toy-first",
                port=4321,
                unit="toy.service",
                command="toyserve --port 4321 {spec_args}",
                variants="engine: seamstarter\nvariants:\n  plain: {spec_args: ''}\n",
            )

    assert "seamstarter" not in starter_engines()
    registry.register_engine(Toy(name="seamstarter"))
    registry.register_engine(EngineBase(name="seambare"))
    assert "seamstarter" in starter_engines() and "seambare" not in starter_engines()
    ssh, local = starter_experiment("seamstarter", "ssh"), starter_experiment("seamstarter", "local")
    assert "name: toy-first" in ssh and 'url: "http://gpu-box:4321"' in ssh and 'url: "http://127.0.0.1:4321"' in local
    assert "unit: toy.service" in ssh and "kind: process" in local and "toyserve --port 4321" in local
    with pytest.raises(ValueError, match="engine must be one of"):
        starter_experiment("seambare", "ssh")


def test_a_new_engines_dialect_is_an_engine_the_simulator_speaks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's ``--engine`` choices come from the registry: a registered engine whose ``sim_dialect()`` is
    a dialect of its own name is one, with no list to edit; the ``sim`` engine (SGLang's dialect) is not."""
    from dataclasses import dataclass

    from orchestrator.engines import registry
    from orchestrator.engines.base import EngineBase

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_generation", registry._generation)

    class ToyDialect(dialect_class("sglang")):  # type: ignore[misc,valid-type]
        engine = "seamdialect"

    @dataclass(frozen=True)
    class Toy(EngineBase):
        def sim_dialect(self) -> type[Dialect]:
            return ToyDialect

    assert "seamdialect" not in spoken_engines()
    with pytest.raises(ConfigError, match="unknown engine 'seamdialect'; choose one of sglang, vllm, llamacpp"):
        make_dialect(parse_args(["--engine", "seamdialect"]), lambda line: None)
    registry.register_engine(Toy(name="seamdialect"))
    assert spoken_engines()[-1] == "seamdialect" and "sim" not in spoken_engines()
    assert parse_args(["--engine", "seamdialect"]).engine == "seamdialect"
    assert dialect_class("seamdialect") is ToyDialect
    assert (
        type(make_dialect(parse_args(["--engine", "seamdialect", "--profile", "tiny"]), lambda line: None))
        is ToyDialect
    )
