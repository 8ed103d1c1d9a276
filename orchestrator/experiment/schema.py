"""Experiment files: the user's interface, validated before anything touches a host.

``load_experiment(path)`` reads YAML, validates it with pydantic models (``extra="forbid"``; a ``kind`` field
wherever there are alternatives), then checks what a schema cannot: every template placeholder resolves for
every variant, every matrix key and variant field is used somewhere, baselines name real variants, and the
matrix does not explode. Every problem becomes one ``ConfigError`` naming the file, line, column and key path,
with the nearest valid key suggested for a typo.

This module holds the top :class:`Experiment` model (with the small ``checks:`` and ``failure_policy:``
sections) and the loading; the sections are in ``hosts`` (host, hosts), ``launcherspecs`` (launcher: one
spec per kind), ``service`` (service, server, parsers, secrets), ``variants``, ``load`` (load, lossless,
telemetry) and ``search`` (objective, search), the cross-section checks in ``checks`` and the file:line:column
errors in ``validation``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from orchestrator.engines.registry import engine_names, get_engine
from orchestrator.errors import ConfigError
from orchestrator.experiment.advice import advice_warnings
from orchestrator.experiment.checks import _Problem, _read_secrets, _semantic_problems, log_file_problems
from orchestrator.experiment.common import _NAME, Scalar, _no_control, _Strict
from orchestrator.experiment.hosts import HostSpec, LocalHostSpec, SSHHostSpec, _host_shorthand
from orchestrator.experiment.inline import inline_secret_warnings
from orchestrator.experiment.kind import file_kind, wrong_kind_message
from orchestrator.experiment.launcherspecs import LauncherSpec
from orchestrator.experiment.load import LoadSpec, LosslessSpec, TelemetrySpec
from orchestrator.experiment.search import ObjectiveSpec, SearchSpec
from orchestrator.experiment.service import EXISTING_VARIANT, RegexParserSpec, ServerSpec, ServiceSpec
from orchestrator.experiment.slots import SLOT_FIELDS, SLOT_TOKENS, SlotsSpec, gpu_slots_enabled, slot_values
from orchestrator.experiment.validation import _doc_path, error_from_validation, problems_of, suggest, with_problems
from orchestrator.experiment.variants import Variant
from orchestrator.experiment.yamlsource import Positions, load_yaml_with_positions, locate

__all__ = [
    "BUILTIN_FIELDS",
    "ChecksSpec",
    "Experiment",
    "FailurePolicySpec",
    "load_experiment",
    "parse_experiment",
]

#: An experiment's ``engine:``: a name the engines' registry knows (``orchestrator/engines/registry.py``).
Engine = str

#: Placeholders every template may use besides vars, variant fields and matrix keys.
BUILTIN_FIELDS = {
    "python": "the controller's Python interpreter (for the local simulator demo)",
    "experiment": "the experiment's name",
    **SLOT_FIELDS,
}


class ChecksSpec(_Strict):
    """Tolerances of the consistency checks the analysis runs on every point, and the confidence level of
    every interval and of the significance of a winner (``confidence``). ``degraded_requests``: the share of a
    point's requests that may fail or be cancelled before the point is ``degraded`` (kept with its figures, left
    out of winners and ties unless ``rank_degraded``, and the sweep exits 3); default 0.10.
    ``lossless_tie_margin``: how close (nats) two of the autoregressive baseline's likeliest tokens are a near
    tie the lossless check lets speculation flip (default 0.25; 0 turns it off). ``machine_load``: the runnable
    tasks a CPU of the controller's machine (its 1-minute load average over its CPUs) above which a point is
    marked as measured on a busy machine (finding ``machine_load``; default 2; 0 turns it off).
    ``golden_python``: the engine's own Python, which predicts a self-drafted point's accept length from the
    model itself (``golden`` check)."""

    chain_tolerance: float = Field(0.10, ge=0)
    client_server_tolerance: float = Field(0.25, ge=0)
    speedup_slack: float = Field(1.10, ge=1)
    min_requests: int = Field(10, ge=0)
    linear_chain_length: int | None = Field(None, ge=1)
    disabled: list[str] = Field(default_factory=list)
    confidence: float = Field(0.95, gt=0.5, lt=1)
    degraded_requests: float = Field(0.10, ge=0, lt=1)
    rank_degraded: bool = False
    # Two of the baseline's likeliest tokens this close (nats) are a near tie the lossless check lets
    # speculation flip (orchestrator/analysis/lossless.py, TIE_MARGIN); 0: every flip before the baseline's
    # own divergence is lossy.
    lossless_tie_margin: float = Field(0.25, ge=0)
    # The engine's own Python (a shell word: sh expands it on this machine, as a service command's paths) that
    # runs the model to predict a self-drafted point's accept length (SGLang STANDALONE with the target as its
    # draft: orchestrator/engines/sglang/golden.py); None: no golden figures.
    golden_python: str | None = None
    # A point measured while the controller's machine had more than this many runnable tasks a CPU (its
    # 1-minute load average over its CPUs; orchestrator/sweep/machineload.py) is marked: finding machine_load.
    # 0 turns it off.
    machine_load: float = Field(2.0, ge=0)


class FailurePolicySpec(_Strict):
    """When a sweep stops instead of spending the ready timeout on every configuration.

    ``stop_on_baseline_failure``: a baseline that cannot start (its deployment never became healthy) stops
    the sweep, since nothing after it could be compared. ``max_consecutive_failed_deployments``: that many
    deployments in a row on one host that never became healthy stop the sweep (0: never). The hosts are
    restored and the run's state is ``stopped``.
    """

    max_consecutive_failed_deployments: int = Field(3, ge=0)
    stop_on_baseline_failure: bool = True


class Experiment(_Strict):
    """A validated experiment file."""

    name: str
    description: str | None = None
    host: HostSpec | None = None
    hosts: list[HostSpec] | None = None
    #: Where deployments run when it is not the hosts: a scheduler or a cluster, by its ``kind``
    #: (``experiment/launcherspecs/``: one spec per launcher).
    launcher: LauncherSpec | None = None
    service: ServiceSpec
    server: ServerSpec
    engine: Engine
    parsers: list[RegexParserSpec] = Field(default_factory=list)
    vars: dict[str, Scalar] = Field(default_factory=dict)
    variants: dict[str, Variant]
    baselines: list[str] = Field(default_factory=list)
    baselines_from: str | None = None
    #: Where run directories go, relative to the experiment file (``orchestrator/runs/runref.py`` has the rule).
    results_dir: str | None = None
    load: LoadSpec
    checks: ChecksSpec = Field(default_factory=ChecksSpec)
    failure_policy: FailurePolicySpec = Field(default_factory=FailurePolicySpec)
    #: GPUs per deployment (its tensor-parallel size) on hosts that declare ``gpus`` (GPU slots).
    gpus_per_deployment: int = Field(1, ge=1, le=64)
    #: How GPU slots measure baselines, find their ports and wait for clean GPUs (``experiment/slots.py``).
    slots: SlotsSpec = Field(default_factory=SlotsSpec)
    lossless: LosslessSpec = Field(default_factory=LosslessSpec)
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)
    #: What "best" means and how to find it without the whole grid (``orchestrator/search``).
    objective: ObjectiveSpec | None = None
    search: SearchSpec | None = None

    _source: Path | None = PrivateAttr(default=None)
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        names = list(engine_names())
        if value not in names:
            hint = suggest(value, names).removeprefix("; ")
            raise ValueError(
                f"{value!r} is no engine specsweep knows{'; ' + hint if hint.startswith('did') else ''} "
                f"(one of {', '.join(names)}, or one a package registers: docs/adding-an-engine.md)"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "host" in data:
            data["host"] = _host_shorthand(data["host"])
        if isinstance(data.get("hosts"), list):
            data["hosts"] = [_host_shorthand(h) for h in data["hosts"]]
        if isinstance(data.get("variants"), dict):
            data["variants"] = {k: ({} if v is None else v) for k, v in data["variants"].items()}
        if isinstance(data.get("baselines"), str):
            data["baselines"] = [data["baselines"]]
        service = data.get("service")
        if isinstance(service, dict) and service.get("kind") == "none":
            if "variants" not in data:
                data["variants"] = {EXISTING_VARIANT: {}}  # the server's own configuration, the only one
            server = data.get("server")
            if isinstance(server, dict) and "expected_load_time" not in server:
                data["server"] = {**server, "expected_load_time": 0}  # nothing loads: it already runs (the ETA)
        return data

    @field_validator("baselines_from")
    @classmethod
    def _baselines_from(cls, value: str | None) -> str | None:
        return _no_control(value, "a run directory path")

    @field_validator("results_dir")
    @classmethod
    def _results_dir(cls, value: str | None) -> str | None:
        return _no_control(value, "a results directory path")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"name must be letters, digits, '.', '_' or '-' (it names a folder), got {value!r}")
        return value

    @field_validator("variants")
    @classmethod
    def _variants(cls, value: dict[str, Variant]) -> dict[str, Variant]:
        if not value:
            raise ValueError("define at least one variant")
        for name in value:
            if not _NAME.fullmatch(str(name)):
                raise ValueError(f"variant name {name!r} must be letters, digits, '.', '_' or '-'")
        return value

    @property
    def source(self) -> Path | None:
        return self._source

    @property
    def warnings(self) -> list[str]:
        """What the file holds that works but should not be there (secrets written inline), one line each."""
        return list(self._warnings)

    @property
    def health_paths(self) -> list[str]:
        return self.server.health_paths or list(get_engine(self.engine).health_paths)

    def host_specs(self) -> list[SSHHostSpec | LocalHostSpec]:
        """Every host of the experiment, in file order (``host`` alone is a pool of one; none means local)."""
        if self.hosts:
            return list(self.hosts)
        return [self.host if self.host is not None else LocalHostSpec()]

    def server_url(self, host: SSHHostSpec | LocalHostSpec) -> str:
        """``server.url`` with ``{host}`` replaced by the host's address."""
        return self.server.url.replace("{host}", host.address)

    def builtin_values(self) -> dict[str, Scalar]:
        slots: dict[str, Scalar] = dict(SLOT_TOKENS) if self.gpu_slots else dict(slot_values(self.server.url))
        return {"python": sys.executable, "experiment": self.name, **slots}

    @property
    def launcher_kind(self) -> str:
        """The kind of launcher the deployments run on (``orchestrator/launchers/registry.py`` picks it by this):
        the ``launcher:`` section's kind, else ``gpu-slots`` when a host declares its GPUs, ``local`` for this
        machine alone, ``ssh`` for hosts."""
        if self.launcher is not None:
            return self.launcher.kind
        if self.gpu_slots:
            return "gpu-slots"
        specs = self.host_specs()
        return "local" if len(specs) == 1 and specs[0].kind == "local" else "ssh"

    @property
    def gpu_slots(self) -> bool:
        """Whether the hosts run GPU slots (a host declares ``gpus``: ``experiment/slots.py``)."""
        return gpu_slots_enabled(self)

    def deployment_gpus(self, variant_name: str) -> int:
        """How many GPUs one deployment of ``variant_name`` takes (its own size, else the experiment's)."""
        variant = self.variants.get(variant_name)
        own = getattr(variant, "gpus_per_deployment", None) if variant is not None else None
        return int(own) if own is not None else self.gpus_per_deployment

    def template_values(self, variant_name: str, params: dict[str, Scalar]) -> dict[str, Scalar]:
        """Everything a service template may use for one (variant, params)."""
        from orchestrator.templates import render

        base: dict[str, Scalar] = {**self.builtin_values(), **self.vars, **params}
        rendered = {k: render(v, base) for k, v in self.variants[variant_name].template_fields.items()}
        return {**base, **rendered}


