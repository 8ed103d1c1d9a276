"""SystemdService: one server configuration at a time on a systemd unit, and back.

Default mode, ``dropin``: the unit stays untouched; specsweep writes
``/etc/systemd/system/<unit>.d/50-specsweep.conf`` (``ExecStart=`` reset, then the rendered command;
``Environment=`` lines), runs ``daemon-reload`` and restarts the unit. Mode ``unit``: the whole unit file,
rendered by the plan from the experiment's ``unit_file`` template, goes to ``/etc/systemd/system/<unit>``,
the original file being backed up byte for byte.

Every value is quoted by :mod:`orchestrator.quoting`: in drop-in mode every word of the command and every
environment assignment; in unit mode each value the template's placeholders receive, by systemd's rules for the
setting it lands in (:func:`orchestrator.quoting.render_unit_template`), the result being checked once more not
to change the template's structure. A hostile value can neither run a command, nor add a directive or an
assignment, nor reach systemd as a prefix, a specifier or a variable.

Secrets (:mod:`orchestrator.services.secrets`) go to ``/run/specsweep/<unit>.env``, mode 0600 in a 0700
directory, named by an ``EnvironmentFile=`` line; a command word ``$NAME`` naming a secret becomes ``${NAME}``,
which systemd substitutes at exec time. The file is written before the configuration that names it and
removed by ``restore()``, so neither the drop-in, nor the unit file, nor ``systemctl show`` holds a value.
An environment value written inline that is a secret (its name is a secret's, or the redactor masks it:
orchestrator/redaction.py) goes the same way, into that file, rather than onto an ``Environment=`` line that the
0644 drop-in and ``systemctl show`` would show (issue 40).
Journal text the service returns has every secret value masked.

Before its first change the service records, in ``/var/lib/specsweep/<unit>.marker.json`` plus copies of any
file it will overwrite, what it found (the unit's state; whether the drop-in directory, a drop-in of ours,
the unit file existed). ``restore()`` puts exactly that back: files restored or removed, ``daemon-reload``,
the unit restarted if it was running and stopped (and its failed state cleared) if not. A marker found at
the first change (a killed run's) is adopted as is: it describes the state before that run, which is the
state to go back to.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.errors import ConfigError, ServiceError, StartFailed
from orchestrator.quoting import (
    environment_lines,
    exec_start_value,
    sanitize_comment,
    shell_quote,
    split_command,
    systemd_quote,
    validate_unit_name,
)
from orchestrator.redaction import is_secret_name, redact_text
from orchestrator.services.base import Leftover, LogChunk, ServiceState, select_evidence
from orchestrator.services.hoststate import HostLock, controller_identity, lock_is_stale, read_json, write_json
from orchestrator.services.secrets import Redactor, env_file_text, reference, require_values

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment

__all__ = [
    "DROPIN_NAME",
    "SECRET_DIR",
    "STATE_DIR",
    "UNIT_DIR",
    "SystemdService",
    "render_dropin",
    "render_unit",
    "secret_environment_file",
]

UNIT_DIR = "/etc/systemd/system"
STATE_DIR = "/var/lib/specsweep"
SECRET_DIR = "/run/specsweep"
DROPIN_NAME = "50-specsweep.conf"
MARKER_VERSION = 1
_SHOW_PROPERTIES = "ActiveState,SubState,Result,ExecMainStatus,ExecMainCode,NRestarts,MainPID,InvocationID,LoadState"
_RUNNING = {"active", "activating", "reloading"}
_CURSOR_PREFIX = "-- cursor: "


_HEADER_PREFIX = "# Written by specsweep for deployment "


def _header(deployment: Deployment) -> str:
    return f"{_HEADER_PREFIX}{sanitize_comment(deployment.id)}; `specsweep restore` removes it.\n"


def secret_environment_file(unit: str, secret_dir: str = SECRET_DIR) -> str:
    """Where the secrets of ``unit`` go on the host (the unit name, with anything but [A-Za-z0-9_.@:-] as _)."""
    return f"{secret_dir.rstrip('/')}/{re.sub(r'[^A-Za-z0-9_.@:-]', '_', unit)}.env"


def _exec_start(argv: list[str], secrets: Sequence[str]) -> str:
    """ExecStart= running ``argv``, with each word that names a secret (``$NAME``) as ``${NAME}``: systemd puts
    the secret's value there, as one argument, when it runs the command."""
    line = exec_start_value(argv)  # validates every word and the program
    if not secrets or not any(reference(word, secrets) for word in argv):
        return line
    if reference(argv[0], secrets):
        raise ConfigError("the program itself cannot be a secret; give its path first", key="service.exec_start")
    words = []
    for word in argv:
        name = reference(word, secrets)
        words.append(f"${{{name}}}" if name else systemd_quote(word, command=True))
    return " ".join(words)


