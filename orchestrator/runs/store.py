"""The run directory: where a sweep writes everything it learns, and where analysis reads it back.

Layout of ``results/<experiment>/<YYYYmmddTHHMMSSZ>-<short id>/`` (the directory name is the run id)::

    run.json           schema_version, specsweep version, controller, started_at/ended_at, state, run_id
    experiment.yaml    the resolved experiment (secrets already redacted by the caller)
    plan.json          the plan (``Plan.to_json_dict()``)
    records.jsonl      one ``Record`` per finished point, appended, flushed and fsynced as it exists
    events.jsonl       deploy / health / restore events with times, appended the same way
    windows/           raw server text of each load point's window
    requests/          one ``<point id>.jsonl`` per point: each measured request (send time, TTFT, gaps, tokens,
                       per-response speculative figures, error), what the point's intervals were computed from
    lossless/          one ``<deployment id>.jsonl`` per deployment: the lossless check's answers
    provenance.json    how the run was made: specsweep and its git revision, the experiment file's hash, and per
                       host and deployment the engine, the command running on the host and the GPUs
    superseded.jsonl   records a ``--resume --redo-changed`` took out of the run (its configuration changed)
    records.index.jsonl  each record's identity, status and client counts, for ``ls`` (runs/recordindex.py)

The run's ``state`` in ``run.json``: ``running``; ``done`` (the plan ran to its end; ``points`` counts the
points that are ``ok`` and ``failed``); ``failed`` (the plan ran to its end and no point succeeded, or the run
ended on an error: a host unreachable, a full disk); ``stopped`` (the experiment's ``failure_policy``
stopped it, ``stop_reason`` says why); ``interrupted`` (Ctrl-C or SIGTERM). ``experiment_file`` and ``hosts``
say which experiment file ran against which hosts, for ``--resume latest``.

Records are append-only: a retried point gets a new line with a higher ``attempt`` and the last line for a
(host, point id) wins. A line torn by ``kill -9`` in the middle of a write is skipped on load and counted in
``RunStore.skipped_lines``; the next append first terminates it with a newline so it can never swallow a good
record. Every OS error (disk full, permission, a missing directory) becomes a ``StoreError`` naming the path.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import json
import os
import re
import secrets
import shutil
import socket
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator import __version__
from orchestrator.errors import StoreError
from orchestrator.files import NotReadable, bounded_lines, read_bounded, write_atomic
from orchestrator.redaction import redact, redact_json_line, redact_text
from orchestrator.runs.listing import find_latest, next_sequence, run_directories
from orchestrator.runs.reading import confined, parse_json
from orchestrator.runs.record import (
    RUN_SCHEMA_VERSION,
    Record,
    SkippedLine,
    read_record_line,
    refuse_schema,
    share_strings,
)
from orchestrator.runs.recordindex import INDEX_NAME, append_index, index_line
from orchestrator.runs.runlock import RunLock

__all__ = [
    "RUN_SCHEMA_VERSION",
    "Record",
    "ResumeState",
    "RunInfo",
    "RunState",
    "RunStore",
    "SkippedLine",
    "discard_run",
    "find_latest",
    "is_run_directory",
    "read_json_lines",
    "read_record_line",
    "run_directories",
    "utc_now_iso",
]


#: The most of run.json, plan.json, experiment.yaml or another JSON file of a run read whole (a plan of 20,000
#: points is tens of megabytes); more is refused, as is anything that is not a regular file.
MAX_JSON_BYTES = 256 * 1024 * 1024

RunState = Literal["running", "done", "interrupted", "failed", "stopped"]
_FINAL_STATES = ("done", "interrupted", "failed", "stopped")
_SAFE_NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")


def utc_now_iso() -> str:
    """Now, as ISO 8601 UTC with milliseconds and a ``Z`` (the time format of every store file)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Controller(BaseModel):
    model_config = ConfigDict(extra="allow")

    hostname: str
    user: str


