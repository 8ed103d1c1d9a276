"""Quoting for the two languages specsweep writes on a host: POSIX shell command lines and systemd unit files.

Nothing that comes from an experiment file reaches a shell or a unit file without passing through here:

- shell arguments go through :func:`shlex.quote` (:func:`shell_join`), so a ``;``, ``$(...)``, a backquote
  or a newline is data, never syntax;
- a service command (``exec_start``, a process ``command``) is split into words once, the way a POSIX shell
  splits them (quotes and backslashes honoured) but with no shell ever running it: no expansion, no
  operators, no redirections (:func:`split_command`);
- every word written into a unit file is double-quoted with systemd's own escapes (:func:`systemd_quote`):
  backslash and double quote escaped, control characters (a newline above all) written as C escapes so one
  value can never start a second line, ``%`` doubled so no specifier expands, and in command lines ``$``
  doubled so systemd substitutes no environment variable;
- unit names and environment variable names are validated against systemd's grammar.

A violation is a :class:`~orchestrator.errors.ConfigError`: it comes from the experiment file.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

from orchestrator.errors import ConfigError

__all__ = [
    "environment_line",
    "environment_lines",
    "exec_start_value",
    "sanitize_comment",
    "shell_join",
    "shell_quote",
    "split_command",
    "systemd_quote",
    "usable_text",
    "validate_env_name",
    "validate_unit_name",
]

# systemd unit-name grammar (src/basic/unit-name.c): a prefix of [A-Za-z0-9:_.\-], an optional @instance,
# a type suffix; 255 bytes at most. Only services make sense for specsweep.
_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?\.service")
_UNIT_NAME_MAX = 255
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# First-word prefixes systemd interprets in ExecStart= (systemd.service(5)): they would change the meaning of
# the command (ignore failure, argv[0] override, privileges), so a program may not start with one.
_EXEC_PREFIXES = "-@:+!|"
_C_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def usable_text(value: str, *, what: str = "a value") -> str:
    """``value`` unchanged, or a ConfigError when no command line, environment or file can hold it: a NUL
    ends a C string (argv, environ, a unit-file line), and a lone surrogate (what a YAML ``"\\ud800"`` escape
    makes) has no UTF-8 encoding."""
    if "\0" in value:
        raise ConfigError(f"{what} contains a NUL character, which no command line, environment or file can hold")
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ConfigError(f"{what} contains a lone surrogate ({value!a}), which has no UTF-8 encoding")
    return value


def shell_quote(word: str) -> str:
    """One word for a POSIX shell, quoted when needed (``shlex.quote``)."""
    return shlex.quote(usable_text(word, what="a shell word"))


def shell_join(argv: Iterable[str]) -> str:
    """A command line for a POSIX shell that runs exactly ``argv``."""
    return " ".join(shell_quote(str(a)) for a in argv)


def split_command(command: str, *, what: str = "command") -> list[str]:
    """Split a service command line into words as a POSIX shell would, without any expansion.

    Quotes and backslashes group words (``--arg "a b"`` is two words); ``;``, ``|``, ``$(...)``, ``*`` and
    the like stay literal characters inside words. An empty command or an unbalanced quote is an error.
    """
    usable_text(command, what=what)
    try:
        argv = shlex.split(command, comments=False, posix=True)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise ConfigError(f"cannot split {what} {command!r} into words: {exc}") from exc
    if not argv:
        raise ConfigError(f"{what} is empty")
    return argv


def validate_unit_name(name: str) -> str:
    """A valid systemd service name; ``.service`` is appended when no suffix is given.

    Anything outside systemd's unit-name alphabet (spaces, slashes, quotes, ``;``, newlines) is refused, so a
    unit name is safe both as a path component and as a shell word.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError("the unit name is empty", key="service.unit")
    candidate = name if name.endswith(".service") else f"{name}.service"
    if "." in name and not name.endswith(".service"):
        suffix = name.rsplit(".", 1)[1]
        if suffix in {"socket", "target", "timer", "mount", "path", "slice", "scope", "device", "swap"}:
            raise ConfigError(f"unit {name!r} is a .{suffix} unit; specsweep drives .service units", key="service.unit")
    if len(candidate.encode()) > _UNIT_NAME_MAX or not _UNIT_NAME.fullmatch(candidate):
        raise ConfigError(
            f"{name!r} is not a valid systemd service name (letters, digits and :_.-\\ only, an optional @instance)",
            key="service.unit",
        )
    if candidate[0] in ".@-":  # a leading "-" would read as an option to systemctl and journalctl
        raise ConfigError(f"{name!r} is not a valid systemd service name", key="service.unit")
    return candidate


def validate_env_name(name: str) -> str:
    """An environment variable name as systemd and POSIX shells accept it (``[A-Za-z_][A-Za-z0-9_]*``)."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise ConfigError(
            f"{name!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)", key="service.environment"
        )
    return name


def systemd_quote(value: str, *, command: bool) -> str:
    """``value`` as one double-quoted word of a unit-file setting, unquoting to exactly ``value``.

    ``command=True`` is for ExecStart= words, where systemd also substitutes ``$VAR``; there ``$`` is doubled.
    Specifiers (``%n``, ``%h``…) are expanded in both, so ``%`` is always doubled.
    """
    usable_text(value, what="a value for a systemd unit")
    out = ['"']
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and command:
            out.append("$$")
        elif ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif 0x80 <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            # C1 controls and Unicode line separators: printable as escapes, never as raw characters.
            out.append("".join(f"\\x{b:02x}" for b in ch.encode()))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def exec_start_value(argv: list[str]) -> str:
    """The right-hand side of an ``ExecStart=`` line that runs exactly ``argv`` (no shell, no expansion)."""
    if not argv:
        raise ConfigError("the service command is empty")
    program = argv[0]
    if program[:1] in _EXEC_PREFIXES:
        raise ConfigError(
            f"the program {program!r} starts with {program[0]!r}, which systemd would read as an ExecStart "
            "prefix; give the program's path"
        )
    return " ".join(systemd_quote(a, command=True) for a in argv)


def environment_line(name: str, value: str) -> str:
    """One ``Environment=`` line setting ``name`` to exactly ``value``."""
    validate_env_name(name)
    return "Environment=" + systemd_quote(f"{name}={value}", command=False)


def environment_lines(environment: Mapping[str, str]) -> list[str]:
    """``Environment=`` lines for a mapping, in its order."""
    return [environment_line(k, str(v)) for k, v in environment.items()]


def sanitize_comment(text: str, limit: int = 200) -> str:
    """Text safe for a ``#`` comment line in a unit file or a shell script: printable ASCII only, one line."""
    cleaned = "".join(ch if 0x20 <= ord(ch) < 0x7F else "?" for ch in text)
    return cleaned[:limit]
