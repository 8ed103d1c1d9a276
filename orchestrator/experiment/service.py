"""What runs and where it answers: the ``service:`` section (a systemd unit, a process, or a server already
running), the ``server:`` section (its URL, API and timeouts), the ``parsers:`` of its log lines, and the
secrets the service's environment and the server's API key are read from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from orchestrator.experiment.common import (
    _ENV_NAME,
    _UNIT,
    _URL,
    Duration,
    Scalar,
    _no_control,
    _Strict,
    read_regular_file,
)
from orchestrator.redaction import REDACTED_IN_URL

__all__ = [
    "EXISTING_VARIANT",
    "MAX_SECRET_BYTES",
    "ExistingServiceSpec",
    "ProcessServiceSpec",
    "RegexParserSpec",
    "SecretSource",
    "ServerSpec",
    "ServiceSpec",
    "SystemdServiceSpec",
]

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
                # verify-schedule sets these from the source's experiment file (orchestrator/sweep/verifysecrets.py)
                hint = (
                    ": verify-schedule sets it; continue a verification run with specsweep verify-schedule "
                    "--resume VERIFY_RUN"
                    if self.secret_env.startswith("SPECSWEEP_VERIFY_")
                    else ""
                )
                raise ValueError(f"the secret ${self.secret_env} is not set in the controller's environment{hint}")
        else:
            path = Path(str(self.secret_file)).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            raw = read_regular_file(path, MAX_SECRET_BYTES + 2, what="the secret file")
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


#: The longest server command an experiment may give: what Linux execs in one argument (MAX_ARG_STRLEN, 32
#: pages, include/uapi/linux/binfmts.h); a longer one could never start, and only costs time to validate.
MAX_COMMAND_BYTES = 131072
Command = Annotated[str, Field(max_length=MAX_COMMAND_BYTES)]


class SystemdServiceSpec(_Strict):
    """A systemd unit changed through a drop-in (default) or, in ``mode: unit``, by replacing the unit file."""

    kind: Literal["systemd"] = "systemd"
    unit: str
    exec_start: Command | None = None
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
        from orchestrator.quoting import render_unit_template
        from orchestrator.templates import render

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
    command: Command
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
        from orchestrator.templates import render

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


def _shown_url(value: str) -> str:
    """``value`` as an error shows it: what stands before its last ``@`` (after the scheme, if any) is userinfo,
    whatever else is wrong with the URL, so what follows the userinfo's first ``:`` (a password), or the whole
    userinfo when it has no ``:`` (a token as a user name), is shown ``redacted`` (issue 40, item 13: a URL with
    no scheme, a space or a bad port printed its password)."""
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "", value
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return value
    user, colon, _password = userinfo.partition(":")
    masked = f"{user}:{REDACTED_IN_URL}" if colon else REDACTED_IN_URL
    return f"{scheme}{sep}{masked}@{host}"


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
        shown = _shown_url(value)
        if not _URL.fullmatch(value):
            raise ValueError(f"expected an http:// or https:// URL (no spaces), got {shown!r}")
        try:  # what every client will do with it: a port that is no number, an unclosed IPv6 bracket
            parts = urlsplit(value)
            port = parts.port
        except ValueError as exc:
            userinfo = value.partition("://")[2].rpartition("@")[0]
            reason = str(exc).replace(userinfo, REDACTED_IN_URL) if userinfo else str(exc)
            raise ValueError(f"not a usable URL ({reason}): {shown!r}") from None
        if not parts.hostname:
            raise ValueError(f"the URL names no host: {shown!r}")
        if port == 0:
            raise ValueError(f"port 0 is no port a server listens on: {shown!r}")
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
