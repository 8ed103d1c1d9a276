"""ProcessService: the server as a plain process, for hosts without systemd and for the local demo.

The command runs in its own session (``setsid``) under a tiny ``sh`` wrapper that records its exit code, with
stdout and stderr appended to a log file; stopping it signals the whole process group (TERM, then KILL after
``stop_timeout``). Byte offsets into the log serve as cursors. The pid file stores the pid and its start
time, so a recycled pid is never mistaken for the server.

Every command runs as the login user (:meth:`~orchestrator.hosts.ssh.SSHHost.as_login_user`): the server is
a plain process of that user, not root's, unless the host says ``sudo: always``.

What the server is started with goes to ``<name>.launch`` (mode 0600, written through the start script's
stdin) just before the start: the secrets (:mod:`orchestrator.services.secrets`) as ``NAME='value'`` lines,
the command (``program args``) as ``set -- ...``, and the environment as ``export K='V'`` commands in a function.
The wrapper reads it, removes it, puts each secret named by a whole word (``$NAME``) into the arguments, and
runs the server in a subshell that exports the environment and execs the program: the secrets are in the
server's environment, and no value the experiment gives (an inline ``HF_TOKEN``, an ``--api-key``) is on the
command line of the wrapper, of the script that starts it, or of anything between them and the server (an
``env K=V program`` would show the environment in ``ps`` until it execs), for as long as the server runs
or for an instant (issue 40). The server's own arguments are its own, as every process's are.
Log text the service returns has every secret value masked.

Files live in a state directory on the host (default ``~/.local/state/specsweep``): ``<name>.pid``,
``<name>.exit``, ``<name>.log`` (unless ``log_file`` is given; the log is kept after restore, for
post-mortems; mode 0600, since a server that refuses its arguments echoes them, secrets too),
``<name>.marker.json`` and ``<name>.lock``. The marker is written before the process starts, so a killed run's
server is found and stopped by the next run or ``specsweep restore``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError, ServiceError
from orchestrator.quoting import export_lines, shell_join, shell_quote, split_command
from orchestrator.services.base import Leftover, LogChunk, ServiceState
from orchestrator.services.hoststate import HostLock, controller_identity, lock_is_stale, read_json, write_json
from orchestrator.services.secrets import Redactor, env_file_text, reference, require_values

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment

__all__ = ["DEFAULT_STATE_DIR", "ProcessService"]

DEFAULT_STATE_DIR = "~/.local/state/specsweep"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# $0 = exit file, $1 = pid file (the wrapper's pid = the session and process-group id), $2 = the launch file,
# $3 = the secrets' names or "". The launch file (NAME='value' lines, ``set -- argv``, then the function
# _ENVIRONMENT of ``export K='V'`` commands) is read with allexport, so the secrets reach the server's
# environment, and removed at once; a word that is exactly ${NAME} for one of those names becomes that value
# (eval of a validated name only: never of a value). The environment is exported in the server's subshell
# only, just before its exec: a PATH or IFS it sets changes neither the rm nor the loop above.
_WRAPPER = r"""echo $$ > "$1"; s=$2; n=$3; shift 3
set -a; . "$s"; set +a; rm -f -- "$s"
if [ -n "$n" ]; then
  i=$#
  while [ "$i" -gt 0 ]; do
    a=$1; shift
    for v in $n; do if [ "$a" = "\${$v}" ]; then eval "a=\${$v}"; fi; done
    set -- "$@" "$a"; i=$((i - 1))
  done
fi
(specsweep_environment; exec "$@"); echo $? > "$0"
"""
_ENVIRONMENT = "specsweep_environment"  # the function the wrapper's last line calls
# Prints "alive", "exit N" or "gone" for a pid and its recorded start time.
_PROBE = """p={pid}; s={start}
if [ -r /proc/$p/stat ]; then
  st=$(sed 's/.*) //' /proc/$p/stat)
  set -- $st
  if [ "$1" != Z ] && [ "${{20}}" = "$s" ]; then echo alive; exit 0; fi
