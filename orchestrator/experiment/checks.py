"""What a schema cannot see, across sections: hosts and launcher agree, baselines name real variants, every
template placeholder resolves for every variant and every matrix key is used, the matrix does not explode,
every rendered command is usable, and every secret can be read. Each problem is a key path and a message,
located in the file by ``schema.parse_experiment``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import ConfigError
from orchestrator.experiment.common import Scalar, setting_problem
from orchestrator.experiment.hosts import LocalHostSpec, SSHHostSpec
from orchestrator.experiment.launcherspecs import LauncherSpecBase
from orchestrator.experiment.launcherspecs.base import spec_classes
from orchestrator.experiment.load import LoadSpec
from orchestrator.experiment.search import search_problems
from orchestrator.experiment.service import (
    ExistingServiceSpec,
    ProcessServiceSpec,
    SecretSource,
    ServerSpec,
    SystemdServiceSpec,
    _header_text,
)
from orchestrator.experiment.validation import suggest
from orchestrator.experiment.variants import Variant
from orchestrator.redaction import redact, remember
from orchestrator.templates import TemplateSyntaxError, fields

__all__ = ["MAX_DEPLOYMENTS", "MAX_LOAD_POINTS", "RUNTIME_FIELDS", "ExperimentLike"]

#: Placeholders resolved at run time, per host; only allowed where documented (server.url).
RUNTIME_FIELDS = {"host"}

MAX_DEPLOYMENTS = 2000
MAX_LOAD_POINTS = 20000


class ExperimentLike(Protocol):
    """What the checks read of an experiment (:class:`orchestrator.experiment.schema.Experiment`, which
    imports this module to run them, so this module names it through this protocol)."""

    @property
    def host(self) -> SSHHostSpec | LocalHostSpec | None: ...

    @property
    def hosts(self) -> list[SSHHostSpec | LocalHostSpec] | None: ...

    @property
    def launcher(self) -> LauncherSpecBase | None: ...

    @property
    def service(self) -> SystemdServiceSpec | ProcessServiceSpec | ExistingServiceSpec: ...

    @property
    def server(self) -> ServerSpec: ...

    @property
    def vars(self) -> dict[str, Scalar]: ...

    @property
    def variants(self) -> dict[str, Variant]: ...

    @property
    def baselines(self) -> list[str]: ...

    @property
    def engine(self) -> str: ...

    @property
    def load(self) -> LoadSpec: ...

    def host_specs(self) -> list[SSHHostSpec | LocalHostSpec]: ...

    def builtin_values(self) -> dict[str, Scalar]: ...

    def template_values(self, variant_name: str, params: dict[str, Scalar]) -> dict[str, Scalar]: ...


class _Problem(Exception):
    def __init__(self, path: tuple[Any, ...], message: str) -> None:
        self.path = path
        self.message = message


def _check_templates(exp: ExperimentLike, problems: list[_Problem]) -> None:
    """Template problems: the service's and vars' (the first stops the check), then each variant's (its first)."""
    service_templates = exp.service.templates()
    builtins = set(exp.builtin_values())
    url_fields = _fields_or_problem(("server", "url"), exp.server.url)
    for name in url_fields:
        if exp.launcher is not None and name in exp.launcher.url_fields:
            continue  # filled by the launcher (the node a job runs on, a Service's name)
        if name not in RUNTIME_FIELDS:
            users = [spec.title for spec in spec_classes() if name in spec.url_fields]
            also = f" (and {{{name}}} with {' or '.join(users)})" if users else ""
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
        _setting_problems(vpath, variant)
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
        # An unknown placeholder first: a typo ({budgt}) leaves the matrix key it meant unused too, and the
        # advice is to fix the placeholder, not to rename the key to the typo.
        used_by_fields: set[str] = set()
        for fname, template in field_templates.items():
            for name in _fields_or_problem((*vpath, fname), template):
                if name not in available:
                    raise _unknown_placeholder((*vpath, fname), name, template, matrix_keys, available)
                used_by_fields.add(name)
        for key in variant.matrix:
            if key not in referenced:
                options = sorted(referenced - matrix_keys - builtins - set(exp.vars) - set(field_templates))
                raise _Problem(
                    (*vpath, "matrix", key),
                    f"matrix key {key!r} is used by no template" + suggest(key, options or sorted(referenced)),
                )
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