def _environment_file_line(path: str) -> str:
    """``EnvironmentFile=path``. systemd takes that value as it stands, specifiers resolved but never unquoted
    (src/core/load-fragment.c config_parse_unit_env_file: unit_full_printf, then an absolute path check), so
    the path is written bare and may hold only characters that mean nothing there."""
    if not re.fullmatch(r"/[A-Za-z0-9_.@:/-]*", path) or "/../" in path + "/":
        raise ServiceError(f"cannot name {path!r} in EnvironmentFile= (an absolute path of [A-Za-z0-9_.@:/-])")
    return "EnvironmentFile=" + path


def render_dropin(deployment: Deployment, *, secrets: Sequence[str] = (), environment_file: str | None = None) -> str:
    """The drop-in that applies ``deployment``: ExecStart reset and replaced, Environment lines added, and with
    ``secrets`` (their names) an EnvironmentFile= line naming ``environment_file``, where they are."""
    lines = [_header(deployment).rstrip("\n"), "[Service]"]
    if deployment.command is not None:
        argv = split_command(deployment.command, what="the service command")
        lines += ["ExecStart=", "ExecStart=" + _exec_start(argv, secrets)]
    lines += environment_lines(deployment.environment)
    if secrets:
        if environment_file is None:
            raise ServiceError("secrets need an environment file")
        lines.append(_environment_file_line(environment_file))
    return "\n".join(lines) + "\n"


def _shape(text: str) -> list[str]:
    """What makes a unit file's structure: per line, its section header or setting name, continuation
    backslashes, and (for Exec lines) the number of lone ``;`` command separators."""
    shape: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            shape.append("")
            continue
        continued = "\\" if line.endswith("\\") else ""
        if line.startswith("["):
            shape.append(line + continued)
            continue
        key, _, value = line.partition("=")
        separators = value.split().count(";") if key.strip().startswith("Exec") else 0
        shape.append(f"{key.strip()}={separators}{continued}")
    return shape


def _inline_secrets(deployment: Deployment) -> tuple[Deployment, dict[str, str]]:
    """``deployment`` without the environment values written inline that are secrets, and those values (for the
    environment file): a secret's name (``HF_TOKEN``), or a value the redactor masks (a token's shape, a value
    known to be secret elsewhere)."""
    inline = {
        name: value
        for name, value in deployment.environment.items()
        if is_secret_name(name) or redact_text(value) != value
    }
    if not inline:
        return deployment, {}
    plain = {name: value for name, value in deployment.environment.items() if name not in inline}
    return deployment.model_copy(update={"environment": plain}), inline


def render_unit(template: str | None, deployment: Deployment, *, environment_file: str | None = None) -> str:
    """The whole unit file of ``deployment`` (mode ``unit``).

    The plan renders the experiment's ``unit_file`` template into ``deployment.command``, each value escaped
    for the setting it lands in (:func:`orchestrator.quoting.render_unit_template`; what cannot be made safe
    is refused when the experiment is loaded). As a second line of defence the result is checked against the
    template: same lines, same sections and setting names, no new line continuation, no new ``;`` command
    separator. Environment values are appended as escaped ``Environment=`` lines.
    """
    text = deployment.command
    if text is None:
        raise ServiceError(f"deployment {deployment.id} has no unit file text")
    if template is not None and _shape(template) != _shape(text):
        changed = next(
            (i + 1 for i, (a, b) in enumerate(zip(_shape(template), _shape(text), strict=False)) if a != b),
            min(len(_shape(template)), len(_shape(text))) + 1,
        )
        raise ConfigError(
            f"a template value changes the structure of the unit file (line {changed}: a newline, a new setting, "
            "a line continuation or a ';' command separator); values may only fill in settings",
            key="service.unit_file",
        )
    if "\0" in text:
        raise ConfigError("the unit file contains a NUL character", key="service.unit_file")
    extra = environment_lines(deployment.environment)
    if environment_file is not None:
        extra.append(_environment_file_line(environment_file))
    if extra:
        text = text.rstrip("\n") + "\n\n[Service]\n" + "\n".join(extra)
    return _header(deployment) + text.rstrip("\n") + "\n"