class RunInfo(BaseModel):
    """The content of ``run.json``."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = RUN_SCHEMA_VERSION
    specsweep_version: str = __version__
    run_id: str
    experiment: str
    controller: Controller
    started_at: str
    ended_at: str | None = None
    state: RunState = "running"
    # Each ``--resume`` that reopened this run, in order.
    resumed_at: list[str] = Field(default_factory=list)
    # Why the failure policy stopped the run (state ``stopped``).
    stop_reason: str | None = None
    # Points of the plan by the status of their last record ({"planned", "ok", "failed"}), at the run's end.
    points: dict[str, int] | None = None
    # The experiment file (absolute path) and the hosts (``name (how it is reached)``) the run was made with.
    experiment_file: str | None = None
    hosts: list[str] = Field(default_factory=list)
    # The run's place among the runs of its results root, 1 + the largest there when it was made: "latest"
    # follows it, not the wall clock, which can step back (runs made before it had none: they sort first).
    sequence: int | None = None
    # What made the run (orchestrator/runs/identity.py RUN_KINDS); None in runs made before it was kept.
    kind: Literal["sweep", "search", "playbook"] | None = None


@dataclass
class ResumeState:
    """What a run directory holds when a run opens, read once, and kept up to date in memory as the run goes.

    ``latest``: the last record of each (host, point id), in order of first appearance (what the run's
    figures and counts read); ``attempts``: the highest attempt of each (host, point id), superseded records
    included, so a point measured again never reuses an earlier attempt's number or window file; ``final``:
    the (host, point id) pairs not to run again, ``ok`` ones, and ``failed`` ones unless ``retry_failed``.
    A new run starts from :meth:`empty`; :meth:`add` takes every record the run appends.
    """

    latest: dict[tuple[str, str], Record] = field(default_factory=dict)
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    final: set[tuple[str, str]] = field(default_factory=set)
    retry_failed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def empty(cls, *, retry_failed: bool = False) -> ResumeState:
        return cls(retry_failed=retry_failed)

    @classmethod
    def from_records(
        cls, records: Iterable[Record], superseded: Iterable[Record] = (), *, retry_failed: bool = False
    ) -> ResumeState:
        state = cls(retry_failed=retry_failed)
        for record in superseded:
            state._count(record)
        for record in records:
            state.latest[record.key] = record
            state._count(record)
        final_statuses = {"ok"} if retry_failed else {"ok", "failed"}
        state.final = {key for key, rec in state.latest.items() if rec.status in final_statuses}
        return state

    def _count(self, record: Record) -> None:
        self.attempts[record.key] = max(self.attempts.get(record.key, 0), record.attempt)

    def add(self, record: Record) -> None:
        """A record this run appended to the store: the last of its point, and final (a point that failed
        again is not retried twice in one run)."""
        with self._lock:
            self.latest.pop(record.key, None)  # the order of first appearance stays the store's
            self.latest[record.key] = record
            self._count(record)
            if record.status != "skipped":
                self.final.add(record.key)

    def supersede(self, keys: set[tuple[str, str]]) -> None:
        """The records of ``keys`` left the run (``RunStore.supersede``); their attempts still count."""
        with self._lock:
            for key in keys:
                self.latest.pop(key, None)
                self.final.discard(key)

    def next_attempt(self, host: str, point_id: str) -> int:
        """The attempt number the next record of (host, point id) carries (and it is now taken)."""
        with self._lock:
            key = (host, point_id)
            self.attempts[key] = self.attempts.get(key, 0) + 1
            return self.attempts[key]


def _configuration_texts(resolved_experiment: dict[str, Any] | str, plan_json: dict[str, Any]) -> tuple[str, str]:
    """experiment.yaml's and plan.json's texts, every inline secret redacted (orchestrator/redaction.py). The plan
    first: a ``vars`` or matrix value is found as a secret where the plan renders it (``--api-key VALUE``,
    ``HF_TOKEN=VALUE``), then masked by value in the experiment, where it stands as a bare value (issue 49)."""
    plan_text = json.dumps(redact(plan_json), indent=2, default=str) + "\n"
    if isinstance(resolved_experiment, str):
        experiment_text = redact_text(resolved_experiment)
    else:
        experiment_text = yaml.safe_dump(redact(resolved_experiment), sort_keys=False, allow_unicode=True)
    return experiment_text, plan_text


def discard_run(path: Path) -> None:
    """Remove a run directory this controller made and measured nothing in (a sweep refused by a host's lock
    before its first point): left behind, it is what ``--resume latest`` would pick."""
    shutil.rmtree(path, ignore_errors=True)


def _store_error(action: str, path: Path, exc: OSError) -> StoreError:
    reason = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))
    return StoreError(f"cannot {action} {path}: {reason}")


def _fsync_dir(path: Path) -> None:
    # Makes a newly created or renamed entry survive a power loss, not only a process kill.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_bytes(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _lines(target: Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of ``target`` with their numbers; none when it is missing."""
    try:
        for number, line in enumerate(bounded_lines(target), start=1):
            text = line.decode("utf-8", errors="replace").strip().strip("\x00").strip()
            if text:  # a crash's NUL-filled tail is blank, not a line
                yield number, text
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _store_error("read", target, exc) from exc


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, one a line (unreadable lines skipped); [] when it is missing."""
    out: list[dict[str, Any]] = []
    for _number, text in _lines(path):
        try:
            value = parse_json(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _write_atomic(path: Path, text: str) -> None:
    write_atomic(path, text, fsync=True)  # a fresh temporary name: never written through a link planted there


def _overwrite_in_place(path: Path, data: bytes) -> bool:
    """Write ``data`` over ``path`` within the blocks it already has (not atomic: the fallback of a full disk,
    where no new file can be made). False when the file is missing or too small to hold ``data``."""
    with contextlib.suppress(OSError):
        path.with_name(f".{path.name}.tmp").unlink()
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_blocks * 512 < len(data):
            return False
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _safe_name(text: str) -> str:
    cleaned = _SAFE_NAME_RE.sub("_", text).strip("._")
    return cleaned or "_"


def _read_json(path: Path) -> Any:
    try:
        return parse_json(read_bounded(path, MAX_JSON_BYTES).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except FileNotFoundError as exc:
        raise StoreError(f"{path.parent}: not a run directory (no {path.name})") from exc
    except OSError as exc:
        raise _store_error("read", path, exc) from exc
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc


class RunStore:
    """One run directory, for writing (the runner) and reading (resume, analysis, reports).

    Appends are serialised by a lock, so several host workers may share one store.
    """

    def __init__(self, path: Path, info: RunInfo) -> None:
        self.path = path
        self._info = info
        self._lock = threading.Lock()
        self._tail_checked = False
        self.skipped_lines: list[SkippedLine] = []
        self._run_lock: RunLock | None = None

    # ---- creating and opening -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        root: str | Path,
        experiment_name: str,
        resolved_experiment: dict[str, Any] | str,
        plan_json: dict[str, Any],
        *,
        now: datetime | None = None,
        experiment_file: str | None = None,
        hosts: list[str] | None = None,
        kind: Literal["sweep", "search", "playbook"] | None = None,
    ) -> RunStore:
        """Make ``root/<experiment>/<UTC time>-<short id>/`` with its files, state ``running``."""
        started = now or datetime.now(UTC)
        base = Path(root) / _safe_name(experiment_name)
        try:
            base.mkdir(parents=True, exist_ok=True)
            for _ in range(20):
                run_id = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
                path = base / run_id
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    continue
            else:  # pragma: no cover - 20 collisions of 24 random bits within one second
                raise StoreError(f"cannot create a new run directory under {base}")
        except OSError as exc:
            raise _store_error("create a run directory under", base, exc) from exc
        # Before its first file: a `--resume latest` elsewhere may find the directory the moment it exists.
        run_lock = RunLock.take(path)
        info = RunInfo(
            run_id=run_id,
            experiment=experiment_name,
            controller=Controller(hostname=socket.gethostname(), user=_user()),
            started_at=started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            experiment_file=experiment_file,
            hosts=list(hosts or []),
            sequence=next_sequence(Path(root)),
            kind=kind,
        )
        store = cls(path, info)
        store._run_lock = run_lock
        experiment_text, plan_text = _configuration_texts(resolved_experiment, plan_json)
        try:
            (path / "windows").mkdir()
            _write_atomic(path / "experiment.yaml", experiment_text)
            _write_atomic(path / "plan.json", plan_text)
            for name in ("records.jsonl", "events.jsonl"):
                (path / name).touch()
            store._write_info()
            _fsync_dir(base)
        except OSError as exc:
            raise _store_error("write the run directory", path, exc) from exc
        store._tail_checked = True
        return store

    @classmethod
    def open(cls, path: str | Path) -> RunStore:
        """Open an existing run directory, refusing one whose schema version this specsweep cannot read."""
        path = Path(path)
        raw = _read_json(path / "run.json")
        if not isinstance(raw, dict):
            raise StoreError(f"{path / 'run.json'}: expected a JSON object")
        if raw.get("schema_version") != RUN_SCHEMA_VERSION:
            raise refuse_schema(raw.get("schema_version"), path)
        try:
            info = RunInfo.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise StoreError(f"{path / 'run.json'}: {where}: {first['msg']}") from exc
        return cls(path, info)

    @classmethod
    def resolve(cls, ref: str | Path, root: str | Path, experiment: str) -> RunStore:
        """Open ``ref``: a run directory path, or ``latest`` for the newest run of ``experiment``."""
        if str(ref) == "latest":
            return cls.open(find_latest(root, experiment))
        return cls.open(ref)

    def hold(self) -> None:
        """Take the run lock before this controller writes anything (orchestrator/runs/runlock.py):
        RunLockedError, with nothing changed, when another specsweep is writing the run."""
        if self._run_lock is None or not self._run_lock.held:
            self._run_lock = RunLock.take(self.path)

    def release(self) -> None:
        """Give the run lock back at the run's end (idempotent)."""
        if self._run_lock is not None:
            self._run_lock.release()

    def _still_ours(self) -> None:
        """Before a write of a held run: StoreError when its directory was moved or removed meanwhile
        (:meth:`orchestrator.runs.runlock.RunLock.check`: nothing is written into a new copy at the old path)."""
        if self._run_lock is not None:
            self._run_lock.check()

    # ---- what the run is -------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._info.run_id

    @property
    def resume_command(self) -> str:
        """The whole command that continues this run, as printed (``ls`` shows an interrupted run with it): a run
        made by ``verify-schedule`` is continued by ``verify-schedule --resume RUN``, which sets the variables its
        experiment reads inline secrets from (:func:`orchestrator.runs.liveness.resume_hint`)."""
        from orchestrator.runs.liveness import resume_hint

        return resume_hint(self.path, self.info.experiment_file)

    @property
    def info(self) -> RunInfo:
        return self._info

    def experiment_text(self) -> str:
        try:
            return read_bounded(self.path / "experiment.yaml", MAX_JSON_BYTES).decode("utf-8", errors="replace")
        except OSError as exc:
            raise _store_error("read", self.path / "experiment.yaml", exc) from exc

    def experiment(self) -> dict[str, Any]:
        """The resolved experiment as stored (a plain dict; ``{}`` when the file is empty).

        Read with the limits experiment files get (size, aliases expanded, nesting, usable text): a run
        directory may come from anywhere (a colleague's tarball), and resume, report and baselines_from read it.
        """
        from orchestrator.errors import ConfigError
        from orchestrator.experiment.yamlsource import load_yaml_with_positions

        try:
            data, _positions = load_yaml_with_positions(self.path / "experiment.yaml")
        except ConfigError as exc:
            raise StoreError(f"the run's experiment.yaml cannot be read: {exc}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise StoreError(f"{self.path / 'experiment.yaml'}: expected a mapping")
        return data

    def plan(self) -> dict[str, Any]:
        data = _read_json(self.path / "plan.json")
        if not isinstance(data, dict):
            raise StoreError(f"{self.path / 'plan.json'}: expected a JSON object")
        return data

    # ---- writing -----------------------------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Append one record as one line, flushed and fsynced before returning."""
        self._still_ours()
        line = redact_json_line(record.model_dump_json()) + "\n"
        data = line.encode("utf-8")
        target = self.path / "records.jsonl"
        with self._lock:
            self._terminate_torn_tail(target)
            try:
                start = target.stat().st_size if target.exists() else 0
                _append_bytes(target, data)
            except OSError as exc:
                raise _store_error("append a record to", target, exc) from exc
            # The few fields ls counts, beside it (runs/recordindex.py): whether the store's own reading keeps
            # the line, and its bytes, so a reader trusts the index only where it is the whole file's.
            kept = isinstance(read_record_line(line, 0, target), Record)
            append_index(self.path, index_line(line, start, start + len(data), kept=kept))

    def event(self, kind: str, **fields: Any) -> None:
        """Append one event (``deploy``, ``healthy``, ``restore``, ...) with the current time."""
        self._still_ours()
        entry = redact({"time": utc_now_iso(), "kind": kind, **fields})
        target = self.path / "events.jsonl"
        data = (json.dumps(entry, default=str) + "\n").encode("utf-8")
        with self._lock:
            try:
                _append_bytes(target, data)
            except OSError as exc:
                raise _store_error("append an event to", target, exc) from exc

    def write_window(self, point_id: str, text: str, *, host: str | None = None, attempt: int = 1) -> str:
        """Keep the raw server text of one window; returns its path relative to the run directory.

        ``windows/<point id>.log``; with ``host`` (a pool, where baselines run on every host)
        ``windows/<host>/<point id>.log``; a retry's window gets ``.attempt<N>`` so it never hides the first.
        """
        self._still_ours()
        rel = Path("windows")
        if host is not None:
            rel = rel / _safe_name(host)
        name = _safe_name(point_id) + (f".attempt{attempt}" if attempt > 1 else "") + ".log"
        rel = rel / name
        target = self.path / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(target, redact_text(text))
        except OSError as exc:
            raise _store_error("write the window", target, exc) from exc
        return rel.as_posix()

    def write_lines(
        self, folder: str, name: str, rows: Iterable[dict[str, Any]], *, host: str | None = None, attempt: int = 1
    ) -> str:
        """Keep ``rows`` as ``<folder>/[<host>/]<name>[.attemptN].jsonl`` (one JSON object a line, written
        atomically); returns the path relative to the run directory (``requests/``, ``lossless/``)."""
        self._still_ours()
        rel = Path(folder)
        if host is not None:
            rel = rel / _safe_name(host)
        rel = rel / (_safe_name(name) + (f".attempt{attempt}" if attempt > 1 else "") + ".jsonl")
        target = self.path / rel
        # A server's answer may echo what it was sent (a 401 body quoting the Authorization header).
        text = "".join(json.dumps(redact(row), default=str, separators=(",", ":")) + "\n" for row in rows)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(target, text)
        except OSError as exc:
            raise _store_error("write", target, exc) from exc
        return rel.as_posix()

    def read_lines(self, rel: str) -> list[dict[str, Any]]:
        """The JSON objects of a file ``write_lines`` wrote (unreadable lines skipped); [] when it is missing."""
        return read_json_lines(confined(self.path, rel))

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        """Write ``name`` (a file in the run directory, e.g. ``provenance.json``) atomically."""
        self._still_ours()
        target = self.path / name
        with self._lock:
            try:
                _write_atomic(target, json.dumps(redact(data), indent=2, default=str) + "\n")
            except OSError as exc:
                raise _store_error("write", target, exc) from exc

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON object file of the run directory, or None when it is missing or unreadable."""
        try:
            value = parse_json(read_bounded(self.path / name, MAX_JSON_BYTES).decode("utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def set_state(
        self, state: RunState, *, stop_reason: str | None = None, points: dict[str, int] | None = None
    ) -> None:
        """Record the run's state; a final state stamps ``ended_at``, ``running`` again counts a resume.

        ``stop_reason`` (state ``stopped``) and ``points`` (the plan's points by status) are kept with a final
        state; ``running`` clears them."""
        self._still_ours()
        with self._lock:
            info = self._info.model_copy(deep=True)
            if state == "running":
                if info.state != "running" or info.ended_at is not None:
                    info.resumed_at.append(utc_now_iso())
                info.ended_at = None
                info.stop_reason = None
                info.points = None
            elif state in _FINAL_STATES:
                info.ended_at = utc_now_iso()
                info.stop_reason = stop_reason
                if points is not None:
                    info.points = dict(points)
            info.state = state
            self._info = info
            self._write_info()

    def set_origin(self, experiment_file: str | None, hosts: list[str]) -> None:
        """Record which experiment file and hosts this run is made with (a resume of an older run fills it)."""
        self._still_ours()
        with self._lock:
            info = self._info.model_copy(update={"experiment_file": experiment_file, "hosts": list(hosts)})
            self._info = info
            self._write_info()

    def replace_configuration(self, resolved_experiment: dict[str, Any] | str, plan_json: dict[str, Any]) -> None:
        """Write a changed experiment and plan over the stored ones (``--resume --redo-changed``; the
        ``resume_changed`` event keeps what changed)."""
        self._still_ours()
        text, plan_text = _configuration_texts(resolved_experiment, plan_json)
        with self._lock:
            try:
                _write_atomic(self.path / "experiment.yaml", text)
                _write_atomic(self.path / "plan.json", plan_text)
            except OSError as exc:
                raise _store_error("write the configuration of", self.path, exc) from exc

    def supersede(self, keys: set[tuple[str, str]], reason: str) -> int:
        """Move every record of the (host, point id) ``keys`` out of ``records.jsonl`` into
        ``superseded.jsonl`` (with ``superseded_reason``), so the run's figures never mix two configurations
        and nothing measured is lost. ``records.jsonl`` is rewritten atomically; returns the records moved."""
        self._still_ours()
        if not keys:
            return 0
        target = self.path / "records.jsonl"
        kept: list[str] = []
        moved: list[str] = []
        for _number, text in _lines(target):
            try:
                raw = parse_json(text)
            except json.JSONDecodeError:
                kept.append(text)
                continue
            if isinstance(raw, dict) and (raw.get("host"), raw.get("point_id")) in keys:
                raw["superseded_reason"] = reason
                raw["superseded_at"] = utc_now_iso()
                moved.append(json.dumps(raw, default=str))
            else:
                kept.append(text)
        if not moved:
            return 0
        with self._lock:
            try:
                _append_bytes(self.path / "superseded.jsonl", ("\n".join(moved) + "\n").encode("utf-8"))
                _write_atomic(target, "".join(line + "\n" for line in kept))
            except OSError as exc:
                raise _store_error("move superseded records out of", target, exc) from exc
            with contextlib.suppress(OSError):  # its spans are the old file's: ls reads the records instead
                (self.path / INDEX_NAME).unlink(missing_ok=True)
            self._tail_checked = True
        return len(moved)

    def superseded_records(self) -> list[Record]:
        """The records ``supersede`` moved out (readable ones), in file order."""
        out: list[Record] = []
        for _number, text in _lines(self.path / "superseded.jsonl"):
            try:
                out.append(Record.model_validate_json(text))
            except ValidationError:
                continue
        return out

    def _write_info(self) -> None:
        target = self.path / "run.json"
        # Its stop reason quotes what a server said on the way down, which may echo its arguments (argparse's
        # ``unrecognized arguments: --api-key V``): every text the run stores passes the console's redaction.
        text = json.dumps(redact(self._info.model_dump(mode="json")), indent=2, ensure_ascii=False) + "\n"
        try:
            _write_atomic(target, text)
        except OSError as exc:
            # On a full disk the new file cannot be made, but run.json's own blocks can still hold its new
            # state: a run that ended on a full disk must not stay "running" there.
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwrite_in_place(target, text.encode()):
                raise _store_error("write", target, exc) from exc

    def _terminate_torn_tail(self, target: Path) -> None:
        # A kill -9 mid-write can leave a last line without its newline; appending straight after it would
        # glue the next good record onto the fragment and lose both.
        if self._tail_checked:
            return
        try:
            if not stat.S_ISREG(os.stat(target).st_mode):
                raise NotReadable(errno.EINVAL, "not a regular file (a FIFO, a device or a directory)", str(target))
            with open(target, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() > 0:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        _append_bytes(target, b"\n")
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _store_error("repair the last line of", target, exc) from exc
        self._tail_checked = True

    # ---- reading -----------------------------------------------------------------------------------

    def records(self, *, figures: bool = True, trim: Callable[[Record], None] | None = None) -> list[Record]:
        """Every readable record in file order; unreadable lines are skipped into ``skipped_lines``.

        A line that is a record of an unknown schema version is refused (``SchemaVersionError``), not skipped:
        reading it as if it were ours would be wrong silently. The records share their equal strings (keys,
        definitions, notes: :func:`_shared`); ``figures`` False drops each accepted record's figures
        (:data:`FIGURE_FIELDS`), for a reader of identities and statuses only; ``trim`` is called on each
        accepted record as it is read (a reader that drops what it never reads, before the next is read).
        """
        target = self.path / "records.jsonl"
        records: list[Record] = []
        skipped: list[SkippedLine] = []
        strings: dict[str, str] = {}
        for number, text in _lines(target):
            # With a trim, the strings are shared after it: what it drops (a real record's samples, most of it)
            # is never walked for them (bench/RESULTS-scale.md, recommend at scale).
            read = read_record_line(text, number, target, strings=None if trim else strings, figures=figures)
            if isinstance(read, Record):
                if trim is not None:
                    trim(read)
                    share_strings(read, strings)
                records.append(read)
            else:
                skipped.append(read)
        self.skipped_lines = skipped
        return records

    def latest_records(self) -> dict[tuple[str, str], Record]:
        """The last attempt of each (host, point id), in order of first appearance."""
        latest: dict[tuple[str, str], Record] = {}
        for record in self.records():
            latest[record.key] = record
        return latest

    def final_point_keys(self, retry_failed: bool = False) -> set[tuple[str, str]]:
        """(host, point id) pairs a resume must not run again: ``ok``, or ``failed`` unless retrying them."""
        final_statuses = {"ok"} if retry_failed else {"ok", "failed"}
        return {key for key, rec in self.latest_records().items() if rec.status in final_statuses}

    def read_state(self, *, retry_failed: bool = False) -> ResumeState:
        """What the run holds, for a run that continues it: ``records.jsonl`` and ``superseded.jsonl`` read
        once each (:class:`ResumeState`)."""
        return ResumeState.from_records(self.records(), self.superseded_records(), retry_failed=retry_failed)

    def next_attempt(self, host: str, point_id: str) -> int:
        """The attempt number a new record of (host, point id) should carry."""
        attempts = [r.attempt for r in self.records() if r.key == (host, point_id)]
        return max(attempts, default=0) + 1

    def events(self) -> list[dict[str, Any]]:
        """Every readable event, in order (torn lines skipped)."""
        return read_json_lines(self.path / "events.jsonl")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return str(os.getuid())


def is_run_directory(path: str | Path) -> bool:
    """Whether ``path`` looks like a run directory (has ``run.json``)."""
    return (Path(path) / "run.json").is_file()