fi
if [ -s {exit_file} ]; then echo "exit $(cat {exit_file})"; else echo gone; fi
"""

# "alive" when a process other than a zombie has process group {pgid} (/proc/PID/stat after the command's ") ":
# state, ppid, pgrp). cat reads the stat files, not awk: a process that ends between the glob and its file's
# opening makes Debian's awk (mawk) stop at that file, and the group was then called gone while it ran (seen
# on a busy CI machine); cat goes on to the next file.
_GROUP_ALIVE = """cat /proc/[0-9]*/stat 2>/dev/null | \\
awk '{{ sub(/.*[)] /, ""); if ($1 != "Z" && $3 == {pgid}) {{ print "alive"; exit }} }}'; true
"""

# The process the pid file names, as "pid start", if it is alive and is this service's wrapper (its command
# line holds the pid file's path); nothing otherwise. A run killed between starting the server and recording
# it in the marker leaves only the pid file (the wrapper writes it first thing): this finds that server.
_FROM_PID_FILE = """f={pid_file}
[ -s "$f" ] || exit 0
read p < "$f" || exit 0
case "$p" in ''|*[!0-9]*) exit 0;; esac
[ -r /proc/$p/stat ] || exit 0
tr '\\000' '\\n' < /proc/$p/cmdline 2>/dev/null | grep -qxF -- "$f" || exit 0
st=$(sed 's/.*) //' /proc/$p/stat); set -- $st
[ "$1" != Z ] && echo "$p ${{20}}"
true
"""


class ProcessService:
    """A server started as a process in its own session, with a pid file and a log file."""

    def __init__(
        self,
        host: Host,
        name: str = "server",
        *,
        workdir: str | None = None,
        log_file: str | None = None,
        stop_timeout: float = 30.0,
        state_dir: str = DEFAULT_STATE_DIR,
        secrets: Mapping[str, Any] | None = None,
        redact: Mapping[str, str] | None = None,
    ) -> None:
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{name!r} is not a valid process service name (letters, digits, _.- only)")
        # The server runs as the user who logs in: never through sudo, whatever the host's sudo policy does for
        # systemd (an SSH host's ``sudo: always`` asks for root, and then as_login_user is the host itself).
        login_user = getattr(host, "as_login_user", None)
        self.host = login_user() if callable(login_user) else host
        self.name = name
        self.workdir = workdir
        self.stop_timeout = stop_timeout
        self._state_dir_spec = state_dir
        self._log_file_spec = log_file
        self._resolved: dict[str, str] | None = None
        self._lock: HostLock | None = None
        self._label = ""
        self._marker_ready = False
        self._stopped_by_us = False
        self._current: dict[str, Any] | None = None
        self.start_cursor: str | None = None
        # Secrets: name -> value (a SecretStr, None when never read); redact: more values to mask in log text.
        self.secrets = dict(secrets or {})
        known = {k: v.get_secret_value() for k, v in self.secrets.items() if hasattr(v, "get_secret_value")}
        self._redact = Redactor({**dict(redact or {}), **known})

    def __repr__(self) -> str:
        return f"ProcessService({self.host.name!r}, {self.name!r})"

    # -- paths ---------------------------------------------------------------------------------------------

    def _paths(self) -> dict[str, str]:
        if self._resolved is None:
            home = ""
            if self._state_dir_spec.startswith("~") or (self._log_file_spec or "").startswith("~"):
                home = self.host.run('printf %s "$HOME"').check("reading $HOME", host=self.host.name).stdout
            state = self._expand(self._state_dir_spec, home).rstrip("/")
            log = self._expand(self._log_file_spec, home) if self._log_file_spec else f"{state}/{self.name}.log"
            self._resolved = {
                "state": state,
                "pid": f"{state}/{self.name}.pid",
                "exit": f"{state}/{self.name}.exit",
                "log": log,
                "marker": f"{state}/{self.name}.marker.json",
                "lock": f"{state}/{self.name}.lock",
                "launch": f"{state}/{self.name}.launch",
            }
        return self._resolved

    @staticmethod
    def _expand(path: str, home: str) -> str:
        if path == "~" or path.startswith("~/"):
            return home + path[1:]
        return path

    @property
    def log_path(self) -> str:
        return self._paths()["log"]

    def _host_lock(self) -> HostLock:
        if self._lock is None:
            self._lock = HostLock(self.host, self._paths()["lock"], service=self.name)
        return self._lock

    # -- configuration -------------------------------------------------------------------------------------

    def command_line(self, deployment: Deployment) -> list[str]:
        """The server's argv (program and arguments, a secret's word as ``${NAME}``); validates every value."""
        if deployment.command is None:
            raise ServiceError(f"deployment {deployment.id} has no command for the process service")
        argv = split_command(deployment.command, what="the process command")
        if "=" in argv[0]:
            raise ConfigError(f"the program {argv[0]!r} contains '='; give the program's path first")
        if reference(argv[0], self.secrets):
            raise ConfigError("the program itself cannot be a secret; give its path first", key="service.command")
        # A word naming a secret goes as ${NAME}, which the wrapper replaces by the value (see _WRAPPER).
        return [f"${{{name}}}" if (name := reference(w, self.secrets)) else w for w in argv]

    def launch_text(self, deployment: Deployment) -> str:
        """The launch file the wrapper reads (see _WRAPPER): the secrets, the argv, the environment."""
        argv = self.command_line(deployment)
        secrets = env_file_text(require_values(self.secrets)) if self.secrets else ""
        exports = "".join(line + "\n" for line in export_lines(deployment.environment))
        return secrets + f"set -- {shell_join(argv)}\n{_ENVIRONMENT}() {{\n{exports}:\n}}\n"

    def apply(self, deployment: Deployment) -> None:
        launch = self.launch_text(deployment)
        paths = self._paths()
        self._ensure_marker()
        self._stop_current()
        q = shell_quote
        cd = f"cd -- {q(self.workdir)}\n" if self.workdir else ""
        script = (
            f'set -e\nmkdir -p -- {q(paths["state"])} "$(dirname -- {q(paths["log"])})"\n'
            f"rm -f -- {q(paths['exit'])} {q(paths['pid'])} {q(paths['launch'])}\n"
            # The server's output may echo its arguments (a refused --api-key): the log is its user's alone.
            f"(umask 077; : >> {q(paths['log'])})\nchmod go-rwx -- {q(paths['log'])} 2>/dev/null || :\n"
            f"(umask 077; cat > {q(paths['launch'])})\n"  # the launch file, from stdin: no value on a command line
            f"offset=$(wc -c < {q(paths['log'])})\n{cd}"
            f"setsid sh -c {q(_WRAPPER)} {q(paths['exit'])} {q(paths['pid'])} {q(paths['launch'])} "
            f"{q(' '.join(self.secrets))} "
            f">> {q(paths['log'])} 2>&1 < /dev/null &\n"
            "pid=$!\n"
            "start=$(sed 's/.*) //' /proc/$pid/stat | cut -d' ' -f20)\n"
            'echo "$pid $start $offset"\n'
        )
        # Starting a server twice would leave one behind: never retried after a dropped connection.
        result = self.host.run(script, input=launch, idempotent=False)
        result.check(f"starting {self.name}", host=self.host.name)
        try:
            pid_text, start, offset = result.stdout.split()
            pid = int(pid_text)
        except ValueError as exc:
            raise ServiceError(f"{self.host.name}: unexpected answer starting {self.name}: {result.stdout!r}") from exc
        self._current = {"pid": pid, "start": start, "log_offset": int(offset), "deployment": deployment.id}
        self.start_cursor = offset
        self._stopped_by_us = False
        marker = read_json(self.host, paths["marker"]) or {}
        marker["process"] = self._current
        write_json(self.host, paths["marker"], marker)

    def _ensure_marker(self) -> None:
        if self._marker_ready:
            return
        paths = self._paths()
        if read_json(self.host, paths["marker"]) is None:
            write_json(
                self.host,
                paths["marker"],
                {
                    "version": 1,
                    "kind": "process",
                    "name": self.name,
                    **controller_identity(),
                    "label": self._label,
                    "process": None,
                },
            )
        self._marker_ready = True

    # -- observing -----------------------------------------------------------------------------------------

    def _probe(self, process: dict[str, Any]) -> str:
        script = _PROBE.format(
            pid=int(process["pid"]),
            start=shell_quote(str(process["start"])),
            exit_file=shell_quote(self._paths()["exit"]),
        )
        return self.host.run(script).stdout.strip()

    def state(self) -> ServiceState:
        process = self._current
        if process is None:
            return ServiceState(active_state="inactive", sub_state="dead")
        answer = self._probe(process)
        pid = int(process["pid"])
        invocation = f"{pid}-{process['start']}"
        stamp = int(process["start"]) if str(process["start"]).isdigit() else 0
        if answer == "alive":
            return ServiceState("active", "running", "success", None, 0, pid, invocation, start_stamp=stamp)
        if answer.startswith("exit "):
            code = int(answer.split()[1]) if answer.split()[1].lstrip("-").isdigit() else -1
            if code == 0:
                return ServiceState("inactive", "dead", "success", 0, 0, None, invocation, start_stamp=stamp)
            return ServiceState("failed", "failed", "exit-code", code, 0, None, invocation, start_stamp=stamp)
        if self._stopped_by_us:
            return ServiceState("inactive", "dead", "success", None, 0, None, invocation, start_stamp=stamp)
        return ServiceState("failed", "failed", "signal", None, 0, None, invocation, start_stamp=stamp)

    def journal_cursor(self) -> str:
        log = shell_quote(self._paths()["log"])
        # -f: a regular file only (wc -c of a FIFO waits for a writer for ever, of /dev/zero never ends)
        result = self.host.run(
            f"if [ -f {log} ]; then wc -c < {log}; elif [ -e {log} ]; then echo special; else echo 0; fi"
        )
        answer = result.stdout.strip() or "0"
        if not answer.isdigit():
            raise ServiceError(
                f"{self.host.name}: the log of {self.name} ({self._paths()['log']}) is not a regular file"
            )
        return answer

    def journal_since(self, cursor: str) -> LogChunk:
        start = int(cursor) if cursor.strip().isdigit() else 0
        log = shell_quote(self._paths()["log"])
        result = self.host.run(
            f"if [ -f {log} ]; then s=$(wc -c < {log} 2>/dev/null || echo 0); else s=0; fi; c={start}; "
            'if [ "$s" -lt "$c" ]; then c=0; fi; '  # the log was truncated or replaced: start over
            'echo "$s $c"; '
            f'[ "$s" -gt "$c" ] && tail -c +$((c + 1)) {log} | head -c $((s - c)); true'
        )
        head, _, body = result.stdout_bytes.partition(b"\n")
        try:
            _size, begin = (int(x) for x in head.split())
        except ValueError as exc:
            raise ServiceError(
                f"{self.host.name}: cannot read the log of {self.name}: {result.stderr.strip()}"
            ) from exc
        # Only whole lines: a line still being written belongs to the next window.
        end = body.rfind(b"\n") + 1
        lost = None
        if begin < start:  # the file is shorter than the cursor: truncated or replaced (logrotate's copytruncate)
            lost = (
                f"the log file is {_size} bytes, shorter than the window's start at byte {start}: it was truncated "
                "or replaced while the window was open, and the lines written before that are gone"
            )
        return LogChunk(self._redact(body[:end].decode("utf-8", "replace")), str(begin + end), lost)

    def redact(self, text: str) -> str:
        """``text`` with every secret value this service knows masked (``[secret NAME]``)."""
        return self._redact(text)

    def logs_tail(self, n: int = 50) -> list[str]:
        result = self.host.run(["tail", "-n", str(int(n)), self._paths()["log"]])
        return self._redact.lines(result.stdout.splitlines())

    # -- stopping, restore, leftovers ----------------------------------------------------------------------

    def _stop(self, process: dict[str, Any]) -> None:
        """TERM the process group, wait up to stop_timeout until none of it is left, then KILL it. The whole
        group, not its leader only: children outlive it (SGLang's scheduler and detokenizer exit seconds after
        its launcher, holding the server's port meanwhile)."""
        pid = int(process["pid"])
        if self._probe(process) != "alive":  # its group id may be another's by now: not touched
            return
        self.host.run(f"kill -TERM -{pid} 2>/dev/null; true")
        deadline = time.monotonic() + self.stop_timeout
        delay = 0.05
        while time.monotonic() < deadline:
            if self._probe(process) != "alive" and not self._group_alive(pid):
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        self.host.run(f"kill -KILL -{pid} 2>/dev/null; true")
        # KILL is not refused, but takes effect only once each process next runs: wait (briefly) until it has.
        deadline = time.monotonic() + 5.0
        while self._group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _group_alive(self, pgid: int) -> bool:
        """Whether a process of group ``pgid`` (the server's session: setsid made its leader's pid the group's id)
        is still running; zombies waiting for their parent to reap them are not."""
        return self.host.run(_GROUP_ALIVE.format(pgid=int(pgid))).stdout.strip() == "alive"

    def _stop_current(self) -> None:
        if self._current is not None:
            self._stopped_by_us = True
            self._stop(self._current)

    def restore(self) -> bool:
        paths = self._paths()
        marker = read_json(self.host, paths["marker"])
        # The pid file records the server apart from the marker: one it started is found and stopped without
        # the marker (removed by hand after a kill left it torn: issue 49).
        unrecorded = self._from_pid_file()
        if marker is None and self._current is None and unrecorded is None:
            self._marker_ready = False
            return False
        process = (marker or {}).get("process") or self._current
        if process:
            self._stopped_by_us = True
            self._stop(process)
        if unrecorded is not None and (not process or int(process["pid"]) != unrecorded["pid"]):
            self._stopped_by_us = True
            self._stop(unrecorded)
        q = shell_quote
        self.host.run(
            f"rm -f -- {q(paths['pid'])} {q(paths['exit'])} {q(paths['launch'])} {q(paths['marker'])}; "
            f"rmdir -- {q(paths['state'])} 2>/dev/null; true"
        )
        self._marker_ready = False
        return True

    def _from_pid_file(self) -> dict[str, Any] | None:
        """The server the pid file names when it is alive and ours (see ``_FROM_PID_FILE``), else None."""
        answer = self.host.run(_FROM_PID_FILE.format(pid_file=shell_quote(self._paths()["pid"]))).stdout.split()
        if len(answer) != 2 or not answer[0].isdigit():
            return None
        return {"pid": int(answer[0]), "start": answer[1]}

    def find_leftovers(self) -> Leftover | None:
        paths = self._paths()
        marker = None if self._marker_ready else read_json(self.host, paths["marker"])
        lock_obj = self._host_lock()
        lock = lock_obj.read()
        if lock is not None and lock_obj.held and lock.get("token") == lock_obj.token:
            lock = None
        running = self._from_pid_file() if marker is None and lock is None else None
        if marker is None and lock is None and running is None:
            return None
        stale, why = lock_is_stale(lock) if lock and not lock.get("corrupt") else (True, "")
        detail = why if lock else ""
        process = (marker or {}).get("process") or running or (self._from_pid_file() if marker is not None else None)
        if process:
            alive = self._probe(process) == "alive"
            detail = f"process {process['pid']} {'still running' if alive else 'gone'}" + (f"; {why}" if lock else "")
        return Leftover(
            host=self.host.name,
            service=self.name,
            marker=marker,
            lock=lock,
            lock_stale=stale,
            detail=detail,
            files=[paths["marker"]] if marker else [],
        )

    def recover(self) -> Leftover | None:
        leftover = self.find_leftovers()
        if leftover is None or (leftover.marker is None and leftover.lock is not None):
            return None
        self.restore()
        return leftover

    def lock(self, label: str, *, break_lock: bool = False) -> None:
        self._label = label
        self._host_lock().acquire(label, break_lock=break_lock)

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