_GAP_MARK = "-- specsweep: first entry from the cursor --"


def _cursor_fields(cursor: str) -> dict[str, str]:
    """A journald cursor's fields (sd-journal.c ``sd_journal_get_cursor``: ``s=`` seqnum id, ``i=`` seqnum in hex,
    ``b=`` boot id, ``m=``, ``t=``, ``x=``)."""
    return dict(part.split("=", 1) for part in cursor.split(";") if "=" in part)


def journal_gap(cursor: str, first: str) -> str | None:
    """Why the journal no longer holds every entry after ``cursor``, given ``first``: the first entry it holds
    from the cursor on (``journalctl -o json --cursor``, unfiltered), or None when it holds the cursor's own.

    The cursor was the journal's last entry when the window opened (``journal_cursor``), and journald removes
    entries only whole files at a time, oldest first (rotation, then vacuuming by size, files or time), so while
    the cursor's entry is there every later one is. A first entry with a later sequence number of the same
    sequence-number space means the entries from the cursor's up to it were removed; another space, or none, that
    the files holding the cursor's were removed or replaced."""
    try:
        entry = json.loads(first.strip().splitlines()[0]) if first.strip() else {}
    except (json.JSONDecodeError, IndexError):
        entry = {}
    found = str(entry.get("__CURSOR") or "") if isinstance(entry, dict) else ""
    ours, theirs = _cursor_fields(cursor), _cursor_fields(found)
    if not ours.get("s") or not ours.get("i"):
        return None  # not a cursor whose place can be checked
    if not found:
        return "the journal no longer holds the window's start, nor any entry after it (its files were removed)"
    if theirs.get("s") != ours.get("s"):
        return (
            "the journal no longer holds the window's start: its first entry from the cursor on is of another "
            "sequence-number space (the files holding the window's start were removed or replaced)"
        )
    try:
        gap = int(theirs.get("i", ""), 16) - int(ours["i"], 16)
    except ValueError:
        return None
    if gap <= 0:
        return None
    return (
        f"the journal no longer holds the window's first {gap} entr{'y' if gap == 1 else 'ies'} (of every unit): "
        "its files were rotated and vacuumed while the window was open, so the unit's lines among them are gone"
    )