def parse_experiment(data: Any, positions: Positions, file: str, *, read_secrets: bool = True) -> Experiment:
    """Validate already-parsed YAML data (positions locate errors in ``file``). ``read_secrets=False`` leaves
    the secrets unread (``specsweep restore`` undoes a run without needing them)."""
    if data is None:
        raise ConfigError(
            "the file is empty; an experiment needs name, service, server, engine, variants, load", file=file
        )
    if not isinstance(data, dict):
        raise ConfigError(f"an experiment is a mapping of keys, got a {type(data).__name__}", file=file, line=1)
    for key in data:
        if not isinstance(key, str):
            line, column = locate(positions, (key,))
            raise ConfigError(f"keys must be strings, got {key!r}", file=file, line=line, column=column)
    if file_kind(data) == "playbook":
        line, column = locate(positions, ("steps",))
        raise ConfigError(wrong_kind_message("playbook", file), file=file, line=line, column=column, key="steps")
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as exc:
        fields = error_from_validation(exc, data, positions, file, root=Experiment)
        # The checks across sections (variants, baselines, placeholders) too, on the file without the values
        # just refused: every error at once, not a second batch once the first is fixed.
        beyond = [_config_error(found, positions, file) for found in _problems_despite(exc, data, file)]
        raise (with_problems([*problems_of(fields), *beyond]) if beyond else fields) from None
    except (RecursionError, TypeError, OverflowError) as exc:
        raise ConfigError(f"cannot validate: {type(exc).__name__}: {exc}", file=file) from None
    # Every check of a validated file at once: a prompt set that does not exist beside a matrix key no template
    # uses (validate reported the third typo only once the first two were fixed).
    problems = _semantic_problems(exp) + log_file_problems(exp, file) + _workload_problems(exp, file)
    if not problems and read_secrets:
        try:
            _read_secrets(exp, data, Path(file).parent)
        except _Problem as unreadable:
            problems.append(unreadable)
    if problems:
        raise with_problems([_config_error(found, positions, file) for found in problems]) from None
    return exp


