"""Experiment files: the user's interface, validated before anything touches a host.

``load_experiment(path)`` reads YAML, validates it with pydantic models (``extra="forbid"``; a ``kind`` field
wherever there are alternatives), then checks what a schema cannot: every template placeholder resolves for
every variant, every matrix key and variant field is used somewhere, baselines name real variants, and the
matrix does not explode. Every problem becomes one ``ConfigError`` naming the file, line, column and key path,
with the nearest valid key suggested for a typo.
"""

from __future__ import annotations

import difflib
import math
import re
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.errors import ConfigError
from orchestrator.experiment.durations import parse_duration
from orchestrator.experiment.search import ObjectiveSpec, SearchSpec, search_problems
from orchestrator.experiment.templates import TemplateSyntaxError, fields
from orchestrator.experiment.yamlsource import Positions, load_yaml_with_positions, locate

__all__ = [
    "BUILTIN_FIELDS",
    "ChecksSpec",
    "ExistingServiceSpec",
    "Experiment",
    "FailurePolicySpec",
    "HostSpec",
    "LoadSpec",
    "LocalHostSpec",
    "LosslessSpec",
    "ProcessServiceSpec",
    "RegexParserSpec",
    "SSHHostSpec",
    "SecretSource",
    "ServerSpec",
    "ServiceSpec",
    "SlurmLauncherSpec",
    "SystemdServiceSpec",
    "TelemetrySpec",
    "UntilSpec",
    "Variant",
    "error_from_validation",
    "load_experiment",
    "parse_experiment",
    "problems_of",
    "suggest",
    "with_problems",
]

Duration = Annotated[float, BeforeValidator(parse_duration)]
Scalar = str | int | float | bool
Engine = Literal["sglang", "vllm", "llamacpp", "sim"]

#: Placeholders every template may use besides vars, variant fields and matrix keys.
BUILTIN_FIELDS = {
    "python": "the controller's Python interpreter (for the local simulator demo)",
    "experiment": "the experiment's name",
}
#: Placeholders resolved at run time, per host; only allowed where documented (server.url).
RUNTIME_FIELDS = {"host"}

MAX_DEPLOYMENTS = 2000
MAX_LOAD_POINTS = 20000

# Whole-string patterns, always used with fullmatch (``re.match`` with ``$`` accepts a trailing newline).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_UNIT = re.compile(r"[A-Za-z0-9:_.\\@-]{1,240}\.service")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?")
#: C0 and C1 controls, DEL and the Unicode line separators: never part of a path, URL, host or name.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _no_control(value: str | None, what: str) -> str | None:
    """``value`` unchanged, or a ValueError naming the control character a path, URL or name cannot hold."""
    if value is not None:
        hit = _CONTROL.search(value)
        if hit:
            raise ValueError(f"{what} cannot contain the control character {hit.group()!r}")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SSHHostSpec(_Strict):
    """A host reached over SSH: ``user@host[:port]`` or an alias from ~/.ssh/config."""

    kind: Literal["ssh"] = "ssh"
    ssh: str = Field(min_length=1)
    name: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    ssh_config: str | None = None
    connect_timeout: Duration = 10.0
    command_timeout: Duration = 60.0
    keepalive: Duration = 15.0
    sudo: Literal["auto", "always", "never"] = "auto"

    @field_validator("ssh")
    @classmethod
    def _target(cls, value: str) -> str:
        if any(ch.isspace() or not ch.isprintable() for ch in value) or value.startswith("-"):
            raise ValueError(f"not an ssh target (user@host[:port] or a ~/.ssh/config alias): {value!r}")
        return value

    @field_validator("name", "identity_file", "known_hosts", "ssh_config")
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        return _no_control(value, "a host name or path")

    @property
    def display_name(self) -> str:
        return self.name or self.ssh

    @property
    def address(self) -> str:
        """The host part of the target (for ``{host}`` in server.url)."""
        target = self.ssh.rsplit("@", 1)[-1]
        if target.startswith("["):
            return target[1:].split("]", 1)[0]
        return target.rsplit(":", 1)[0] if target.count(":") == 1 else target


class LocalHostSpec(_Strict):
    """This machine: commands run as local subprocesses (the local demo, a controller on the GPU host)."""

    kind: Literal["local"] = "local"
    name: str = "local"

    @field_validator("name")
    @classmethod
    def _plain(cls, value: str) -> str:
        return _no_control(value, "a host name") or value

    @property
    def display_name(self) -> str:
        return self.name

    @property
    def address(self) -> str:
        return "127.0.0.1"


HostSpec = Annotated[SSHHostSpec | LocalHostSpec, Field(discriminator="kind")]


#: sbatch options specsweep sets itself: the job's name, comment and output file are how it finds its jobs again.
_OWN_SBATCH_OPTIONS = {"--job-name", "--comment", "--output", "--error", "--open-mode", "--parsable", "--wrap"}
_OWN_SBATCH_OPTIONS |= {"--array", "--nodes", "-J", "-o", "-e", "-a", "-N"}
#: What Slurm accepts as a time limit (sbatch(1), --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_SLURM_TIME = re.compile(r"\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+|UNLIMITED|INFINITE")
#: A partition, account, QOS, GRES or constraint: one word of Slurm's (no spaces, quotes or shell syntax).
_SLURM_WORD = re.compile(r"[A-Za-z0-9_.:,=+*!&|()\[\]/@%-]{1,200}")


