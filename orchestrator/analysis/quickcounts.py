"""A run's point counts (planned, ok, degraded, failed, skipped) without its answer: what ``ls`` shows of a run
that has no current ``answer.json`` (killed before its ending, or never reported).

Making the answer reads every record into a model, builds the frame, bootstraps every interval and runs every
check: seconds per run of thousands of points, so ``ls`` of a results root of many such runs took minutes
(bench/RESULTS-scale.md). The counts need only each record's identity, status and request counts: each line of
``records.jsonl`` is decoded (msgspec, in C) and the answer's own rules are applied to those few fields:

- the records ``plan.json`` does not hold are left out (``orchestrator/runs/planned.py``, ``within_plan``);
- each (host, point id) counts by its last attempt (``RunStore.latest_records``);
- the windows of one point (host, workload, configuration, load: ``intervals.GROUP_KEYS``) are combined as
  ``intervals.aggregate_windows`` combines them: a point with an ok window is one ok point and each of its
  other windows a point of its own status; a point without one is its last window's status;
- an ok point that lost more than ``checks.degraded_requests`` of its requests is degraded
  (``result.mark_degraded``, ``lost_requests``; its ok windows' requests summed as the frame sums them).

A line the store would skip as a record no measurement gives (a figure that is not finite, beyond
``plausible.MAX_FIGURE``, or a negative count: orchestrator/runs/plausible.py) is skipped here too: a line whose
text holds a number that could be one (:func:`_may_be_refused`: a number with a positive exponent or of 19 digits
and more, or a ``COUNTED`` key with a negative value; the quick reading refuses non-finite numbers itself) is read
by the store's own rule (``store.read_record_line``), and counted only if the store would keep it.

Any line this reading is not sure of (not JSON, not an object, another schema, a field of another type: lines
the store skips or refuses) gives None, and the caller makes the whole answer instead, so the counts are the
answer's counts (``tests/unit/test_quickcounts.py`` holds them equal)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal, TypeVar

import msgspec

from orchestrator.analysis.rowfacts import config_label, lost_requests
from orchestrator.analysis.statuses import STATUSES
from orchestrator.files import MAX_LINE, NotReadable, bounded_lines, read_bounded
from orchestrator.runs.layout import planned_points, read_layout
from orchestrator.runs.planned import load_of
from orchestrator.runs.plausible import COUNTED, MAX_NAME_CHARS
from orchestrator.runs.recordindex import INDEX_NAME, covers
from orchestrator.runs.store import Record, read_record_line

__all__ = ["quick_counts"]

_T = TypeVar("_T")


class _Unsure(Exception):
    """A line the quick reading does not read as the store would: make the whole answer instead."""


#: The most of a run's plan.json, run.json or experiment.yaml read (as the store reads them: MAX_JSON_BYTES).
_MAX_FILE = 256 * 1024 * 1024


def _bytes(path: Path) -> bytes:
    """A run file's bytes: a regular file's of at most :data:`_MAX_FILE` (a FIFO never blocks, /dev/zero never
    fills memory: NotReadable, an OSError)."""
    return read_bounded(path, _MAX_FILE)


def _json(path: Path) -> Any:
    try:
        return msgspec.json.decode(_bytes(path))
    except (OSError, msgspec.DecodeError):
        return None


# ``frame.config_label`` and ``result.lost_requests``, the same rules written again here: those modules import
# pandas, which ``ls`` need not import (about 0.6 CPU s of each ``ls``: bench/RESULTS-scale.md).
# tests/unit/test_ls_imports.py holds each equal to its original.


def _threshold(experiment: Any) -> float | None:
    checks = experiment.get("checks") if isinstance(experiment, dict) else None
    if not isinstance(checks, dict) or "degraded_requests" not in checks:
        return 0.10  # CheckSettings.degraded_requests' default
    value = checks["degraded_requests"]
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1
    return float(value) if ok else None


#: The screen reads the line with every digit made ``0`` and all whitespace taken out (one ``bytes.translate``, in
#: C), then looks for a few byte strings: a regex over the whole line cost about 25 us a line (ls of 100 runs of
#: 4,875 points: 8.7 -> 23.1 CPU s, bench/RESULTS-scale.md).
#: ``E`` is made ``e`` and ``+`` taken out as well, so one find covers ``1e5``, ``1e+5``, ``1E5`` and ``1E+5``: the
#: screen may only find more than the numbers it looks for (then the store's rule decides), never less.
_ZEROS = bytes.maketrans(b"123456789E", b"000000000e")
_SPACE = b" \t\r\n+"
#: A ``plausible.COUNTED`` key: the screen looks for one followed by a negative value (``"key":-``).
_COUNTED_KEYS = frozenset(key.encode() for keys in COUNTED.values() for key in keys)
#: A number written with a positive exponent, or 19 digits and more before its point: the only numbers that can
#: pass ``plausible.MAX_FIGURE`` (1e18).
_EXPONENTS = (b"0e0",)
_LONG = b"0" * 19
_NUMBER_CHARS = b"0.-e"
_BEFORE = frozenset(b":[,")


def _number_start(text: bytes, at: int) -> int:
    """Where the JSON number holding ``text[at]`` starts (after ``:``, ``[`` or ``,``), -1 when the characters
    there are not a number's (a string's: ``"a3e5"``). The characters before ``at`` are stripped in C
    (``bytes.rstrip``, 64 at a time): a hex id's ``0e0`` is found thousands of times a run."""
    end = at
    while True:
        low = max(0, end - 64)
        head = text[low:end].rstrip(_NUMBER_CHARS)
        if head or low == 0:
            start = low + len(head)
            break
        end = low  # 64 number characters in a row: look further back
    return start if start > 0 and text[start - 1] in _BEFORE else -1