def _config_error(found: _Problem, positions: Positions, file: str) -> ConfigError:
    line, column = locate(positions, found.path)
    return ConfigError(found.message, file=file, line=line, column=column, key=".".join(str(p) for p in found.path))


def _workload_problems(exp: Experiment, file: str) -> list[_Problem]:
    """The prompt sets and workloads of ``exp`` that cannot be read (orchestrator/experiment/workloads.py)."""
    from orchestrator.experiment.workloads import check_workloads

    return [_Problem(path, message) for path, message in check_workloads(exp, Path(file).parent)]


def _problems_despite(exc: ValidationError, data: dict[str, Any], file: str) -> list[_Problem]:
    """The checks across sections of ``data`` with every value pydantic refused left out (a default stands in
    where there is one); none when a required key is missing or the rest does not validate, and none under a
    list that lost an element (its indexes moved)."""
    import copy

    pruned = copy.deepcopy(data)
    removed: list[tuple[Any, ...]] = []
    for error in exc.errors(include_url=False):
        if error["type"] == "missing":
            return []
        path = _doc_path(tuple(error["loc"]), data)
        if path and path not in removed:
            removed.append(path)
    # The deepest and the last elements of a list first, so each removal leaves the others' places as they were.
    for path in sorted(removed, key=lambda p: [(0, x, "") if isinstance(x, int) else (1, 0, str(x)) for x in p])[::-1]:
        node: Any = pruned
        for part in path[:-1]:
            node = node[part] if isinstance(node, dict | list) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
        elif isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
            del node[path[-1]]
    try:
        exp = Experiment.model_validate(pruned)
    except (ValidationError, RecursionError, TypeError, OverflowError):
        return []
    lists = {p[:-1] for p in removed if isinstance(p[-1], int)}
    return [
        found
        for found in _semantic_problems(exp) + _workload_problems(exp, file)
        if not any(tuple(found.path[: len(p)]) == p for p in [*removed, *lists])
    ]


def load_experiment(path: str | Path, *, read_secrets: bool = True) -> Experiment:
    """Read and validate an experiment file; every problem is a ``ConfigError`` naming file, line and key."""
    path = Path(path)
    data, positions = load_yaml_with_positions(path)
    exp = parse_experiment(data, positions, str(path), read_secrets=read_secrets)
    exp._source = path
    exp._warnings = inline_secret_warnings(data, positions, path) + advice_warnings(exp, positions, path)
    return exp