class SlurmLauncherSpec(_Strict):
    """Each deployment as one Slurm job (``orchestrator/launchers/slurm.py``): a batch script submitted with
    ``sbatch`` on the login node (``login``: an SSH host, or ``local`` when specsweep runs there), its server
    on the node Slurm picks (``{node}`` in server.url), its output file (under ``shared_dir``, a directory
    the login node and the compute nodes share) the log window. ``max_jobs`` deployments run at once;
    ``pending_timeout``: a job still pending after that long fails its deployment (status, not a hang)."""

    kind: Literal["slurm"] = "slurm"
    login: HostSpec = Field(default_factory=LocalHostSpec)
    partition: str | None = None
    gres: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    max_jobs: int = Field(1, ge=1, le=256)
    extra_args: list[str] = Field(default_factory=list)
    shared_dir: str = "~/.local/state/specsweep/slurm"
    pending_timeout: Duration = 3600.0
    poll_interval: Duration = 1.0

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "login" in data:
                data["login"] = _host_shorthand(data["login"])
            if isinstance(data.get("extra_args"), str):
                import shlex

                try:
                    data["extra_args"] = shlex.split(data["extra_args"])
                except ValueError as exc:
                    raise ValueError(f"extra_args: {exc}") from None
        return data

    @field_validator("partition", "gres", "account", "qos", "constraint")
    @classmethod
    def _word(cls, value: str | None) -> str | None:
        if value is not None and not _SLURM_WORD.fullmatch(value):
            raise ValueError(f"expected one Slurm word (no spaces, quotes or control characters), got {value!r}")
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not _SLURM_TIME.fullmatch(str(value)):
            raise ValueError(
                f"a Slurm time limit is minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, got {value!r}"
            )
        return value

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, value: list[str]) -> list[str]:
        for arg in value:
            _no_control(arg, "an sbatch option")
            if not arg.startswith("-"):
                raise ValueError(f"each of extra_args is one sbatch option (--name=value), got {arg!r}")
            name = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]
            if name in _OWN_SBATCH_OPTIONS:
                raise ValueError(f"{name} is set by specsweep (it names its jobs and finds them again by it)")
        return value

    @field_validator("shared_dir")
    @classmethod
    def _dir(cls, value: str) -> str:
        _no_control(value, "a path")
        if not (value.startswith("/") or value == "~" or value.startswith("~/")) or any(c.isspace() for c in value):
            raise ValueError(f"shared_dir is an absolute path or starts with ~/ (no spaces), got {value!r}")
        return value.rstrip("/") or "/"

    @field_validator("poll_interval", "pending_timeout")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value

    @property
    def target(self) -> str:
        """The name the records of this launcher carry (their ``host``): one target per partition."""
        return f"slurm-{self.partition or 'default'}"


LauncherSpec = Annotated[SlurmLauncherSpec, Field(discriminator="kind")]


#: The longest secret value read (an API key or a token is far shorter; a whole file read by mistake is not).
MAX_SECRET_BYTES = 65536


class SecretSource(_Strict):
    """A secret, named where it is and read on the controller, never written into the experiment:
    ``{secret_env: NAME}`` (a variable of the controller's environment) or ``{secret_file: PATH}`` (a file's
    content, its trailing newline dropped; ``~`` and paths relative to the experiment file resolve as for
    prompts).

    Only the reference is kept in the resolved experiment (``experiment.yaml``) and the plan. The value is read
    by :func:`load_experiment` (so ``validate`` refuses a secret that cannot be read, with the reference, never
    the value) into a :class:`~pydantic.SecretStr`, and reaches the server alone: see
    :mod:`orchestrator.services.secrets`.
    """

    secret_env: str | None = None
    secret_file: str | None = None

    _value: SecretStr | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_source(self) -> SecretSource:
        if (self.secret_env is None) == (self.secret_file is None):
            raise ValueError("a secret is either {secret_env: NAME} or {secret_file: PATH}")
        if self.secret_env is not None and not _ENV_NAME.fullmatch(self.secret_env):
            raise ValueError(
                f"secret_env must name an environment variable ([A-Za-z_][A-Za-z0-9_]*), got {self.secret_env!r}"
            )
        _no_control(self.secret_file, "a secret file path")
        return self

    def describe(self) -> str:
        """Where the value comes from, for plans, messages and identities (never the value)."""
        return f"${self.secret_env}" if self.secret_env is not None else f"file {self.secret_file}"

    @property
    def value(self) -> SecretStr | None:
        """The value once read (:meth:`read`), else None."""
        return self._value

    def read(self, base: Path | None = None) -> SecretStr:
        """Read the value from the controller's environment or file; ValueError says why not (never quoting it)."""
        import os

        if self.secret_env is not None:
            text = os.environ.get(self.secret_env)
            if text is None:
                raise ValueError(f"the secret ${self.secret_env} is not set in the controller's environment")
        else:
            path = Path(str(self.secret_file)).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            try:
                raw = path.read_bytes()[: MAX_SECRET_BYTES + 2]
            except OSError as exc:
                raise ValueError(f"cannot read the secret file {path}: {exc.strerror or exc}") from None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"the secret file {path} is not UTF-8 text") from None
            text = text.removesuffix("\n").removesuffix("\r")
        where = self.describe()
        if not text:
            raise ValueError(f"the secret {where} is empty")
        if len(text.encode()) > MAX_SECRET_BYTES:
            raise ValueError(f"the secret {where} is longer than {MAX_SECRET_BYTES} bytes")
        if any(ch in "\0\n\r" or "\ud800" <= ch <= "\udfff" for ch in text):
            raise ValueError(f"the secret {where} holds a NUL, a line break or a lone surrogate: one line of text only")
        self._value = SecretStr(text)
        return self._value


def _split_secrets(data: Any) -> Any:
    """A service mapping with its ``environment`` entries that are secret references moved to ``secrets`` (the
    resolved experiment keeps them there); plain values stay."""
    if not isinstance(data, dict) or not isinstance(data.get("environment"), dict):
        return data
    environment = data["environment"]
    moved = {k: v for k, v in environment.items() if isinstance(v, dict)}
    if not moved:
        return data
    secrets = data.get("secrets")
    secrets = dict(secrets) if isinstance(secrets, dict) else {}
    for key in moved:
        if key in secrets:
            raise ValueError(f"secret {key!r} is given twice (in environment and in secrets)")
    return {
        **data,
        "environment": {k: v for k, v in environment.items() if k not in moved},
        "secrets": {**secrets, **moved},
    }


def _check_secret_names(secrets: dict[str, SecretSource] | None, environment: dict[str, str]) -> None:
    for key in secrets or {}:
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"environment variable name {key!r} is not valid (letters, digits, _)")
        if key in environment:
            raise ValueError(f"{key!r} is both a plain environment value and a secret")


def _check_env(env: dict[str, str]) -> dict[str, str]:
    for key in env:
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"environment variable name {key!r} is not valid (letters, digits, _)")
    return env