def _may_be_refused(line: bytes) -> bool:
    """Whether ``line`` (a line the quick reading decoded, so without NaN or Infinity) holds a figure
    ``plausible.impossible_figure`` could refuse: when not, the store keeps the line as far as its figures go.

    Each search runs from the end back (``rfind``), every occurrence visited (overlapping ones too, hence the end
    bound ``at + len - 1``): over text that is mostly ``0`` CPython's backward search skips further than its
    forward one (the 4.3 MB of a run of 4,875 points: ``":-`` 3.9 -> 2.0 ms, ``0e0`` with its hits 5.2 -> 2.8,
    19 zeros 1.9 -> 0.9). The answer is the same: whether any occurrence is one the store could refuse."""
    if b"\\" in line and b"\\u" in line:  # a backslash looked for first (memchr): 4.5 -> 0.1 ms a run without one
        return True  # a key may be written with escapes (``"\\u0072equests"``): the store's rule decides
    text = line.translate(_ZEROS, _SPACE)
    at = text.rfind(b'":-')
    while at != -1:
        if text[text.rfind(b'"', 0, at) + 1 : at] in _COUNTED_KEYS:
            return True
        at = text.rfind(b'":-', 0, at + 2)
    for marker in _EXPONENTS:
        at = text.rfind(marker)
        while at != -1:
            if _number_start(text, at) != -1:
                return True
            at = text.rfind(marker, 0, at + len(marker) - 1)
    at = text.rfind(_LONG)
    while at != -1:
        start = _number_start(text, at)
        if start != -1 and text[start:at] in (b"", b"-"):  # the digits before the number's point
            return True
        at = text.rfind(_LONG, 0, at + len(_LONG) - 1)
    return False


class _Client(msgspec.Struct, gc=False):
    errors: Any = None
    cancelled: Any = None
    requests: Any = None


class _Line(msgspec.Struct, gc=False):
    """The fields of a record the counts read, of the types the record's model allows (``runs/record.py``); the
    rest of the line is skipped unread (in C). ``gc=False``: decoded JSON holds no cycles, and thousands of
    tracked objects a run made the collector walk the process's objects (decoding 11 -> 7 ms a run)."""

    # a name longer than a sweep writes (runs/plausible.py ``impossible_identity``) fails the decoding
    host: Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]
    point_id: Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]
    status: Literal["ok", "failed", "skipped"]
    variant: Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]
    mode: Literal["concurrency", "rate"]
    schema_version: Literal[1] = 1  # runs/record.py RUN_SCHEMA_VERSION (held by the tests); another: not counted
    # as written (its label is made once per distinct text, the text decoded then: :func:`_labels`)
    params: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    # a load no client sends (runs/plausible.py ``impossible_load``) fails the decoding: not read surely
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=10**18)] | None = None
    rate: Annotated[int, msgspec.Meta(gt=0, le=10**18)] | Annotated[float, msgspec.Meta(gt=0, le=1e18)] | None = None
    workload: str | None = None
    baseline_source: Any = None
    client: _Client | None = None