def _setting_problems(vpath: tuple[Any, ...], variant: Variant) -> None:
    """A matrix value, include/exclude value or template field that is no server setting
    (:func:`~orchestrator.experiment.common.setting_problem`), at its key."""
    for key, values in variant.matrix.items():
        for index, item in enumerate(values):
            if problem := setting_problem(item):
                raise _Problem((*vpath, "matrix", key, index), f"matrix key {key!r}: {problem}")
    for section in ("include", "exclude"):
        for index, entry in enumerate(getattr(variant, section)):
            for key, item in entry.items():
                if problem := setting_problem(item):
                    raise _Problem((*vpath, section, index, key), f"{section} key {key!r}: {problem}")
    for key, item in (variant.model_extra or {}).items():
        if problem := setting_problem(item):
            raise _Problem((*vpath, key), f"template field {key!r}: {problem}")


def _unknown_placeholder(
    path: tuple[Any, ...], name: str, template: str, matrix_keys: set[str], available: set[str]
) -> _Problem:
    """An unknown placeholder of a variant's template field, with the nearest matrix key. Which of the two names
    is the typo, the flag before the placeholder tells when it spells one of them (``--budget {budgt}``: the
    placeholder; ``--budget {budget}`` with a key ``budegt``: the key); otherwise the advice names both ways."""
    import difflib
    import re

    vname = path[1]
    message = f"unknown placeholder {{{name}}} in variant {vname!r}: no matrix key, var or built-in has that name"
    close = difflib.get_close_matches(name, sorted(matrix_keys), n=1, cutoff=0.6)
    if close:
        key = close[0]
        before = template.split("{" + name + "}", 1)[0].split()
        flag = re.sub(r"[^a-z0-9]", "", before[-1].lower()) if before else ""
        spelled = lambda word: flag.endswith(re.sub(r"[^a-z0-9]", "", word.lower()))  # noqa: E731
        if spelled(key) and not spelled(name):
            return _Problem(path, message + f"; did you mean {{{key}}} (matrix key {key!r})?")
        if spelled(name) and not spelled(key):
            return _Problem(
                (*path[:2], "matrix", key),
                f"matrix key {key!r} is used by no template; did you mean {name!r} (the placeholder {{{name}}} in "
                f"{'.'.join(str(p) for p in path)})?",
            )
        return _Problem(
            path,
            message + f"; the nearest matrix key is {key!r}: write {{{key}}}, or rename the matrix key to {name!r}",
        )
    close = difflib.get_close_matches(name, sorted(available), n=1, cutoff=0.6)
    if close:
        return _Problem(path, message + f"; did you mean {{{close[0]}}}?")
    keys = ", ".join(sorted(matrix_keys))
    return _Problem(path, message + (f" (matrix keys: {keys})" if keys else ""))


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


def _check_commands(exp: ExperimentLike) -> None:
    """Every rendered command, unit file and environment value must be usable now, not when a deployment is
    applied mid-sweep: a command splits into words, a unit file's values fit the settings they land in, and no
    rendered text holds what no command line, environment or file can (a NUL, a lone surrogate)."""
    from orchestrator.engines.registry import get_engine
    from orchestrator.experiment.rendering import expand_matrix, server_config
    from orchestrator.quoting import split_command, usable_text

    try:
        engine = get_engine(exp.engine)
    except ConfigError:
        engine = None  # the schema names an unknown engine itself
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
            refused = engine.command_problems(command) if engine is not None else []
            if refused:
                raise _Problem(("variants", vname), f"{label}: {refused[0]}")


def _check_existing_server(exp: ExperimentLike, problems: list[_Problem]) -> None:
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