class SystemdServiceSpec(_Strict):
    """A systemd unit changed through a drop-in (default) or, in ``mode: unit``, by replacing the unit file."""

    kind: Literal["systemd"] = "systemd"
    unit: str
    exec_start: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    #: Environment values read on the controller (SecretSource), passed through a 0600 EnvironmentFile=.
    #: Written in the file as ``environment: {NAME: {secret_env: ...}}``; kept here by the resolved experiment.
    secrets: dict[str, SecretSource] | None = None
    mode: Literal["dropin", "unit"] = "dropin"
    unit_file: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _secret_environment(cls, data: Any) -> Any:
        return _split_secrets(data)

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str) -> str:
        if "." not in value:
            value += ".service"
        if not _UNIT.fullmatch(value) or value.startswith("-"):
            raise ValueError(f"not a valid service unit name: {value!r}")
        return value

    @field_validator("environment")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env(value)

    @model_validator(mode="after")
    def _something_to_apply(self) -> SystemdServiceSpec:
        _check_secret_names(self.secrets, self.environment)
        if self.mode == "dropin" and self.exec_start is None and not self.environment and not self.secrets:
            raise ValueError("set exec_start and/or environment: the drop-in would change nothing")
        if self.mode == "unit" and self.unit_file is None:
            raise ValueError("mode: unit needs unit_file (the whole unit as a template)")
        return self

    def command_template(self) -> str | None:
        return self.unit_file if self.mode == "unit" else self.exec_start

    def render_command(self, values: dict[str, Scalar]) -> str | None:
        """The rendered exec_start, or in ``mode: unit`` the whole unit file, each value escaped by systemd's
        rules for the setting it lands in (:func:`orchestrator.quoting.render_unit_template`)."""
        from orchestrator.experiment.templates import render
        from orchestrator.quoting import render_unit_template

        template = self.command_template()
        if template is None:
            return None
        return (render_unit_template(template, values) if self.mode == "unit" else render(template, values)).strip()

    def templates(self) -> dict[str, str]:
        out = {"exec_start": self.exec_start} if self.exec_start is not None else {}
        if self.unit_file is not None:
            out["unit_file"] = self.unit_file
        out.update({f"environment.{k}": v for k, v in self.environment.items()})
        return out

    def identity(self) -> dict[str, Any]:
        return {"unit": self.unit, "mode": self.mode, **_secret_identity(self.secrets)}

    def secret_values(self) -> dict[str, SecretStr | None]:
        """Every secret's name and value (None until read by load_experiment)."""
        return {k: v.value for k, v in (self.secrets or {}).items()}


class ProcessServiceSpec(_Strict):
    """A plain process (hosts without systemd, the local demo): started in its own session, logs to a file."""

    kind: Literal["process"] = "process"
    command: str
    workdir: str | None = None
    log_file: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    #: Environment values read on the controller (SecretSource), given to the server's environment alone.
    secrets: dict[str, SecretSource] | None = None
    stop_timeout: Duration = 30.0

    @model_validator(mode="before")
    @classmethod
    def _secret_environment(cls, data: Any) -> Any:
        return _split_secrets(data)

    @field_validator("environment")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env(value)

    @model_validator(mode="after")
    def _secret_names(self) -> ProcessServiceSpec:
        _check_secret_names(self.secrets, self.environment)
        return self

    @field_validator("workdir", "log_file")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return _no_control(value, "a path")

    def command_template(self) -> str | None:
        return self.command

    def render_command(self, values: dict[str, Scalar]) -> str | None:
        from orchestrator.experiment.templates import render

        return render(self.command, values).strip()

    def templates(self) -> dict[str, str]:
        out = {"command": self.command}
        out.update({f"environment.{k}": v for k, v in self.environment.items()})
        return out

    def identity(self) -> dict[str, Any]:
        return {"workdir": self.workdir, **_secret_identity(self.secrets)}

    def secret_values(self) -> dict[str, SecretStr | None]:
        """Every secret's name and value (None until read by load_experiment)."""
        return {k: v.value for k, v in (self.secrets or {}).items()}


def _secret_identity(secrets: dict[str, SecretSource] | None) -> dict[str, Any]:
    """What a configuration's identity holds of its secrets: names and where they come from (no value); nothing
    at all without secrets, so the ids of configurations without any do not change."""
    return {"secrets": {k: v.describe() for k, v in secrets.items()}} if secrets else {}


class ExistingServiceSpec(_Strict):
    """A server that is already running, measured with the configuration it has (``kind: none``): nothing is
    deployed, restarted or restored, so the experiment has one configuration (variants with server-side
    templates are refused). ``unit`` (a systemd unit whose journal and state are read, never changed) or
    ``log_file`` (a file the server writes its log to) give the engine's log lines; with neither, the metrics
    come from /metrics and the responses alone (:mod:`orchestrator.services.existing`)."""

    kind: Literal["none"] = "none"
    unit: str | None = None
    log_file: str | None = None

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "." not in value:
            value += ".service"
        if not _UNIT.fullmatch(value) or value.startswith("-"):
            raise ValueError(f"not a valid service unit name: {value!r}")
        return value

    @field_validator("log_file")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return _no_control(value, "a path")

    @property
    def environment(self) -> dict[str, str]:
        return {}

    @property
    def secrets(self) -> dict[str, SecretSource] | None:
        return None

    def command_template(self) -> str | None:
        return None

    def render_command(self, values: dict[str, Scalar]) -> str | None:
        return None

    def templates(self) -> dict[str, str]:
        return {}

    def identity(self) -> dict[str, Any]:
        return {"unit": self.unit, "log_file": self.log_file}

    def secret_values(self) -> dict[str, SecretStr | None]:
        return {}


#: The variant an experiment with ``service: {kind: none}`` gets when it names none: the server as it runs.
EXISTING_VARIANT = "current"

ServiceSpec = Annotated[SystemdServiceSpec | ProcessServiceSpec | ExistingServiceSpec, Field(discriminator="kind")]

_DEFAULT_HEALTH = {
    "sglang": ["/health", "/v1/models"],
    "vllm": ["/health", "/v1/models"],
    "sim": ["/health", "/v1/models"],
    "llamacpp": ["/health"],
}