_DECODER = msgspec.json.Decoder(_Line)


class _Indexed(_Line, gc=False):
    """A line of ``records.index.jsonl`` (orchestrator/runs/recordindex.py): the same fields, of the same types,
    with the record line's bytes in ``records.jsonl`` and whether the store's reading keeps it."""

    start: int = -1
    end: int = -1
    kept: bool = False


_INDEX_DECODER = msgspec.json.Decoder(_Indexed)
_PARAMS = msgspec.json.Decoder(dict[str, Any])
#: Lines read and screened together when the file is read line by line (:func:`_lines_read`).
_CHUNK_LINES = 4096
#: Bytes read at a time (:func:`_blocks`): each block, cut after its last newline, is screened once and decoded
#: in one call.
_BLOCK_BYTES = 512 * 1024


class _LongLine(Exception):
    """A line longer than ``files.MAX_LINE``: ``bounded_lines`` cuts it, so the file is read as it reads it."""


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, never blocking on a FIFO (as ``files.bounded_lines`` opens it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotReadable(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _blocks(path: Path) -> Iterator[bytes]:
    """The bytes of ``path`` in blocks of whole lines (the last one may lack its newline); :class:`_LongLine` when
    a line (with its newline) is longer than ``MAX_LINE``."""
    with _open_regular(path) as stream:
        rest = b""
        while True:
            block = stream.read(_BLOCK_BYTES)
            if not block:
                if len(rest) > MAX_LINE:
                    raise _LongLine
                if rest:
                    yield rest
                return
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                rest += block
                if len(rest) > MAX_LINE:
                    raise _LongLine
                continue
            whole = rest + block[:cut] if rest else block[:cut]
            rest = block[cut:]
            if len(whole) > MAX_LINE and max(map(len, whole.split(b"\n"))) + 1 > MAX_LINE:
                raise _LongLine
            yield whole


def _records_of(lines: list[bytes], text: bytes, path: Path) -> list[_Line]:
    """The records of ``lines`` (``text``: them joined), as the store keeps them; :class:`_Unsure` for a line not
    read surely. Decoded in one call (``Decoder.decode_lines``) when the screen passes the text (no number the
    store could refuse anywhere in it: the screen of the whole finds all that the screens of its lines find) and
    the call gives one record per non-blank line; else line by line, as the store reads them."""
    if not _may_be_refused(text):
        try:
            raws: list[_Line] | None = _DECODER.decode_lines(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raws = None  # the line that fails is found, and judged, line by line
        if raws is not None and len(raws) == sum(map(bool, map(bytes.strip, lines))):
            return raws
    kept: list[_Line] = []
    for line in lines:
        line = line.strip().strip(b"\x00").strip()
        if not line:
            continue
        try:
            raw = _DECODER.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:  # not a record's JSON, or not its types
            raise _Unsure from exc
        if _may_be_refused(line) and not isinstance(
            read_record_line(line.decode("utf-8", errors="replace"), 0, path), Record
        ):
            continue  # the store skips it (a figure no measurement gives, or another field it refuses)
        kept.append(raw)
    return kept


def _lines_read(path: Path) -> list[_Line]:
    """Every record of ``path`` read as ``files.bounded_lines`` gives its lines, :data:`_CHUNK_LINES` at a time
    (a file with a line longer than ``MAX_LINE``, which it cuts)."""
    raws: list[_Line] = []
    chunk: list[bytes] = []
    for line in bounded_lines(path):
        chunk.append(line)
        if len(chunk) == _CHUNK_LINES:
            raws.extend(_records_of(chunk, b"".join(chunk), path))
            chunk = []
    if chunk:
        raws.extend(_records_of(chunk, b"".join(chunk), path))
    return raws


def _indexed(path: Path) -> list[_Line] | None:
    """The records ``path`` (records.jsonl) holds that the store keeps, from the index written beside it
    (runs/recordindex.py), without reading the records: None when there is none or it is not surely the whole
    file's (``recordindex.covers``), or a line of it is not read surely (then the records are read)."""
    index = path.with_name(INDEX_NAME)
    try:
        records_stat, index_stat = path.stat(), index.stat()
        if not stat.S_ISREG(index_stat.st_mode) or not stat.S_ISREG(records_stat.st_mode):
            return None
        entries: list[_Indexed] = _INDEX_DECODER.decode_lines(_bytes(index))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not covers([(e.start, e.end) for e in entries], records_stat, index_stat):
        return None
    return [entry for entry in entries if entry.kept]


def _records(path: Path) -> list[_Line]:
    """Every record of ``path`` (records.jsonl) the store keeps, in the file's order, blank lines skipped (the
    store skips them); :class:`_Unsure` for a line not read surely. From the index beside it where that is
    surely the file's (:func:`_indexed`); else read :data:`_BLOCK_BYTES` at a time (bench/RESULTS-scale.md,
    session fifteen), a line what ``files.bounded_lines`` gives (split at ``\n``)."""
    indexed = _indexed(path)
    if indexed is not None:
        return indexed
    raws: list[_Line] = []
    try:
        for block in _blocks(path):
            raws.extend(_records_of(block.split(b"\n"), block, path))
    except _LongLine:
        return _lines_read(path)
    return raws


def _labels(variants: list[str], params: list[bytes]) -> dict[tuple[str, bytes], str]:
    """(variant, params as written) -> the configuration's label (``frame.config_label``), for every record (a
    record outside the plan too, as the answer's reading decodes it); :class:`_Unsure` for params not a
    mapping."""
    labels: dict[tuple[str, bytes], str] = {}
    for variant, text in dict.fromkeys(zip(variants, params, strict=True)):
        try:  # a mapping, as the record's model has it; else not read surely
            decoded = _PARAMS.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _Unsure from exc
        labels[variant, text] = config_label(variant, decoded)
    return labels


_VARIANT = attrgetter("variant")
_PARAMS_OF = attrgetter("params")
_POINT_ID = attrgetter("point_id")
_STATUS = attrgetter("status")
_IDENTITY = attrgetter("host", "point_id")
#: A record's point as written (its params apart): the points are told apart by these, then the answer's point
#: (:func:`_point`) made once per distinct one.
_WRITTEN = attrgetter("host", "workload", "variant", "mode", "concurrency", "rate")


def _point(
    written: tuple[str, str | None, str, str, int | None, float | None], label: str
) -> tuple[str, str, str, str, float]:
    """The answer's point of a record (host, workload, configuration, load: ``intervals.GROUP_KEYS``)."""
    host, workload, _variant, mode, concurrency, rate = written
    load = concurrency if mode == "concurrency" else rate
    return (host, workload or "", label, mode, float(load or 0))


def _lossless(client: _Client | None) -> bool:
    """Whether a window lost no request: its errors and cancelled each absent or zero (then its point, summed as
    the frame sums them, lost none: never degraded)."""
    return client is None or (
        (client.errors is None or client.errors == 0) and (client.cancelled is None or client.cancelled == 0)
    )


def _summed(values: list[Any]) -> float | None:
    present = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and v == v]
    return sum(present) if present else None


def _statuses(raws: list[_Line], planned_ids: set[Any] | None, threshold: float) -> Counter[str]:
    """The points of ``raws`` by status, as the answer counts them (the module's docstring)."""
    params = list(map(bytes, map(_PARAMS_OF, raws)))
    labels = _labels(list(map(_VARIANT, raws)), params)
    if planned_ids is not None and not planned_ids.issuperset(map(_POINT_ID, raws)):
        kept = [i for i, raw in enumerate(raws) if raw.point_id in planned_ids or raw.baseline_source]
        raws, params = [raws[i] for i in kept], [params[i] for i in kept]
    # each point id's last attempt, where its first was (the answer's ``RunStore.latest_records``)
    last = dict(zip(map(_IDENTITY, raws), range(len(raws)), strict=True))
    if len(last) != len(raws):
        order = list(last.values())
        raws, params = [raws[i] for i in order], [params[i] for i in order]
    latest = raws
    written = list(zip(map(_WRITTEN, latest), params, strict=True))
    points = {w: _point(w[0], labels[w[0][2], w[1]]) for w in dict.fromkeys(written)}
    keys = list(map(points.__getitem__, written))
    statuses = list(map(_STATUS, latest))
    if statuses.count("ok") == len(statuses) and all(map(_lossless, (raw.client for raw in latest))):
        return Counter({"ok": len(set(keys))})  # every window ok, none lost a request: each point ok
    groups: dict[tuple[str, str, str, str, float], list[_Line]] = {}
    for key, raw in zip(keys, latest, strict=True):
        group = groups.get(key)
        if group is None:
            groups[key] = [raw]
        else:
            group.append(raw)
    counted: Counter[str] = Counter()
    for windows in groups.values():
        ok = [w.client for w in windows if w.status == "ok"]
        if not ok:
            counted[windows[-1].status] += 1
            continue
        if len(ok) != len(windows):
            counted.update(w.status for w in windows if w.status != "ok")
        if all(map(_lossless, ok)):
            counted["ok"] += 1
            continue
        clients = [c or _NO_CLIENT for c in ok]
        row: dict[str, object] = {
            "errors": _summed([c.errors for c in clients]),
            "cancelled": _summed([c.cancelled for c in clients]),
            "requests": _summed([c.requests for c in clients]),
        }
        lost, sent = lost_requests(row)
        counted["degraded" if sent and lost / sent > threshold else "ok"] += 1
    return counted


_NO_CLIENT = _Client()


class _PlanPoint(msgspec.Struct, gc=False):
    id: Any = None
    mode: Any = None
    concurrency: Any = None
    rate: Any = None
    workload: Any = None


class _PlanDeployment(msgspec.Struct, gc=False):
    id: Any = None
    config_hash: Any = None
    load_points: list[_PlanPoint] | None = None


class _Plan(msgspec.Struct, gc=False):
    """The fields of plan.json the counts read (the rest skipped in C); a plan of other shapes (a deployment or
    a load point that is not a mapping, ``load_points`` not a list) is read whole, as before (:func:`_json`)."""

    deployments: list[_PlanDeployment] | None = None
    decide_point_ids: Any = None


_PLAN = msgspec.json.Decoder(_Plan)
_LOAD = attrgetter("mode", "concurrency", "rate", "workload")


def _plan_ids(plan: _Plan, kind: Any) -> set[Any] | None:
    """:func:`_planned_ids` of a plan read as :class:`_Plan`."""
    if kind not in (None, "sweep") or not plan.deployments:
        return None
    planned: set[Any] = {point.id for dep in plan.deployments for point in dep.load_points or []}
    planned.update(plan.decide_point_ids or [])
    return planned


def _plan_points(plan: _Plan, layout: dict[str, list[str]]) -> int:
    """``layout.planned_points`` of a plan read as :class:`_Plan`: each deployment's distinct loads as written
    found in C, the point made once per distinct one."""
    keys: set[tuple[Any, ...]] = set()
    for dep in plan.deployments or []:
        config = dep.config_hash or dep.id
        targets = layout.get(str(dep.id)) or [""]
        for mode, concurrency, rate, workload in dict.fromkeys(map(_LOAD, dep.load_points or [])):
            key = (
                config,
                mode,
                concurrency if mode != "rate" else None,
                rate if mode == "rate" else None,
                workload or "",
            )
            keys.update((target, *key) for target in targets)
    return len(keys)


def _planned_ids(plan: Any, kind: Any) -> set[Any] | None:
    """The point ids ``plan`` holds (``within_plan``'s rule), None when every record is kept."""
    deployments = plan.get("deployments") if isinstance(plan, dict) else None
    if kind not in (None, "sweep") or not isinstance(deployments, list) or not deployments:
        return None
    planned: set[Any] = {
        point.get("id")
        for dep in deployments
        if isinstance(dep, dict)
        for point in dep.get("load_points") or []
        if isinstance(point, dict)
    }
    planned.update(plan.get("decide_point_ids") or [])
    return planned


def _read_plan(path: Path) -> _Plan | dict[str, Any]:
    """plan.json's fields the counts read (:class:`_Plan`), or the whole of it when it is not of that shape ({}
    when it is not a mapping or cannot be read)."""
    try:
        return _PLAN.decode(_bytes(path / "plan.json"))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return _read_whole(path)  # not of the usual shape: read whole, as the answer's rule reads it


def _from_plan(
    plan: _Plan | dict[str, Any], path: Path, typed: Callable[[_Plan], _T], whole: Callable[[dict[str, Any]], _T]
) -> _T:
    """``typed`` of the few fields read, or ``whole`` of the whole plan.json when the plan is not of that shape
    or holds an id or load that is not hashable (TypeError): as the answer's rule reads it."""
    if isinstance(plan, _Plan):
        try:
            return typed(plan)
        except TypeError:
            plan = _read_whole(path)
    return whole(plan)


def _ids_of(plan: _Plan | dict[str, Any], path: Path, kind: Any) -> set[Any] | None:
    return _from_plan(plan, path, lambda p: _plan_ids(p, kind), lambda p: _planned_ids(p, kind))


def _points_of(plan: _Plan | dict[str, Any], path: Path) -> int:
    layout = read_layout(path)
    return _from_plan(plan, path, lambda p: _plan_points(p, layout), lambda p: planned_points(p, layout))


def _read_whole(path: Path) -> dict[str, Any]:
    whole = _json(path / "plan.json")
    return whole if isinstance(whole, dict) else {}


def _threshold_of(path: Path) -> float | None:
    """:func:`_threshold` of the run's experiment.yaml. YAML is read only when the text could name the setting:
    a key spelled otherwise needs an escape (a backslash) or holds the name itself, and without one the default
    holds (3 ms a run of YAML saved)."""
    try:
        text = _bytes(path / "experiment.yaml").decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return _threshold({})
    if "degraded_requests" not in text and "\\" not in text:
        return _threshold({})
    import yaml

    try:
        experiment = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        experiment = {}
    return _threshold(experiment)


_WRITTEN_LOAD = attrgetter("point_id", "mode", "concurrency", "rate")
_PLANNED_LOAD = attrgetter("id", "mode", "concurrency", "rate")


def _same_loads(raws: list[_Line], plan: _Plan | dict[str, Any], path: Path, kind: Any) -> None:
    """:class:`_Unsure` when a record of a planned point names another load than the plan's (``within_plan``
    leaves it out, with a finding: the answer is made)."""
    if kind not in (None, "sweep"):
        return  # every record kept (within_plan's rule)
    if isinstance(plan, _Plan):
        points = chain.from_iterable(dep.load_points or () for dep in plan.deployments or ())
        written = set(map(_PLANNED_LOAD, points))
        with contextlib.suppress(TypeError):  # an id not hashable: judged one by one below
            if written.issuperset(map(_WRITTEN_LOAD, raws)):
                return  # every record at its point's load as written (in C: 6.7 -> 1 ms a run of 5,000 points)
    whole = plan if isinstance(plan, dict) else None
    loads: dict[Any, tuple[Any, ...]] = {}
    if isinstance(plan, _Plan):
        try:
            loads = {
                p.id: load_of(p.mode, p.concurrency, p.rate)
                for dep in plan.deployments or []
                for p in dep.load_points or []
            }
        except TypeError:  # an id that is not hashable: read whole, as the answer's rule reads it
            whole = _read_whole(path)
    if whole is not None:
        deployments = whole.get("deployments")
        try:
            loads = {
                p.get("id"): load_of(p.get("mode"), p.get("concurrency"), p.get("rate"))
                for dep in (deployments if isinstance(deployments, list) else [])
                if isinstance(dep, dict)
                for p in dep.get("load_points") or []
                if isinstance(p, dict)
            }
        except TypeError as exc:
            raise _Unsure from exc
    for raw in raws:
        planned = loads.get(raw.point_id)
        if planned is not None and not raw.baseline_source and planned != load_of(raw.mode, raw.concurrency, raw.rate):
            raise _Unsure


def quick_counts(run_dir: str | Path) -> dict[str, int] | None:
    """The run's counts as its answer has them (``Counts.to_dict``), or None when a line cannot be read as
    surely as the store reads it (then make the answer)."""
    path = Path(run_dir)
    info = _json(path / "run.json")
    if not isinstance(info, dict):
        return None
    threshold = _threshold_of(path)
    if threshold is None:
        return None
    kind = info.get("kind")
    plan = _read_plan(path)
    planned_ids = _ids_of(plan, path, kind)
    try:
        raws = _records(path / "records.jsonl")
        _same_loads(raws, plan, path, kind)
        statuses = _statuses(raws, planned_ids, threshold)
    except (_Unsure, OSError):
        return None
    points: dict[str, Any] = info["points"] if isinstance(info.get("points"), dict) else {}
    if kind == "search" and isinstance(points.get("planned"), int):
        planned = int(points["planned"])
    else:
        planned = _points_of(plan, path)
    return {"planned": planned, **{s: int(statuses.get(s, 0)) for s in STATUSES}}
