"""Playbook files: an ordered list of steps with expectations, validated before anything touches a host.

A playbook borrows host, service, server and load settings from an experiment file and runs steps, each a
one-key mapping (or, for steps without settings, a bare word)::

    name: single-chain-check
    experiment: experiments/sim-chain.yaml     # relative to this file; `--experiment` overrides it
    allow_shell: false                         # `shell` steps are refused unless this is true
    vars: {}                                   # overrides of the experiment's vars
    steps:
      - deploy: {variant: ddtree, params: {budget: 7, topk: 1}}
      - load: {concurrency: 1, requests: 16}   # bare `load`: every load point of the experiment
      - measure: tree                          # names the last load's record
      - restore
      - expect: {metric: accept_len, of: tree, compare: equal, to: {of: linear}, tolerance: 10%}
      - expect: {check: depth_vs_commit, of: tree}
      - baselines                              # deploy and load each baseline of the experiment
      - doctor                                 # the doctor's checks of the host
      - smoke: {requests: 1}                   # requests to the server as it runs now (nothing deployed)
      - shell: {command: nvidia-smi}           # output kept in the run directory

Errors have the quality of experiment files' (file:line:column, key path, nearest valid key, exit 2): this
module reuses ``orchestrator.experiment.validation``'s error helpers with the playbook as the schema root. Checks that
need no experiment (step order, measurement names, check names, shell permission) run here; those that do
(variants, parameters) run in ``orchestrator.playbooks.resolve``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.errors import ConfigError
from orchestrator.experiment.durations import parse_duration
from orchestrator.experiment.kind import EXPERIMENT_KEYS, file_kind, wrong_kind_message
from orchestrator.experiment.validation import error_from_validation, suggest
from orchestrator.experiment.yamlsource import Positions, load_yaml_with_positions, locate

__all__ = [
    "COMPARISONS",
    "RECORD_ROOTS",
    "STEP_KINDS",
    "BaselinesStep",
    "DeploySpec",
    "DeployStep",
    "DoctorStep",
    "ExpectSpec",
    "ExpectStep",
    "LoadSpec",
    "LoadStep",
    "MeasureStep",
    "MetricRef",
    "Playbook",
    "RestoreStep",
    "ShellSpec",
    "ShellStep",
    "SmokeSpec",
    "SmokeStep",
    "Step",
    "load_playbook",
    "parse_playbook",
]

Scalar = str | int | float | bool
Duration = Annotated[float, BeforeValidator(parse_duration)]

#: Every step kind, in the order ``--help`` and error messages list them.
STEP_KINDS = ("deploy", "load", "measure", "expect", "restore", "baselines", "doctor", "smoke", "shell")
#: Steps that take no settings and may be written as a bare word.
_BARE_OK = ("load", "restore", "baselines", "doctor", "smoke")
COMPARISONS = ("equal", "at_most", "at_least")
#: What a dotted metric path may start with: the parts of a stored record.
RECORD_ROOTS = ("client", "server", "params", "error", "status", "variant", "concurrency", "rate", "host")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # always fullmatch: "$" accepts a trailing newline


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _tolerance(value: Any) -> Any:
    """``0.1`` or ``10%``: a relative tolerance."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip()[:-1]) / 100.0
        except ValueError:
            raise ValueError(f"expected a fraction like 0.1 or a percentage like 10%, got {value!r}") from None
    return value


Tolerance = Annotated[float, BeforeValidator(_tolerance), Field(ge=0, le=10)]


class DeploySpec(_Strict):
    """Apply one configuration of the experiment: a variant and values for its matrix keys."""

    variant: str = Field(min_length=1)
    params: dict[str, Scalar] = Field(default_factory=dict)


class LoadSpec(_Strict):
    """One load point (concurrency or rate), or with nothing set every load point of the experiment."""

    concurrency: int | None = Field(None, ge=1, le=100000)
    rate: float | None = Field(None, gt=0)
    requests: int | None = Field(None, ge=1)
    duration: Duration | None = None

    @model_validator(mode="after")
    def _one_mode(self) -> LoadSpec:
        if self.concurrency is not None and self.rate is not None:
            raise ValueError("set concurrency or rate, not both (one step is one load point)")
        if (self.requests is not None or self.duration is not None) and self.concurrency is None and self.rate is None:
            raise ValueError(
                "requests/duration need a concurrency or a rate (a bare load runs the experiment's points)"
            )
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be positive")
        return self

    @property
    def experiment_points(self) -> bool:
        """True when the step runs the experiment's own load points."""
        return self.concurrency is None and self.rate is None