class ServerSpec(_Strict):
    """Where the server answers and how long it may take to come up."""

    url: str
    model: str | None = None
    api: Literal["chat", "completions", "generate", "llamacpp"] = "chat"
    ready_timeout: Duration = 900.0
    health_paths: list[str] | None = None
    metrics_path: str | None = "/metrics"
    expected_load_time: Duration = 60.0
    expected_tokens_per_second: float = Field(50.0, gt=0)
    #: The key itself (kept as a SecretStr, stored redacted), or where to read it: {secret_env: ...}/{secret_file: ...}.
    api_key: SecretStr | SecretSource | None = None
    #: ``ssh``: reach the server through the SSH connection of its host (or of a Slurm launcher's login node),
    #: a local port forwarded over it (paramiko direct-tcpip; the server's host needs only port 22 open);
    #: unset (``direct``): connect to server.url itself.
    via: Literal["direct", "ssh"] | None = None

    @property
    def api_key_value(self) -> str | None:
        """The API key in clear, for the HTTP clients only (never logged or stored)."""
        key = self.api_key.value if isinstance(self.api_key, SecretSource) else self.api_key
        return key.get_secret_value() if key is not None else None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        _no_control(value, "a URL")
        if not _URL.fullmatch(value):
            raise ValueError(f"expected an http:// or https:// URL (no spaces), got {value!r}")
        return value.rstrip("/")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return _no_control(value, "a model name")

    @field_validator("health_paths")
    @classmethod
    def _paths(cls, value: list[str] | None) -> list[str] | None:
        for path in value or []:
            _no_control(path, "a URL path")
            if not path.startswith("/") or any(ch.isspace() for ch in path):
                raise ValueError(f"health paths start with '/' and hold no spaces, got {path!r}")
        return value

    @field_validator("metrics_path")
    @classmethod
    def _metrics_path(cls, value: str | None) -> str | None:
        _no_control(value, "a URL path")
        if value is not None and (not value.startswith("/") or any(ch.isspace() for ch in value)):
            raise ValueError(f"metrics_path starts with '/' and holds no spaces, got {value!r}")
        return value

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, value: SecretStr | SecretSource | None) -> SecretStr | SecretSource | None:
        # Sent in an HTTP header: printable ASCII only. The message never quotes the key. (A SecretSource is
        # checked once read.)
        if isinstance(value, SecretStr) and not _header_text(value.get_secret_value()):
            raise ValueError("the API key is sent in an HTTP header: printable ASCII characters only")
        return value