def _message(value: object) -> str:
    """A journal MESSAGE as text: journalctl gives non-UTF-8 or control-laden messages as byte arrays."""
    if isinstance(value, list):
        return bytes(b for b in value if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
    return "" if value is None else str(value)


def _parse_show(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value not in (None, "", "[not set]") else default
    except ValueError:
        return default


class SystemdService:
    """A systemd unit on a host, configured by a drop-in (default) or a whole unit file."""

    def __init__(
        self,
        host: Host,
        unit: str,
        *,
        mode: Literal["dropin", "unit"] = "dropin",
        unit_template: str | None = None,
        state_dir: str = STATE_DIR,
        restart_timeout: float = 120.0,
        stop_timeout: float = 150.0,
        secrets: Mapping[str, Any] | None = None,
        redact: Mapping[str, str] | None = None,
        secret_dir: str = SECRET_DIR,
    ) -> None:
        if mode not in ("dropin", "unit"):
            raise ServiceError(f"unknown systemd mode {mode!r} (expected dropin or unit)")
        self.host = host
        self.unit = validate_unit_name(unit)
        self.name = self.unit
        self.mode = mode
        self.unit_template = unit_template
        self.state_dir = state_dir.rstrip("/") or "/"
        self.restart_timeout = restart_timeout
        self.stop_timeout = stop_timeout
        self.dropin_dir = f"{UNIT_DIR}/{self.unit}.d"
        self.dropin_path = f"{self.dropin_dir}/{DROPIN_NAME}"
        self.unit_path = f"{UNIT_DIR}/{self.unit}"
        self.marker_path = f"{self.state_dir}/{self.unit}.marker.json"
        self.backup_dir = f"{self.state_dir}/{self.unit}.backup"
        self._lock = HostLock(host, f"{self.state_dir}/{self.unit}.lock", service=self.unit)
        # Secrets: name -> value (a SecretStr, None when never read); redact: more values to mask in log text.
        self.secrets = dict(secrets or {})
        self.secret_dir = secret_dir.rstrip("/") or "/"
        self.secret_file = secret_environment_file(self.unit, self.secret_dir)
        known = {k: v.get_secret_value() for k, v in self.secrets.items() if hasattr(v, "get_secret_value")}
        self._redact = Redactor({**dict(redact or {}), **known})
        self._label = ""
        self._marker_ready = False
        self.start_cursor: str | None = None
        #: The invocation ``apply`` restarted away from: its lines are nobody's window (see ``journal_since``).
        self._replaced_invocation = ""

    def __repr__(self) -> str:
        return f"SystemdService({self.host.name!r}, {self.unit!r}, mode={self.mode!r})"

    # -- configuration -------------------------------------------------------------------------------------

    def render(self, deployment: Deployment) -> str:
        """The file text ``apply`` would write (validates every value first)."""
        deployment, inline = _inline_secrets(deployment)
        names = [*self.secrets, *inline]
        env_file = self.secret_file if names else None
        if self.mode == "unit":
            return render_unit(self.unit_template, deployment, environment_file=env_file)
        return render_dropin(deployment, secrets=names, environment_file=env_file)

    def apply(self, deployment: Deployment) -> None:
        text = self.render(deployment)  # refuse bad values before touching the host
        values = {**(require_values(self.secrets) if self.secrets else {}), **_inline_secrets(deployment)[1]}
        secrets = env_file_text(values) if values else None
        self._ensure_marker()
        if secrets is not None:
            # Before the configuration that names it; the directory first, so the file is never in a wider one.
            d = shell_quote(self.secret_dir)
            self.host.run(f"umask 077 && mkdir -p -- {d} && chmod 700 -- {d}").check(
                f"making {self.secret_dir}", host=self.host.name
            )
            self.host.write_text(self.secret_file, secrets, 0o600)
        target = self.unit_path if self.mode == "unit" else self.dropin_path
        self.host.write_text(target, text, 0o644)
        before = self.state()
        self.start_cursor = self.journal_cursor()
        # A server still starting when the restart came may log (its ready line, say) after this cursor and
        # before it is stopped; those lines belong to the old invocation, and journal_since leaves them out.
        self._replaced_invocation = before.invocation_id
        u = shell_quote(self.unit)
        result = self.host.run(
            f"systemctl daemon-reload && {{ systemctl reset-failed {u} 2>/dev/null; true; }} && "
            f"systemctl restart --no-block {u}",
            timeout=max(self.host_timeout(), 60.0),
        )
        if not result.ok:
            evidence = [ln for ln in (result.stderr + result.stdout).splitlines() if ln.strip()]
            evidence += select_evidence(self.logs_tail(30), tail=10)
            raise StartFailed(
                f"{self.host.name}: systemd refused to restart {self.unit}: "
                f"{(result.stderr.strip().splitlines() or ['exit ' + str(result.exit_code)])[0]}",
                evidence=evidence,
                reason="failed",
            )
        self._wait_new_start(before)

    def host_timeout(self) -> float:
        return float(getattr(self.host, "command_timeout", 60.0))

    def _wait_new_start(self, before: ServiceState) -> None:
        """Return once the restart job has begun a new start (so health never sees the old server)."""
        deadline = time.monotonic() + self.restart_timeout
        delay = 0.02
        while True:
            values = self._show()
            state = self._state(values)
            # The restart job was queued before systemctl returned, so no job left means it has run; a unit
            # that exited at once may already be unloaded (and its stamps gone), hence this first test.
            if (
                not values.get("Job") and state.active_state != "deactivating"
            ) or state.start_stamp > before.start_stamp:
                return
            if state.invocation_id and state.invocation_id != before.invocation_id:
                return
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"{self.host.name}: {self.unit} did not begin a new start within {self.restart_timeout:g} s "
                    f"(state {state.describe()})"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    # -- observing -----------------------------------------------------------------------------------------

    def _show(self) -> dict[str, str]:
        result = self.host.run(["systemctl", "show", self.unit, f"--property={_SHOW_PROPERTIES}"])
        result.check(f"systemctl show {self.unit}", host=self.host.name)
        return _parse_show(result.stdout)

    def state(self) -> ServiceState:
        return self._state(self._show())

    @staticmethod
    def _state(v: dict[str, str]) -> ServiceState:
        pid = _int(v.get("MainPID"))
        exited = v.get("ExecMainCode", "0") not in ("", "0")
        return ServiceState(
            active_state=v.get("ActiveState", "unknown"),
            sub_state=v.get("SubState", ""),
            result=v.get("Result", ""),
            exec_main_status=_int(v.get("ExecMainStatus")) if exited else None,
            n_restarts=_int(v.get("NRestarts")),
            main_pid=pid or None,
            invocation_id=v.get("InvocationID", ""),
            load_state=v.get("LoadState", ""),
            start_stamp=_int(v.get("InactiveExitTimestampMonotonic")),
        )

    def journal_cursor(self) -> str:
        # --sync first: what the server logged before this instant is in the journal, hence before the cursor.
        result = self.host.run("journalctl --sync 2>/dev/null; journalctl -q -n 0 --show-cursor --no-pager")
        for line in reversed(result.stdout.splitlines()):
            if line.startswith(_CURSOR_PREFIX):
                return line[len(_CURSOR_PREFIX) :].strip()
        if result.exit_code != 0:
            result.check("reading the journal cursor", host=self.host.name)
        return ""

    def journal_since(self, cursor: str) -> LogChunk:
        # Not --after-cursor: journalctl 252 skips the first *matching* entry after the cursor when the cursor's
        # own entry does not match -u (it assumes it sits on the cursor entry). --cursor is inclusive, and
        # the cursor's entry, when it is one of ours, is dropped below by comparing cursors.
        start = f" --cursor={shell_quote(cursor)}" if cursor else ""
        # Then, unfiltered, the first entry the journal holds from the cursor on: the cursor's own entry unless
        # the journal removed it (rotated and vacuumed), taking the window's start with it (journal_gap).
        probe = (
            f"; rc=$?; echo {_GAP_MARK}; journalctl -q -o json --output-fields=__CURSOR --no-pager{start} "
            "2>/dev/null | head -n 1; exit $rc"
            if cursor
            else ""
        )
        result = self.host.run(
            "journalctl --sync 2>/dev/null; "
            f"journalctl -q -u {shell_quote(self.unit)} -o json --output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID "
            f"--no-pager{start}{probe}"
        )
        stdout, _, first = result.stdout.partition(f"\n{_GAP_MARK}\n")
        if not first and stdout.startswith(f"{_GAP_MARK}\n"):
            stdout, first = "", stdout[len(_GAP_MARK) + 1 :]
        lost = journal_gap(cursor, first) if cursor else None
        if result.exit_code != 0 and not stdout:
            if result.stderr.strip():
                raise ServiceError(
                    f"{self.host.name}: cannot read the journal of {self.unit} from cursor {cursor!r}: "
                    f"{result.stderr.strip().splitlines()[-1]}"
                )
            return LogChunk("", cursor, lost)  # exit 1 and silence: nothing new
        lines: list[str] = []
        new_cursor = cursor
        for raw in stdout.splitlines():
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError:
                continue
            entry_cursor = entry.get("__CURSOR", "")
            if entry_cursor == cursor:
                continue
            new_cursor = entry_cursor or new_cursor
            if self._replaced_invocation and entry.get("_SYSTEMD_INVOCATION_ID") == self._replaced_invocation:
                continue  # the replaced server's last words, not this start's (apply)
            lines.append(_message(entry.get("MESSAGE")))
        return LogChunk(self._redact("".join(line + "\n" for line in lines)), new_cursor, lost)

    def redact(self, text: str) -> str:
        """``text`` with every secret value this service knows masked (``[secret NAME]``)."""
        return self._redact(text)

    def logs_tail(self, n: int = 50) -> list[str]:
        result = self.host.run(["journalctl", "-q", "-u", self.unit, "-o", "cat", "--no-pager", "-n", str(int(n))])
        return self._redact.lines(result.stdout.splitlines())

    # -- marker, restore, leftovers ------------------------------------------------------------------------

    def _settled_state(self) -> ServiceState:
        """The state once no job is pending and the unit is not between states: a unit caught mid-restart is
        "deactivating" but about to run (systemd 252 sometimes shows no job in that moment)."""
        deadline = time.monotonic() + self.restart_timeout
        delay = 0.05
        while True:
            values = self._show()
            moving = values.get("Job") or values.get("ActiveState") in ("activating", "deactivating", "reloading")
            if not moving or time.monotonic() > deadline:
                return self._state(values)
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _ensure_marker(self) -> None:
        if self._marker_ready:
            return
        if read_json(self.host, self.marker_path) is not None:
            self._marker_ready = True  # a killed run's marker: it holds the original state; keep it
            return
        before = self._settled_state()
        q = shell_quote
        probe = self.host.run(
            f"set -e; mkdir -p -- {q(self.backup_dir)}; "
            f"d=0; f=0; u=0; "
            f"if [ -d {q(self.dropin_dir)} ]; then d=1; fi; "
            f"if [ -e {q(self.dropin_path)} ]; then f=1; "
            f"cp -p -- {q(self.dropin_path)} {q(self.backup_dir)}/dropin; fi; "
            f"if [ -e {q(self.unit_path)} ]; then u=1; cp -p -- {q(self.unit_path)} {q(self.backup_dir)}/unit; fi; "
            'echo "$d $f $u"'
        ).check(f"recording the state of {self.unit}", host=self.host.name)
        d, f, u = (bit == "1" for bit in probe.stdout.split())
        marker = {
            "version": MARKER_VERSION,
            "kind": "systemd",
            "unit": self.unit,
            "mode": self.mode,
            **controller_identity(),
            "label": self._label,
            "prior": {
                "active_state": before.active_state,
                "sub_state": before.sub_state,
                "load_state": before.load_state,
                "running": before.active_state in _RUNNING,
            },
            "dropin_dir_existed": d,
            "dropin_existed": f,
            "unit_file_existed": u,
        }
        write_json(self.host, self.marker_path, marker)
        self._marker_ready = True

    def _own_dropin(self) -> str | None:
        """The deployment the drop-in at ``dropin_path`` names when specsweep wrote it (its file name and its first
        line, ``_header``), else None: how a drop-in is found whose marker is gone (a controller killed while it
        wrote the marker, the marker removed by hand)."""
        if self.mode != "dropin":
            return None
        first = self.host.run(f"head -n 1 -- {shell_quote(self.dropin_path)} 2>/dev/null; true").stdout
        line = first.splitlines()[0] if first.strip() else ""
        if not line.startswith(_HEADER_PREFIX):
            return None
        return line[len(_HEADER_PREFIX) :].split(";", 1)[0].strip() or "?"

    def _restore_unmarked(self) -> bool:
        """Without a marker: undo a drop-in of ours (``_own_dropin``): the copy of the drop-in it replaced put back
        when the run's backup holds one, else the drop-in removed; its secrets and the backup removed; and the
        unit stopped, as it runs our configuration (the state before the run is unknown without the marker: it
        is left stopped)."""
        if self._own_dropin() is None:
            return False
        q, u = shell_quote, shell_quote(self.unit)
        saved, dropin = f"{q(self.backup_dir)}/dropin", q(self.dropin_path)
        self.host.run(f"systemctl stop {u}", timeout=self.stop_timeout)
        self.host.run(
            f"set -e\nif [ -e {saved} ]; then cp -p -- {saved} {dropin}.specsweep-restore && "
            f"mv -f -- {dropin}.specsweep-restore {dropin}\n"
            f"else rm -f -- {dropin}; rmdir -- {q(self.dropin_dir)} 2>/dev/null || true; fi\n"
            f"systemctl daemon-reload\nrm -f -- {q(self.secret_file)}\n"
            f"rmdir -- {q(self.secret_dir)} 2>/dev/null || true\n"
            f"systemctl reset-failed {u} 2>/dev/null || true\n"
            f"rm -rf -- {q(self.backup_dir)}; rmdir -- {q(self.state_dir)} 2>/dev/null || true\n"
        ).check(f"removing specsweep's drop-in of {self.unit}", host=self.host.name)
        return True

    def restore(self) -> bool:
        marker = read_json(self.host, self.marker_path)
        if marker is None:
            self._marker_ready = False
            return self._restore_unmarked()
        q, u = shell_quote, shell_quote(self.unit)
        prior = marker.get("prior", {})
        running = bool(prior.get("running"))
        if not running:  # stop while our configuration still describes the unit
            self.host.run(f"systemctl stop {u}", timeout=self.stop_timeout)
        steps = ["set -e"]
        if marker.get("dropin_existed"):
            steps.append(f"mkdir -p -- {q(self.dropin_dir)}")
            steps.append(f"cp -p -- {q(self.backup_dir)}/dropin {q(self.dropin_path)}.specsweep-restore")
            steps.append(f"mv -f -- {q(self.dropin_path)}.specsweep-restore {q(self.dropin_path)}")
        else:
            steps.append(f"rm -f -- {q(self.dropin_path)}")
        if not marker.get("dropin_dir_existed"):
            steps.append(f"rmdir -- {q(self.dropin_dir)} 2>/dev/null || true")
        if marker.get("mode") == "unit":
            if marker.get("unit_file_existed"):
                steps.append(f"cp -p -- {q(self.backup_dir)}/unit {q(self.unit_path)}.specsweep-restore")
                steps.append(f"mv -f -- {q(self.unit_path)}.specsweep-restore {q(self.unit_path)}")
            else:
                steps.append(f"rm -f -- {q(self.unit_path)}")
        steps.append("systemctl daemon-reload")
        steps.append(f"rm -f -- {q(self.secret_file)}; rmdir -- {q(self.secret_dir)} 2>/dev/null || true")
        self.host.run("\n".join(steps) + "\n").check(f"restoring {self.unit}", host=self.host.name)
        if running:
            self.host.run(f"systemctl reset-failed {u} 2>/dev/null; systemctl restart --no-block {u}").check(
                f"restarting {self.unit}", host=self.host.name
            )
        elif prior.get("active_state") != "failed":
            self.host.run(f"systemctl reset-failed {u} 2>/dev/null; true")
        self.host.run(
            f"rm -rf -- {q(self.backup_dir)} && rm -f -- {q(self.marker_path)} && "
            f"{{ rmdir -- {q(self.state_dir)} 2>/dev/null; true; }}"
        ).check(f"removing the marker of {self.unit}", host=self.host.name)
        self._marker_ready = False
        return True

    def find_leftovers(self) -> Leftover | None:
        marker = None if self._marker_ready else read_json(self.host, self.marker_path)
        lock = self._lock.read()
        if lock is not None and self._lock.held and lock.get("token") == self._lock.token:
            lock = None
        unmarked = self._own_dropin() if marker is None and not self._marker_ready else None
        if marker is None and lock is None and unmarked is None:
            return None
        stale, why = lock_is_stale(lock) if lock and not lock.get("corrupt") else (True, "")
        files = [self.marker_path] if marker else []
        if marker:
            files.append(self.unit_path if marker.get("mode") == "unit" else self.dropin_path)
        details = [why] if lock and why else []
        if unmarked is not None:
            files.append(self.dropin_path)
            details.append(
                f"specsweep's drop-in {self.dropin_path} (deployment {unmarked}) without its marker: restore removes "
                "it and stops the unit (its state before the run is unknown)"
            )
        return Leftover(
            host=self.host.name,
            service=self.unit,
            marker=marker,
            lock=lock,
            lock_stale=stale,
            detail="; ".join(details),
            files=files,
        )

    def recover(self) -> Leftover | None:
        leftover = self.find_leftovers()
        if leftover is None or (leftover.marker is None and self.dropin_path not in leftover.files):
            return None
        self.restore()
        return leftover

    def lock(self, label: str, *, break_lock: bool = False) -> None:
        self._label = label
        self._lock.acquire(label, break_lock=break_lock)

    def unlock(self) -> None:
        self._lock.release()