class MetricRef(_Strict):
    """Another measurement's figure (``metric`` defaults to the expectation's own metric)."""

    of: str
    metric: str | None = None


class ExpectSpec(_Strict):
    """An assertion: a metric of a measurement against a number or another measurement, or a named
    consistency check of the analysis run over some measurements."""

    metric: str | None = None
    check: str | None = None
    of: str | list[str] | None = None
    compare: Literal["equal", "at_most", "at_least"] | None = None
    to: float | MetricRef | None = None
    tolerance: Tolerance = 0.0
    message: str | None = None

    @field_validator("to", mode="before")
    @classmethod
    def _to(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a number or {of: MEASUREMENT, metric: METRIC}")
        return value

    @model_validator(mode="after")
    def _shape(self) -> ExpectSpec:
        if (self.metric is None) == (self.check is None):
            raise ValueError(
                "set metric (compare a figure: metric, of, compare, to) or check (run a consistency check), not both"
                if self.metric is not None
                else "missing key 'metric' (compare a figure) or 'check' (run a consistency check by name)"
            )
        if self.metric is not None:
            missing = [k for k in ("of", "compare", "to") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"a metric expectation needs {', '.join(missing)} (metric, of, compare, to)")
            if not isinstance(self.of, str):
                raise ValueError("of names one measurement for a metric expectation")
        else:
            extra = [k for k in ("compare", "to") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"a check expectation takes no {', '.join(extra)} (only check, of, message)")
        return self

    @property
    def of_names(self) -> list[str]:
        if self.of is None:
            return []
        return [self.of] if isinstance(self.of, str) else list(self.of)


class ShellSpec(_Strict):
    """A command run on the host (through the host's sudo policy); its output is kept in the run directory."""

    command: str = Field(min_length=1)
    timeout: Duration = 60.0
    check: bool = True


class SmokeSpec(_Strict):
    requests: int = Field(1, ge=1, le=100)


def _none_to_empty(value: Any) -> Any:
    return {} if value is None else value


class DeployStep(_Strict):
    deploy: DeploySpec


class LoadStep(_Strict):
    load: Annotated[LoadSpec, BeforeValidator(_none_to_empty)] = Field(default_factory=LoadSpec)


class MeasureStep(_Strict):
    measure: str

    @field_validator("measure")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"a measurement name is letters, digits, '.', '_' or '-', got {value!r}")
        return value


class ExpectStep(_Strict):
    expect: ExpectSpec


class RestoreStep(_Strict):
    restore: None = None


class BaselinesStep(_Strict):
    baselines: None = None


class DoctorStep(_Strict):
    doctor: None = None


class SmokeStep(_Strict):
    smoke: Annotated[SmokeSpec, BeforeValidator(_none_to_empty)] = Field(default_factory=SmokeSpec)


class ShellStep(_Strict):
    shell: Annotated[ShellSpec, BeforeValidator(lambda v: {"command": v} if isinstance(v, str) else v)]