def _header_text(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


class RegexParserSpec(_Strict):
    """A user parser: each log line matching ``regex`` gives a sample whose fields are the named groups."""

    name: str
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            pattern = re.compile(value)
        except re.error as exc:
            raise ValueError(f"regex does not compile: {exc}") from None
        if not pattern.groupindex:
            raise ValueError("regex needs at least one named group, like (?P<accept_len>[0-9.]+)")
        return value


class Variant(BaseModel):
    """A named configuration family. Keys other than matrix/include/exclude are template fields."""

    model_config = ConfigDict(extra="allow")

    matrix: dict[str, list[Scalar]] = Field(default_factory=dict)
    include: list[dict[str, Scalar]] = Field(default_factory=list)
    exclude: list[dict[str, Scalar]] = Field(default_factory=list)

    @field_validator("matrix")
    @classmethod
    def _non_empty(cls, value: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for key, values in value.items():
            if not values:
                raise ValueError(f"matrix key {key!r} has an empty list: it would expand to no deployment")
            if len({repr(v) for v in values}) != len(values):
                raise ValueError(f"matrix key {key!r} lists a value twice")
        return value

    @model_validator(mode="after")
    def _field_values(self) -> Variant:
        for key, value in (self.model_extra or {}).items():
            if value is None:
                self.model_extra[key] = ""  # type: ignore[index]
            elif isinstance(value, dict | list):
                raise ValueError(f"template field {key!r} must be a string or number, got a {type(value).__name__}")
        return self

    @property
    def template_fields(self) -> dict[str, str]:
        return {k: v if isinstance(v, str) else _scalar_text(v) for k, v in (self.model_extra or {}).items()}


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class TimeoutsSpec(_Strict):
    connect: Duration = 10.0
    first_token: Duration = 300.0
    total: Duration = 900.0


#: Figures ``load.until`` can steer by (the record's interval figures, ``orchestrator/load/uncertainty.py``).
UNTIL_FIGURES = ("output_tok_s", "accept_len", "ttft_ms_p50", "itl_ms_p50", "tpot_ms_p50", "e2e_ms_p50")


class UntilSpec(_Strict):
    """Adaptive stopping: keep a point running until the confidence interval of ``figure`` is within
    ``rel_ci`` of its value (half the interval's width over the figure: 0.02 is ±2%), at least
    ``min_requests`` requests and at most ``max_requests`` requests or ``max_duration`` seconds."""

    rel_ci: float = Field(0.02, gt=0, lt=1)
    figure: Literal["output_tok_s", "accept_len", "ttft_ms_p50", "itl_ms_p50", "tpot_ms_p50", "e2e_ms_p50"] = (
        "output_tok_s"
    )
    min_requests: int = Field(16, ge=2)
    max_requests: int | None = Field(None, ge=2)
    max_duration: Duration | None = None

    @model_validator(mode="after")
    def _capped(self) -> UntilSpec:
        if self.max_requests is None and self.max_duration is None:
            raise ValueError("until needs a cap: max_requests and/or max_duration")
        if self.max_duration is not None and self.max_duration <= 0:
            raise ValueError("max_duration must be positive")
        if self.max_requests is not None and self.max_requests < self.min_requests:
            raise ValueError(f"max_requests ({self.max_requests}) is below min_requests ({self.min_requests})")
        return self


class WorkloadSpec(_Strict):
    """One named workload of ``load.workloads`` (``orchestrator/load/datasets.py`` reads it): ``source`` (or
    ``path``) is ``builtin:NAME``, ``synthetic:in=N,out=M`` or a file, relative to the experiment file;
    ``format`` how to read the file; ``category`` keeps the rows of that category only; ``max_tokens`` caps every
    request's output length (default ``load.max_tokens``). A plain string is a ``source``."""

    source: str = Field(validation_alias=AliasChoices("source", "path"))
    format: Literal["auto", "jsonl", "sharegpt", "specbench", "speedbench"] = "auto"
    category: str | None = None
    max_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"source": data} if isinstance(data, str) else data

    @field_validator("source", "category")
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        return _no_control(value, "a workload source (builtin:NAME or a path) or category")

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        formats = ["auto", "jsonl", "sharegpt", "specbench", "speedbench"]
        if isinstance(value, str) and value not in formats:
            raise ValueError(f"unknown format {value!r}{suggest(value, formats)} (formats: {', '.join(formats)})")
        return value


class LoadSpec(_Strict):
    """The client side of every deployment: concurrency levels and/or request rates, and the workload.

    ``repeats``: each load point is measured that many times within a deployment (interleaved: every load
    once, then every load again), each window with its own prompts (the workload seed plus the window's
    index), so the repeats together estimate the figure over more of the prompt set and show how much one
    window differs from the next. ``repeats_across_restarts``: each configuration is deployed that many times,
    interleaved with the others (all configurations, then all again), so restart-to-restart variance (CUDA
    graphs, memory layout) shows too. ``until``: adaptive stopping per point (see :class:`UntilSpec`).
    ``flush_cache``: empty the server's prefix cache before every point (SGLang ``/flush_cache``, vLLM
    ``/reset_prefix_cache``, llama.cpp slot erase; ``orchestrator/engines/cache.py``).
    """

    concurrency: list[Annotated[int, Field(ge=1, le=100000)]] = Field(default_factory=list)
    rates: list[Annotated[float, Field(gt=0)]] = Field(default_factory=list)
    max_in_flight: int | None = Field(None, ge=1)
    warmup: int = Field(3, ge=0)
    requests: int | None = Field(None, ge=1)
    duration: Duration | None = None
    max_tokens: int = Field(256, ge=1)
    temperature: float = Field(0.0, ge=0)
    prompts: str = "builtin:chat"
    #: Named workloads, each a load point of every deployment (``WorkloadSpec``); none: ``prompts`` alone.
    workloads: dict[str, WorkloadSpec] | None = None
    ignore_eos: bool = False
    seed: int = 0
    stream: bool = True
    timeouts: TimeoutsSpec = Field(default_factory=TimeoutsSpec)
    repeats: int = Field(1, ge=1, le=1000)
    repeats_across_restarts: int = Field(1, ge=1, le=100)
    until: UntilSpec | None = None
    flush_cache: bool = False

    @field_validator("concurrency", "rates", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("prompts")
    @classmethod
    def _prompts(cls, value: str) -> str:
        return _no_control(value, "prompts (builtin:NAME or a path)") or value

    @model_validator(mode="after")
    def _complete(self) -> LoadSpec:
        if not self.concurrency and not self.rates:
            raise ValueError("set concurrency (a list like [1, 8, 32]) and/or rates (requests per second)")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError("concurrency lists a level twice")
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be positive")
        if self.requests is None and self.duration is None:
            self.requests = 32
        if self.workloads is not None:
            if not self.workloads:
                raise ValueError("workloads is empty; name at least one (code: builtin:code) or leave it out")
            # The default prompts are tolerated beside workloads: a stored experiment (defaults written out)
            # must validate again when a run is resumed.
            if "prompts" in self.model_fields_set and self.prompts != "builtin:chat":
                raise ValueError("set either prompts or workloads, not both (a workload can be a prompts file)")
            for name in self.workloads:
                if not _NAME.fullmatch(str(name)):
                    raise ValueError(f"workload name {name!r} must be letters, digits, '.', '_' or '-'")
        return self


class ChecksSpec(_Strict):
    """Tolerances of the consistency checks the analysis runs on every point, and the confidence level of
    every interval and of the significance of a winner (``confidence``)."""

    chain_tolerance: float = Field(0.10, ge=0)
    client_server_tolerance: float = Field(0.25, ge=0)
    speedup_slack: float = Field(1.10, ge=1)
    min_requests: int = Field(10, ge=0)
    linear_chain_length: int | None = Field(None, ge=1)
    disabled: list[str] = Field(default_factory=list)
    confidence: float = Field(0.95, gt=0.5, lt=1)


class LosslessSpec(_Strict):
    """The lossless check (``orchestrator/sweep/lossless.py``): after warm-up, every deployment answers the same
    ``prompts`` prompts of the workload one at a time at temperature 0 (the autoregressive baseline twice, to
    see whether the server is deterministic at all), and each answer is compared with the baseline's."""

    enabled: bool = True
    prompts: int = Field(8, ge=1, le=256)
    max_tokens: int | None = Field(None, ge=1)


class TelemetrySpec(_Strict):
    """GPU telemetry through the window of every point, where the host has ``nvidia-smi``
    (``orchestrator/hosts/telemetry.py``): one long-running ``nvidia-smi ... -lms interval`` per point."""

    gpu: bool = True
    interval_ms: int = Field(500, ge=100, le=60000)


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
    #: Where deployments run when it is not the hosts: a scheduler (``kind: slurm``).
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
    lossless: LosslessSpec = Field(default_factory=LosslessSpec)
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)
    #: What "best" means and how to find it without the whole grid (``orchestrator/search``).
    objective: ObjectiveSpec | None = None
    search: SearchSpec | None = None

    _source: Path | None = PrivateAttr(default=None)

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
    def health_paths(self) -> list[str]:
        return self.server.health_paths or _DEFAULT_HEALTH[self.engine]

    def host_specs(self) -> list[SSHHostSpec | LocalHostSpec]:
        """Every host of the experiment, in file order (``host`` alone is a pool of one; none means local)."""
        if self.hosts:
            return list(self.hosts)
        return [self.host if self.host is not None else LocalHostSpec()]

    def server_url(self, host: SSHHostSpec | LocalHostSpec) -> str:
        """``server.url`` with ``{host}`` replaced by the host's address."""
        return self.server.url.replace("{host}", host.address)

    def builtin_values(self) -> dict[str, Scalar]:
        return {"python": sys.executable, "experiment": self.name}

    def template_values(self, variant_name: str, params: dict[str, Scalar]) -> dict[str, Scalar]:
        """Everything a service template may use for one (variant, params)."""
        from orchestrator.experiment.templates import render

        base: dict[str, Scalar] = {**self.builtin_values(), **self.vars, **params}
        rendered = {k: render(v, base) for k, v in self.variants[variant_name].template_fields.items()}
        return {**base, **rendered}


def _host_shorthand(value: Any) -> Any:
    if isinstance(value, str):
        return {"kind": "local"} if value == "local" else {"kind": "ssh", "ssh": value}
    if isinstance(value, dict) and "kind" not in value:
        if "ssh" in value:
            return {"kind": "ssh", **value}
        if value.get("local") is True and len(value) == 1:
            return {"kind": "local"}
    return value


# ---------------------------------------------------------------------------------------------------- errors


def _unwrap(annotation: Any) -> list[Any]:
    """The model classes an annotation may hold (through Optional, Annotated, list, dict, unions)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    if origin in (list, dict):
        return [(origin, typing.get_args(annotation))]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _valid_keys(path: tuple[Any, ...], data: Any, root: type[BaseModel] | None = None) -> list[str]:
    """The keys the schema accepts at ``path`` (for "did you mean"), following the document's kinds."""
    candidates: list[Any] = [root or Experiment]
    node = data
    for part in path:
        next_candidates: list[Any] = []
        for cand in candidates:
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                if isinstance(node, dict) and "kind" in node:
                    kind_field = cand.model_fields.get("kind")
                    if kind_field is not None and typing.get_args(kind_field.annotation) != (node["kind"],):
                        continue
                info = cand.model_fields.get(part) if isinstance(part, str) else None
                if info is not None:
                    next_candidates.extend(_unwrap(info.annotation))
            elif isinstance(cand, tuple):
                origin, args = cand
                if (origin is list and isinstance(part, int)) or origin is dict:
                    for arg in args[-1:]:
                        next_candidates.extend(_unwrap(arg))
        candidates = next_candidates
        node = (
            node.get(part)
            if isinstance(node, dict)
            else (node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else None)
        )
    keys: list[str] = []
    for cand in candidates:
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            if isinstance(node, dict) and "kind" in node:
                kind_field = cand.model_fields.get("kind")
                if kind_field is not None and typing.get_args(kind_field.annotation) != (node["kind"],):
                    continue
            keys.extend(k for k in cand.model_fields if k not in keys)
    return keys


def suggest(word: str, options: list[str]) -> str:
    """``; did you mean 'x'?`` for the nearest option, else the list of valid keys (or nothing)."""
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else (f" (valid keys: {', '.join(options)})" if options else "")


def _doc_path(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Drop pydantic's union tags and validator names from an error location, keeping document keys."""
    path: list[Any] = []
    node = data
    for index, part in enumerate(loc):
        following = loc[index + 1] if index + 1 < len(loc) else None
        if (
            isinstance(node, dict)
            and part in node
            and following is not None
            and following in node
            and not isinstance(node[part], dict | list)
        ):
            continue  # a union tag that is also a key of the document (``host: {ssh: ...}`` is tagged "ssh")
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict | list):
            # a tag like 'systemd' or 'function-after[...]', or a missing key: keep it only if last
            is_tag = isinstance(node, dict) and node.get("kind") == part
            if (
                part is loc[-1]
                and isinstance(part, str)
                and not part.startswith(("function-", "tagged-union"))
                and not is_tag
            ):
                path.append(part)
        else:
            break
    return tuple(path)


_SENSITIVE = re.compile(r"key|token|secret|password|auth", re.IGNORECASE)


def _sensitive(loc: tuple[Any, ...]) -> bool:
    """Whether a location may hold a secret, whose value an error message must never quote."""
    return any(isinstance(part, str) and _SENSITIVE.search(part) for part in loc)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _error_from_validation(
    exc: ValidationError, data: Any, positions: Positions, file: str, root: type[BaseModel] | None = None
) -> ConfigError:
    """One ``ConfigError`` (file:line:column, key path, nearest valid key) for the pydantic errors of a document
    whose schema is ``root`` (the Experiment unless said otherwise; playbook files pass theirs): the first says
    how many more there are, and ``problems`` holds every one (``specsweep validate`` prints them all)."""
    errors = exc.errors(include_url=False)
    # An unknown key usually explains a "missing" one next to it (a typo): report it first.
    rank = {"extra_forbidden": 0, "union_tag_invalid": 1}
    errors.sort(key=lambda e: rank.get(e["type"], 2))
    problems: list[ConfigError] = []
    seen: set[str] = set()
    for error in errors:
        problem = _one_validation_error(error, data, positions, file, root)
        if str(problem) not in seen:
            seen.add(str(problem))
            problems.append(problem)
    return with_problems(problems)


def with_problems(problems: list[ConfigError]) -> ConfigError:
    """The first of ``problems``, saying how many more there are, with every one in its ``problems``."""
    first = problems[0]
    more = len(problems) - 1
    if more:
        first = ConfigError(
            f"{first.message} (and {more} more error{'s' if more > 1 else ''})",
            file=first.file,
            line=first.line,
            column=first.column,
            key=first.key,
        )
    first.problems = list(problems)  # type: ignore[attr-defined]
    return first


def problems_of(error: ConfigError) -> list[ConfigError]:
    """Every problem a ConfigError stands for (itself when it holds no list)."""
    return list(getattr(error, "problems", None) or [error])


def _one_validation_error(
    first: Any, data: Any, positions: Positions, file: str, root: type[BaseModel] | None
) -> ConfigError:
    loc = tuple(first["loc"])
    path = _doc_path(loc, data)
    etype = first["type"]
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if etype == "extra_forbidden":
        bad = path[-1] if path else loc[-1]
        message = f"unknown key {bad!r}" + suggest(str(bad), _valid_keys(path[:-1], data, root))
    elif etype == "missing":
        missing = loc[-1]
        if path and path[-1] == missing:
            path = path[:-1]
        message = f"missing required key {missing!r}"
        path = (*path, missing)
    elif etype == "union_tag_invalid":
        expected = [t.strip(" '") for t in str(first.get("ctx", {}).get("expected_tags", "")).split(",")]
        got = str(first.get("ctx", {}).get("tag", ""))
        message = f"unknown kind {got!r} (expected one of: {', '.join(expected)})" + suggest(got, expected)
        path = (*path, "kind")
    elif etype == "union_tag_not_found":
        message = "missing key 'kind'"
        path = (*path, "kind")
    elif "input" in first and etype not in ("value_error", "assertion_error") and not _sensitive(loc):
        message = f"{message}, got {_describe(first['input'])}"
    line, column = locate(positions, path)
    return ConfigError(message, file=file, line=line, column=column, key=".".join(str(p) for p in path) or None)


# ---------------------------------------------------------------------------------------------- semantics


class _Problem(Exception):
    def __init__(self, path: tuple[Any, ...], message: str) -> None:
        self.path = path
        self.message = message


def _check_templates(exp: Experiment, problems: list[_Problem]) -> None:
    """Template problems: the service's and vars' (the first stops the check), then each variant's (its first)."""
    service_templates = exp.service.templates()
    builtins = set(exp.builtin_values())
    url_fields = _fields_or_problem(("server", "url"), exp.server.url)
    for name in url_fields:
        if name == "node" and exp.launcher is not None:
            continue  # the node a Slurm job runs on
        if name not in RUNTIME_FIELDS:
            also = " (and {node} with a Slurm launcher)" if name == "node" else ""
            raise _Problem(("server", "url"), f"unknown placeholder {{{name}}}: server.url may only use {{host}}{also}")
    used_by_service: dict[str, tuple[Any, ...]] = {}
    for key, template in service_templates.items():
        path = ("service", *key.split(".", 1))
        for name in _fields_or_problem(path, template):
            used_by_service.setdefault(name, path)
    for key, value in exp.vars.items():
        if not str(key).isidentifier():
            raise _Problem(("vars", key), f"vars key {key!r} must be a name (letters, digits, _)")
        del value

    def variant_problems(vname: str, variant: Variant) -> None:
        vpath: tuple[Any, ...] = ("variants", vname)
        matrix_keys = set(variant.matrix)
        for extra in variant.include:
            if set(extra) != matrix_keys:
                raise _Problem(
                    (*vpath, "include"),
                    f"include entries must set exactly the matrix keys {sorted(matrix_keys)}, got {sorted(extra)}",
                )
        for rule in variant.exclude:
            for key in rule:
                if key not in matrix_keys:
                    raise _Problem(
                        (*vpath, "exclude"),
                        f"exclude key {key!r} is not a matrix key" + suggest(key, sorted(matrix_keys)),
                    )
        field_templates = variant.template_fields
        reserved = ["matrix", "include", "exclude"]
        for fname in field_templates:
            if not fname.isidentifier():
                raise _Problem((*vpath, fname), f"template field {fname!r} must be a name (letters, digits, _)")
        available = builtins | set(exp.vars) | matrix_keys
        referenced = set(used_by_service) | _all_fields(field_templates, vpath)
        for key in variant.matrix:
            if key not in referenced:
                options = sorted(referenced - matrix_keys - builtins - set(exp.vars) - set(field_templates))
                raise _Problem(
                    (*vpath, "matrix", key),
                    f"matrix key {key!r} is used by no template" + suggest(key, options or sorted(referenced)),
                )
        used_by_fields: set[str] = set()
        for fname, template in field_templates.items():
            for name in _fields_or_problem((*vpath, fname), template):
                if name not in available:
                    raise _Problem(
                        (*vpath, fname),
                        f"placeholder {{{name}}} has no value in variant {vname!r}"
                        + suggest(name, sorted(available)).replace("did you mean", "did you mean placeholder"),
                    )
                used_by_fields.add(name)
        for fname in field_templates:
            if fname not in used_by_service:
                options = reserved + sorted(used_by_service)
                raise _Problem(
                    (*vpath, fname),
                    f"unknown key {fname!r}: no service template uses {{{fname}}}" + suggest(fname, options),
                )
        everything = available | set(field_templates)
        for name, where in used_by_service.items():
            if name not in everything:
                raise _Problem(
                    where,
                    f"placeholder {{{name}}} has no value for variant {vname!r} "
                    f"(define it in the variant, its matrix, or vars)" + suggest(name, sorted(everything)),
                )

    for vname, variant in exp.variants.items():
        try:
            variant_problems(vname, variant)
        except _Problem as problem:
            problems.append(problem)


def _all_fields(templates: dict[str, str], prefix: tuple[Any, ...]) -> set[str]:
    out: set[str] = set()
    for key, template in templates.items():
        out.update(_fields_or_problem((*prefix, key), template))
    return out


def _fields_or_problem(path: tuple[Any, ...], template: str) -> list[str]:
    try:
        return fields(template)
    except TemplateSyntaxError as exc:
        raise _Problem(path, str(exc)) from None


def _check_commands(exp: Experiment) -> None:
    """Every rendered command, unit file and environment value must be usable now, not when a deployment is
    applied mid-sweep: a command splits into words, a unit file's values fit the settings they land in, and no
    rendered text holds what no command line, environment or file can (a NUL, a lone surrogate)."""
    from orchestrator.experiment.rendering import expand_matrix, server_config
    from orchestrator.quoting import split_command, usable_text

    service = exp.service
    unit_mode = isinstance(service, SystemdServiceSpec) and service.mode == "unit"
    where = "unit_file" if unit_mode else "exec_start" if isinstance(service, SystemdServiceSpec) else "command"
    for vname, variant in exp.variants.items():
        for params in expand_matrix(variant):
            label = vname + ("(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")
            try:
                config = server_config(exp, vname, params)
            except ConfigError as exc:  # a unit file value that cannot be made safe where it stands
                raise _Problem(("service", where), f"{label}: {exc.message}") from None
            command = config["command"]
            try:
                for key, value in config["environment"].items():
                    usable_text(value, what=f"the rendered environment value {key}")
                if command is None:
                    continue
                usable_text(command, what=f"the rendered service {where}")
            except ConfigError as exc:
                raise _Problem(("service", where), f"{label}: {exc.message}") from None
            if unit_mode:
                continue
            try:
                split_command(command, what=f"the service {where}")
            except ConfigError as exc:
                raise _Problem(("variants", vname), f"{label}: {exc.message}") from None


def _check_existing_server(exp: Experiment, problems: list[_Problem]) -> None:
    """``service: {kind: none}`` measures the server as it runs: one configuration, nothing to fill in."""
    if not isinstance(exp.service, ExistingServiceSpec):
        return
    if len(exp.variants) > 1:
        problems.append(
            _Problem(
                ("variants",),
                f"service kind none measures the one configuration the running server has; define one variant "
                f"(named after it) or none, not {len(exp.variants)}",
            )
        )
    for vname, variant in exp.variants.items():
        fields = [*variant.template_fields, *(k for k in ("matrix", "include", "exclude") if getattr(variant, k))]
        for field in fields:
            problems.append(
                _Problem(
                    ("variants", vname, field),
                    f"variant {vname!r} sets {field!r}, but service kind none never changes the server's "
                    "configuration (it is measured as it runs); use kind systemd or process to sweep "
                    "configurations",
                )
            )


def _check_launcher(exp: Experiment, problems: list[_Problem]) -> None:
    """A Slurm launcher runs the service's command as a job; ``server.via: ssh`` needs an SSH connection."""
    launcher = exp.launcher
    if launcher is not None:
        if exp.host is not None or exp.hosts is not None:
            problems.append(
                _Problem(
                    ("launcher",),
                    "set either launcher or host/hosts, not both: a Slurm job runs on the node Slurm picks, "
                    "and the login node is launcher.login",
                )
            )
        if not isinstance(exp.service, ProcessServiceSpec):
            problems.append(
                _Problem(
                    ("service", "kind"),
                    f"a Slurm job runs the server as a process: use service kind process (its command is the "
                    f"job's), not {exp.service.kind}",
                )
            )
        else:
            if exp.service.log_file is not None:
                problems.append(
                    _Problem(
                        ("service", "log_file"),
                        "a Slurm job's log is its output file (under launcher.shared_dir); drop log_file",
                    )
                )
            if exp.service.secrets:
                problems.append(
                    _Problem(
                        ("service", "secrets"),
                        "secrets are not passed to Slurm jobs (the batch script and its environment are kept by "
                        "the scheduler); give the job what it needs through the cluster's own means",
                    )
                )
    if exp.server.via == "ssh":
        if launcher is not None:
            if launcher.login.kind != "ssh":
                problems.append(
                    _Problem(
                        ("server", "via"),
                        "via: ssh tunnels through the login node's SSH connection, but launcher.login is this "
                        "machine; drop via (the nodes are reached directly) or give login an ssh host",
                    )
                )
        elif any(spec.kind != "ssh" for spec in exp.host_specs()):
            problems.append(
                _Problem(("server", "via"), "via: ssh tunnels through a host's SSH connection: every host must be ssh")
            )


def _semantic_problems(exp: Experiment) -> list[_Problem]:
    """Every problem a schema cannot see (hosts, baselines, templates per variant, sizes, rendered commands)."""
    problems: list[_Problem] = []
    if exp.host is not None and exp.hosts is not None:
        problems.append(_Problem(("hosts",), "set either host or hosts, not both"))
    if exp.hosts is not None and not exp.hosts:
        problems.append(_Problem(("hosts",), "hosts is empty"))
    names = [h.display_name for h in exp.host_specs()]
    if len(set(names)) != len(names):
        problems.append(_Problem(("hosts",), "two hosts have the same name; give each a distinct name:"))
    for index, name in enumerate(exp.baselines):
        if name not in exp.variants:
            message = f"baseline {name!r} is not a variant" + suggest(name, list(exp.variants))
            problems.append(_Problem(("baselines", index), message))
    if len(set(exp.baselines)) != len(exp.baselines):
        problems.append(_Problem(("baselines",), "a baseline is listed twice"))
    existing = len(problems)
    _check_launcher(exp, problems)
    _check_existing_server(exp, problems)
    if len(problems) > existing:
        return problems  # the template checks would only say the same again
    try:
        _check_templates(exp, problems)
    except _Problem as problem:
        problems.append(problem)
    total = 0
    for vname, variant in exp.variants.items():
        size = math.prod(len(v) for v in variant.matrix.values()) if variant.matrix else 1
        total += size + len(variant.include)
        if total > MAX_DEPLOYMENTS:
            problems.append(
                _Problem(
                    ("variants", vname, "matrix"),
                    f"the variants expand to more than {MAX_DEPLOYMENTS} deployments (restarts); split the sweep",
                )
            )
            break
    if problems:
        return problems  # rendering the commands needs every template and a bounded matrix
    try:
        _check_commands(exp)
    except _Problem as problem:
        problems.append(problem)
    points = total * (len(exp.load.concurrency) + len(exp.load.rates)) * exp.load.repeats
    points *= len(exp.load.workloads or {None: None})
    points *= exp.load.repeats_across_restarts
    if points > MAX_LOAD_POINTS:
        problems.append(_Problem(("load",), f"the sweep has {points} load points, over the limit of {MAX_LOAD_POINTS}"))
    problems += [_Problem(path, message) for path, message in search_problems(exp)]
    return problems


def _check_semantics(exp: Experiment) -> None:
    """The first semantic problem, raised (callers that want them all use ``_semantic_problems``)."""
    problems = _semantic_problems(exp)
    if problems:
        raise problems[0]


def _read_secrets(exp: Experiment, data: dict[str, Any], base: Path) -> None:
    """Read every secret now, so that a sweep never starts with one it cannot pass on; problems are located
    where the file names the secret."""
    written = data.get("service", {}) if isinstance(data.get("service"), dict) else {}
    for name, source in (exp.service.secrets or {}).items():
        env = written.get("environment")
        where = "environment" if isinstance(env, dict) and name in env else "secrets"
        try:
            source.read(base)
        except ValueError as exc:
            raise _Problem(("service", where, name), str(exc)) from None
    key = exp.server.api_key
    if isinstance(key, SecretSource):
        try:
            value = key.read(base)
        except ValueError as exc:
            raise _Problem(("server", "api_key"), str(exc)) from None
        if not _header_text(value.get_secret_value()):
            raise _Problem(
                ("server", "api_key"),
                f"the API key {key.describe()} is sent in an HTTP header: printable ASCII characters only",
            )


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
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as exc:
        raise _error_from_validation(exc, data, positions, file) from None
    except (RecursionError, TypeError, OverflowError) as exc:
        raise ConfigError(f"cannot validate: {type(exc).__name__}: {exc}", file=file) from None
    problems = _semantic_problems(exp)
    if not problems:
        from orchestrator.experiment.workloads import check_workloads

        problems += [_Problem(path, message) for path, message in check_workloads(exp, Path(file).parent)]
    if not problems and read_secrets:
        try:
            _read_secrets(exp, data, Path(file).parent)
        except _Problem as unreadable:
            problems.append(unreadable)
    if problems:
        errors = []
        for found in problems:
            line, column = locate(positions, found.path)
            errors.append(
                ConfigError(
                    found.message, file=file, line=line, column=column, key=".".join(str(p) for p in found.path)
                )
            )
        raise with_problems(errors) from None
    return exp


def load_experiment(path: str | Path, *, read_secrets: bool = True) -> Experiment:
    """Read and validate an experiment file; every problem is a ``ConfigError`` naming file, line and key."""
    path = Path(path)
    data, positions = load_yaml_with_positions(path)
    exp = parse_experiment(data, positions, str(path), read_secrets=read_secrets)
    exp._source = path
    return exp


#: Public names of the helpers playbook files share with experiment files.
error_from_validation = _error_from_validation
