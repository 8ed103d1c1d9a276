"""One line of ``records.jsonl``: a finished (deployment, load point) on one host, and the schema version every
line and run.json carry. Its validation refuses a figure no measurement gives (orchestrator/runs/plausible.py);
:func:`read_record_line` is the one rule by which a line is a record or a skipped line, for every reader."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator import __version__
from orchestrator.errors import SchemaVersionError
from orchestrator.runs.plausible import impossible_figure, impossible_identity, impossible_load
from orchestrator.runs.reading import parse_json

__all__ = [
    "FIGURE_FIELDS",
    "RUN_SCHEMA_VERSION",
    "Record",
    "SkippedLine",
    "read_record_line",
    "refuse_schema",
    "share_strings",
]

# One version for run.json and for every line of records.jsonl: bump it when a reader of the old shape
# would misread the new one (adding an optional field does not need a bump).
RUN_SCHEMA_VERSION = 1
_NAMES = ("run_id", "experiment", "deployment_id", "point_id", "config_hash", "host", "variant")

Scalar = str | int | float | bool


class Record(BaseModel):
    """One finished (deployment, load point) on one host: one line of ``records.jsonl``.

    ``client`` is the load generator's ``LoadResult.to_dict()``, ``server`` the metrics'
    ``WindowMetrics.to_dict()``; both stay plain dicts here so the store never depends on those packages.
    Unknown extra fields are kept, so a newer runner adding an optional field does not break older readers.
    """

    model_config = ConfigDict(extra="allow")

    schema_version: int = RUN_SCHEMA_VERSION
    run_id: str
    experiment: str
    deployment_id: str
    point_id: str
    config_hash: str
    host: str
    variant: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    aliases: list[dict[str, Any]] = Field(default_factory=list)
    baseline: bool = False
    # A run directory when the baseline was reused from an earlier run instead of measured in this one.
    baseline_source: str | None = None
    mode: Literal["concurrency", "rate"]
    concurrency: int | None = None
    rate: float | None = None
    status: Literal["ok", "failed", "skipped"]
    attempt: int = 1
    started_at: str
    finished_at: str
    client: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # {kind, message, evidence: [lines]}
    window_file: str | None = None
    # The engine's version and settings as the server reported them (orchestrator/engines/info.py).
    engine_info: dict[str, Any] | None = None
    # Which measurement of its load this is (load.repeats) and which deployment of its configuration
    # (load.repeats_across_restarts); both 1 in runs made before repeats existed.
    repeat: int = 1
    restart: int = 1
    # The window's confidence intervals ({level, method, figures: {name: {value, lo, hi, se, n}}}) and the
    # file of its requests (``requests/<point id>.jsonl``, relative to the run directory).
    intervals: dict[str, Any] | None = None
    requests_file: str | None = None
    # What emptying the prefix cache before the point answered (load.flush_cache), and the GPU telemetry of
    # the window (orchestrator/hosts/telemetry.py).
    cache_flush: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    # The other specsweep controllers that ran on the controller's machine during the point (pid, machine,
    # experiment, hosts, run_dir, since; orchestrator/sweep/overlap.py): both runs' figures are contaminated.
    overlapped: list[dict[str, Any]] | None = None
    # How busy the controller's machine was during the point (load average, CPUs, busy and own CPU shares;
    # orchestrator/sweep/machineload.py).
    machine: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _plausible(self) -> Record:  # no figure a measurement cannot give (orchestrator/runs/plausible.py)
        if why := impossible_figure({"client": self.client, "server": self.server, "intervals": self.intervals}):
            raise ValueError(why)
        if why := impossible_load(self.concurrency, self.rate):
            raise ValueError(why)
        names = {"params": self.params, **{name: getattr(self, name) for name in _NAMES}}
        if why := impossible_identity(names):
            raise ValueError(why)
        return self

    @property
    def key(self) -> tuple[str, str]:
        """What identifies a point across attempts and resumes: (host, point id)."""
        return (self.host, self.point_id)


@dataclass(frozen=True)
class SkippedLine:
    """A ``records.jsonl`` line that could not be read (torn by a kill, or not a valid record)."""

    line_number: int
    reason: str
    text: str


def refuse_schema(found: object, where: Path) -> SchemaVersionError:
    """The error for a run file of a schema version this specsweep does not read (``where`` names it)."""
    if isinstance(found, int) and found > RUN_SCHEMA_VERSION:
        hint = (
            f"it was written by a newer specsweep (schema {found}; this one, {__version__}, reads schema "
            f"{RUN_SCHEMA_VERSION}): upgrade specsweep to read it"
        )
    else:
        hint = (
            f"its schema version {found!r} is not one this specsweep ({__version__}) reads "
            f"(schema {RUN_SCHEMA_VERSION}): open it with the specsweep version that wrote it"
        )
    return SchemaVersionError(f"{where}: {hint}")


#: The sections of a record that hold its figures, which a reader of identities only drops once it is accepted.
FIGURE_FIELDS = ("client", "server", "intervals", "telemetry", "cache_flush")


def _shared(value: Any, strings: dict[str, str]) -> Any:
    """``value`` (parsed JSON) with each string, key or value, replaced by the one equal string already in
    ``strings``: the records of a run repeat the same keys and prose (every window's definitions, every
    figure's exactness note), which each line's parse made anew (about half a real record's memory).
    A string, a number, a boolean or None inside an object or a list is taken in place, without a call of its
    own (most of a record's values)."""
    share = strings.setdefault

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                kind = type(v)
                key = share(k, k)
                if kind is str:
                    out[key] = share(v, v)
                elif kind is float or kind is int or kind is bool or v is None:
                    out[key] = v
                else:
                    out[key] = walk(v)
            return out
        if isinstance(value, list):
            items = []
            for v in value:
                kind = type(v)
                if kind is str:
                    items.append(share(v, v))
                elif kind is float or kind is int or kind is bool or v is None:
                    items.append(v)
                else:
                    items.append(walk(v))
            return items
        if isinstance(value, str):
            return share(value, value)
        return value

    return walk(value)


def share_strings(record: Record, strings: dict[str, str]) -> None:
    """Share the strings of an accepted ``record``'s sections (its dicts and lists: :func:`_shared`) with those of
    the records read before it, in place: for a reader that trims a record before it keeps it."""
    for name, value in record:
        if isinstance(value, dict | list):
            with contextlib.suppress(RecursionError):
                setattr(record, name, _shared(value, strings))


def read_record_line(
    text: str, number: int, target: Path, *, strings: dict[str, str] | None = None, figures: bool = True
) -> Record | SkippedLine:
    """One non-blank line of ``records.jsonl`` as the store accepts it: a :class:`Record`, or the
    :class:`SkippedLine` saying why it is not one (not JSON, not an object, a field of another type, a figure no
    measurement gives: orchestrator/runs/plausible.py). A record of another schema version raises
    ``SchemaVersionError`` (``target`` names the file). Every reader that counts records applies this rule.
    ``strings``: the strings of the lines read before, shared with this one's (:func:`_shared`). ``figures``
    False: the accepted record's :data:`FIGURE_FIELDS` are dropped (a reader of identities and statuses)."""
    try:
        raw = parse_json(text)
    except json.JSONDecodeError as exc:
        return SkippedLine(number, f"not JSON ({exc.msg})", text[:200])
    if not isinstance(raw, dict):
        return SkippedLine(number, "not a JSON object", text[:200])
    if raw.get("schema_version", RUN_SCHEMA_VERSION) != RUN_SCHEMA_VERSION:
        raise refuse_schema(raw.get("schema_version"), target)
    if strings is not None:
        with contextlib.suppress(RecursionError):  # a line nested too deep for the walk keeps its own strings
            raw = _shared(raw, strings)
    try:
        record = Record.model_validate(raw)
        if not figures:
            for name in FIGURE_FIELDS:
                setattr(record, name, None)
        return record
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        why = str(first["msg"]).removeprefix("Value error, ")
        return SkippedLine(number, f"not a record ({where + ': ' if where else ''}{why})", text[:200])