def _step_kind(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        return str(next(iter(value)))
    if isinstance(value, BaseModel):
        return next(iter(type(value).model_fields))
    return None


Step = Annotated[
    Annotated[DeployStep, Tag("deploy")]
    | Annotated[LoadStep, Tag("load")]
    | Annotated[MeasureStep, Tag("measure")]
    | Annotated[ExpectStep, Tag("expect")]
    | Annotated[RestoreStep, Tag("restore")]
    | Annotated[BaselinesStep, Tag("baselines")]
    | Annotated[DoctorStep, Tag("doctor")]
    | Annotated[SmokeStep, Tag("smoke")]
    | Annotated[ShellStep, Tag("shell")],
    Discriminator(_step_kind),
]


class Playbook(_Strict):
    """A validated playbook file."""

    name: str
    description: str | None = None
    experiment: str | None = None
    allow_shell: bool = False
    vars: dict[str, Scalar] = Field(default_factory=dict)
    steps: list[Step] = Field(min_length=1)

    _source: Path | None = PrivateAttr(default=None)
    _positions: Positions = PrivateAttr(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"name must be letters, digits, '.', '_' or '-' (it names a folder), got {value!r}")
        return value

    @property
    def source(self) -> Path | None:
        return self._source

    @property
    def positions(self) -> Positions:
        return self._positions

    def error(self, path: tuple[Any, ...], message: str) -> ConfigError:
        """A ``ConfigError`` located at ``path`` of this playbook's file."""
        line, column = locate(self._positions, path)
        return ConfigError(
            message,
            file=str(self._source) if self._source else None,
            line=line,
            column=column,
            key=".".join(str(p) for p in path) or None,
        )

    def experiment_path(self) -> Path | None:
        """The playbook's own experiment file, relative to the playbook's directory."""
        if self.experiment is None:
            return None
        path = Path(self.experiment).expanduser()
        if not path.is_absolute() and self._source is not None:
            path = self._source.parent / path
        return path


def step_kind(step: BaseModel) -> str:
    """``deploy``, ``load``, ...: the key of a parsed step."""
    return next(iter(type(step).model_fields))


# ---------------------------------------------------------------------------------------------- checks


class _Problem(Exception):
    def __init__(self, path: tuple[Any, ...], message: str) -> None:
        self.path = path
        self.message = message


def _check_shapes(data: dict[str, Any]) -> None:
    """Each step is a one-key mapping with a known key, or a bare word for a step without settings."""
    steps = data.get("steps")
    if not isinstance(steps, list):
        return  # pydantic reports the type
    for index, item in enumerate(steps):
        path: tuple[Any, ...] = ("steps", index)
        if isinstance(item, str):
            if item in _BARE_OK:
                steps[index] = {item: None}
                continue
            if item in STEP_KINDS:
                raise _Problem(path, f"step {item!r} needs settings (write `{item}: ...`)")
            raise _Problem(path, f"unknown step {item!r}" + suggest(item, list(STEP_KINDS)))
        if not isinstance(item, dict):
            raise _Problem(path, f"a step is a one-key mapping like `deploy: {{...}}`, got {type(item).__name__}")
        if len(item) != 1:
            keys = ", ".join(str(k) for k in item) or "nothing"
            raise _Problem(
                path,
                f"a step is a one-key mapping (one of {', '.join(STEP_KINDS)}), got {keys}: "
                "indent the step's settings under its key",
            )
        key = next(iter(item))
        if key not in STEP_KINDS:
            raise _Problem((*path, key), f"unknown step {key!r}" + suggest(str(key), list(STEP_KINDS)))


def _line(playbook: Playbook, index: int) -> str:
    line, _column = locate(playbook.positions, ("steps", index))
    return str(line) if line is not None else f"of steps.{index}"


def _check_steps(playbook: Playbook) -> None:
    """Order and names: what can be checked without the experiment."""
    from orchestrator.analysis.checks import CHECKS

    deployed = False  # a configuration is applied (a deploy since the last restore)
    last_load: int | None = None  # the index of the last load since the last deploy, if one point
    measured_loads: set[int] = set()
    names: dict[str, int] = {}
    for index, step in enumerate(playbook.steps):
        path: tuple[Any, ...] = ("steps", index)
        if isinstance(step, DeployStep):
            deployed, last_load = True, None
        elif isinstance(step, LoadStep):
            if not deployed:
                raise _Problem((*path, "load"), "load needs a deploy step before it (nothing is deployed here)")
            last_load = index
        elif isinstance(step, MeasureStep):
            if last_load is None:
                raise _Problem((*path, "measure"), "measure names the last load's point: put a load step before it")
            if last_load in measured_loads:
                raise _Problem((*path, "measure"), f"the load on line {_line(playbook, last_load)} is already measured")
            if step.measure in names:
                raise _Problem(
                    (*path, "measure"),
                    f"measurement {step.measure!r} is already defined on line {_line(playbook, names[step.measure])}",
                )
            names[step.measure] = index
            measured_loads.add(last_load)
        elif isinstance(step, RestoreStep | BaselinesStep):
            # `baselines` leaves its last baseline deployed, but its loads are not for `measure`.
            deployed, last_load = isinstance(step, BaselinesStep), None
        elif isinstance(step, ShellStep) and not playbook.allow_shell:
            raise _Problem(
                (*path, "shell"),
                "shell steps run commands on the host and are off by default: set `allow_shell: true` at the top "
                "of the playbook to allow them",
            )
        elif isinstance(step, ExpectStep):
            _check_expect(step.expect, (*path, "expect"), names, playbook, CHECKS)


def _check_expect(
    spec: ExpectSpec, path: tuple[Any, ...], names: dict[str, int], playbook: Playbook, checks: dict[str, Any]
) -> None:
    later = {
        s.measure: i for i, s in enumerate(playbook.steps) if isinstance(s, MeasureStep) and s.measure not in names
    }

    def known(name: str, where: tuple[Any, ...]) -> None:
        if name in names:
            return
        if name in later:
            raise _Problem(
                where, f"measurement {name!r} is measured only later, on line {_line(playbook, later[name])}"
            )
        raise _Problem(where, f"no measurement named {name!r} before this step" + suggest(name, list(names)))

    if spec.check is not None and spec.check not in checks:
        raise _Problem((*path, "check"), f"unknown check {spec.check!r}" + suggest(spec.check, list(checks)))
    if isinstance(spec.of, list):
        for position, name in enumerate(spec.of):
            known(name, (*path, "of", position))
    elif spec.of is not None:
        known(spec.of, (*path, "of"))
    if isinstance(spec.to, MetricRef):
        known(spec.to.of, (*path, "to", "of"))
    for where, metric in ((("metric",), spec.metric), (("to", "metric"), getattr(spec.to, "metric", None))):
        if metric is None:
            continue
        if not metric or any(not part for part in metric.split(".")):
            raise _Problem((*path, *where), f"not a metric name: {metric!r}")
        root = metric.split(".", 1)[0]
        if "." in metric and root not in RECORD_ROOTS:
            raise _Problem(
                (*path, *where),
                f"a dotted metric starts with a part of the record ({', '.join(RECORD_ROOTS)}), got {root!r}"
                + suggest(root, list(RECORD_ROOTS)).replace("valid keys", "valid parts"),
            )


# ---------------------------------------------------------------------------------------------- loading


def parse_playbook(data: Any, positions: Positions, file: str) -> Playbook:
    """Validate already-parsed YAML data (positions locate errors in ``file``)."""
    if data is None:
        raise ConfigError("the file is empty; a playbook needs name and steps", file=file)
    if not isinstance(data, dict):
        raise ConfigError(f"a playbook is a mapping of keys, got a {type(data).__name__}", file=file, line=1)
    if file_kind(data) == "experiment":
        key = next(k for k in EXPERIMENT_KEYS if k in data)
        line, column = locate(positions, (key,))
        raise ConfigError(wrong_kind_message("experiment", file), file=file, line=line, column=column, key=key)
    data = dict(data)
    if isinstance(data.get("steps"), list):
        data["steps"] = list(data["steps"])
    try:
        _check_shapes(data)
        playbook = Playbook.model_validate(data)
    except _Problem as problem:
        line, column = locate(positions, problem.path)
        raise ConfigError(
            problem.message, file=file, line=line, column=column, key=".".join(str(p) for p in problem.path)
        ) from None
    except ValidationError as exc:
        raise error_from_validation(exc, data, positions, file, root=Playbook) from None
    except (RecursionError, TypeError, OverflowError) as exc:
        raise ConfigError(f"cannot validate: {type(exc).__name__}: {exc}", file=file) from None
    playbook._source = Path(file)
    playbook._positions = positions
    try:
        _check_steps(playbook)
    except _Problem as problem:
        raise playbook.error(problem.path, problem.message) from None
    return playbook


def load_playbook(path: str | Path) -> Playbook:
    """Read and validate a playbook file; every problem is a ``ConfigError`` naming file, line and key."""
    path = Path(path)
    data, positions = load_yaml_with_positions(path)
    return parse_playbook(data, positions, str(path))