def _check_launcher(exp: ExperimentLike, problems: list[_Problem]) -> None:
    """A launcher's own checks (its spec's ``problems``: the service it runs, the hosts beside it, how its
    servers are reached); without one, ``server.via: ssh`` needs an SSH connection to every host."""
    launcher = exp.launcher
    if launcher is not None:
        problems.extend(_Problem(path, message) for path, message in launcher.problems(exp))
    elif exp.server.via == "ssh" and any(spec.kind != "ssh" for spec in exp.host_specs()):
        problems.append(
            _Problem(("server", "via"), "via: ssh tunnels through a host's SSH connection: every host must be ssh")
        )


def _check_local_log(exp: ExperimentLike, problems: list[_Problem]) -> None:
    """A ``log_file`` on this machine that is there but is no regular file (a FIFO would hang every read of the
    window, /dev/zero never end): refused now. On an SSH host the service checks it when the run starts."""
    import os
    import stat

    log_file = getattr(exp.service, "log_file", None)
    if not isinstance(log_file, str) or not all(h.kind == "local" for h in exp.host_specs()):
        return
    try:
        mode = os.stat(os.path.expanduser(log_file)).st_mode
    except OSError:
        return  # not there yet: the server writes it
    if not stat.S_ISREG(mode):
        problems.append(
            _Problem(("service", "log_file"), f"{log_file} is not a regular file (a FIFO, a device or a directory)")
        )


def log_file_problems(exp: ExperimentLike, file: str) -> list[_Problem]:
    """A ``log_file`` on this machine that names the experiment file itself: the server's log would be appended
    to the YAML the run reads (refused, at the key's line). A relative path is taken from the service's
    ``workdir`` (or the current directory), ``~`` from this user's home."""
    import os

    log_file = getattr(exp.service, "log_file", None)
    if not isinstance(log_file, str) or not all(h.kind == "local" for h in exp.host_specs()):
        return []
    base = getattr(exp.service, "workdir", None) or os.getcwd()
    target = os.path.join(os.path.expanduser(base), os.path.expanduser(log_file))
    try:
        same = os.path.samefile(target, file)
    except OSError:
        same = os.path.realpath(target) == os.path.realpath(file)
    if not same:
        return []
    return [
        _Problem(
            ("service", "log_file"),
            f"{log_file} is this experiment file: the server's log would be written into it; name another file",
        )
    ]


def _semantic_problems(exp: ExperimentLike) -> list[_Problem]:
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
    _check_local_log(exp, problems)
    existing = len(problems)
    _check_launcher(exp, problems)
    _check_existing_server(exp, problems)
    from orchestrator.experiment.slots import slot_problems

    problems += [_Problem(path, message) for path, message in slot_problems(exp)]  # type: ignore[arg-type]
    from orchestrator.experiment.load import decide_problems

    problems += [_Problem(path, message) for path, message in decide_problems(exp)]
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


def _check_semantics(exp: ExperimentLike) -> None:
    """The first semantic problem, raised (callers that want them all use ``_semantic_problems``)."""
    problems = _semantic_problems(exp)
    if problems:
        raise problems[0]


def _read_secrets(exp: ExperimentLike, data: dict[str, Any], base: Path) -> None:
    """Read every secret now, so that a sweep never starts with one it cannot pass on; problems are located
    where the file names the secret."""
    written = data.get("service", {}) if isinstance(data.get("service"), dict) else {}
    for name, source in (exp.service.secrets or {}).items():
        env = written.get("environment")
        where = "environment" if isinstance(env, dict) and name in env else "secrets"
        try:
            read = source.read(base)
        except ValueError as exc:
            raise _Problem(("service", where, name), str(exc)) from None
        if hasattr(read, "get_secret_value"):
            remember(read.get_secret_value())  # masked by value wherever it shows up (a server's log echoing it)
    redact(data)  # every secret written inline is remembered: masked by value wherever it shows up later
    key = exp.server.api_key
    if not isinstance(key, SecretSource) and key is not None:
        remember(key.get_secret_value())
    if isinstance(key, SecretSource):
        try:
            value = key.read(base)
        except ValueError as exc:
            raise _Problem(("server", "api_key"), str(exc)) from None
        remember(value.get_secret_value())
        if not _header_text(value.get_secret_value()):
            raise _Problem(
                ("server", "api_key"),
                f"the API key {key.describe()} is sent in an HTTP header: printable ASCII characters only",
            )
