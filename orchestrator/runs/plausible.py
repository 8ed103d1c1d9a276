"""What a record may claim: the figures a client or a server could really have measured (issue 49).

A record's figures come from a server anyone may run and from a file anyone may edit. A figure that no
measurement gives is refused where it enters (the ``Record``'s own validation, so both the sweep that makes a
record and every reader of ``records.jsonl`` see the same rule), instead of reaching the analysis, where an
``Infinity`` throughput lost its figure yet still won its load, a negative token count gave negative tok/s and
``1e308`` overflowed an integer conversion in report, compare, recommend and verify-schedule:

- every number in the record's ``client``, ``server`` and ``intervals`` is finite (no NaN, no Infinity) and at
  most :data:`MAX_FIGURE` in size (a microsecond timestamp is 1.8e15; ``1e308`` is no measurement);
- the headline figures (:data:`COUNTED`) are not negative: a count, a duration, a rate or a length;
- the load is one a client can send (:func:`impossible_load`): a concurrency of at least 1, a rate above 0 and
  finite (a concurrency of -4 or 0 became a load of its own, with a winner: issue 58, S10);
- its names and settings are ones a sweep writes (:func:`impossible_identity`): the names (run, experiment,
  deployment, point, host, variant) at most :data:`MAX_NAME_CHARS` characters, each parameter a number within
  +-2^53 or a text of at most that many characters, as an experiment's validation allows
  (orchestrator/experiment/common.py ``setting_problem``). A record is refused, not cut: a name cut short
  could become another configuration's, and a megabyte name made every table, label and figure of the report
  megabytes wide (``report`` ran for minutes; a parameter of 10^300 broke the frame: issue 58, R15).

A record of a point its run never planned is left out by orchestrator/runs/planned.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from orchestrator.experiment.common import MAX_SETTING_CHARS, setting_problem

__all__ = ["COUNTED", "MAX_FIGURE", "MAX_NAME_CHARS", "impossible_figure", "impossible_identity", "impossible_load"]

#: The largest number a record may hold anywhere in its figures.
MAX_FIGURE = 1e18
#: Figures that are counts, durations, rates or lengths: never below zero.
COUNTED: dict[str, tuple[str, ...]] = {
    "client": (
        "requests",
        "completed",
        "errors",
        "output_tokens",
        "input_tokens",
        "duration_s",
        "output_tok_s",
        "steady_output_tok_s",
        "per_user_tok_s",
        "requests_per_s",
        "cancelled",
        "warmup_requests",
        "warmup_errors",
    ),
    "server": ("accept_len", "acceptance_rate", "gen_throughput", "lines_total", "lines_matched"),
}
_MAX_DEPTH = 64
#: The longest name a record may hold: as long as an experiment's longest setting.
MAX_NAME_CHARS = MAX_SETTING_CHARS
_NAMES = ("run_id", "experiment", "deployment_id", "point_id", "config_hash", "host", "variant")


def _numbers(value: Any, where: str, depth: int = 0) -> Iterator[tuple[str, float]]:
    if isinstance(value, bool) or depth > _MAX_DEPTH:
        return
    if isinstance(value, int | float):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{where}[{index}]", depth + 1)


def _suspect(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` may hold a number :func:`impossible_figure` refuses: True for any number not within
    +-:data:`MAX_FIGURE` (NaN and the infinities among them), and for anything this quick screen does not
    know (a type other than JSON's own, a nesting deeper than :func:`_numbers` walks), which the full walk
    then judges. It builds no paths: a record's screen costs about a fifth of the full walk's
    (bench/RESULTS-scale.md)."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return True
    if depth >= _MAX_DEPTH:
        return True
    for item in items:
        kind = type(item)
        if kind is float:
            if not -MAX_FIGURE <= item <= MAX_FIGURE:  # NaN compares false too
                return True
        elif kind is int:
            if item > MAX_FIGURE or item < -MAX_FIGURE:
                return True
        elif kind is str or kind is bool or item is None:
            continue
        elif _suspect(item, depth + 1):
            return True
    return False


#: How deep a record's figures' keys become the analysis's column names (orchestrator/analysis/frame.py
#: ``flatten_server``: ``server.prometheus.<figure>.<statistic>``).
_KEY_DEPTH = 3


def _long_keys(value: Any, depth: int = 1) -> bool:
    """Whether a key of ``value``'s dicts, to :data:`_KEY_DEPTH` levels, is longer than :data:`MAX_NAME_CHARS`:
    those keys become columns of the analysis's frame, and a megabyte key made every one of its columns' names a
    megabyte (issue 58, R15). C-level ``max(map(len, ...))`` a dict, no path made (:func:`_long_key` says it)."""
    if type(value) is not dict or not value:
        return False
    if max(map(len, value)) > MAX_NAME_CHARS:
        return True
    if depth < _KEY_DEPTH:
        for item in value.values():
            if type(item) is dict and _long_keys(item, depth + 1):
                return True
    return False


def _long_key(value: Any, where: str, depth: int = 1) -> str:
    """Where :func:`_long_keys` found its key, in words."""
    for key in value:
        if len(key) > MAX_NAME_CHARS:
            return f"{where}: a key {len(key):,} characters long"
    for key, item in value.items():
        if depth < _KEY_DEPTH and _long_keys(item, depth + 1):
            return _long_key(item, f"{where}.{key}", depth + 1)
    return where


def impossible_figure(sections: dict[str, Any]) -> str | None:
    """Why the figures of a record (``{"client": ..., "server": ..., "intervals": ...}``) cannot be a
    measurement, naming the first such figure; None when every figure could be."""
    for section, value in sections.items():
        if value is None:
            continue
        if _long_keys(value):
            return f"{_long_key(value, section)}: no figure is named by more than {MAX_NAME_CHARS:,} characters"
        numbers = _numbers(value, section) if _suspect(value) else ()  # the full walk only where the screen doubts
        for where, number in numbers:
            if isinstance(number, float) and not math.isfinite(number):
                return f"{where} is {number!r}, not a finite number"
            if abs(number) > MAX_FIGURE:
                return f"{where} is {number:.3g}, larger than any measurement (at most {MAX_FIGURE:.0e})"
        if isinstance(value, dict):
            for key in COUNTED.get(section, ()):
                figure = value.get(key)
                if isinstance(figure, int | float) and not isinstance(figure, bool) and figure < 0:
                    return f"{section}.{key} is {figure!r}: a count, duration or rate is never negative"
    return None


def impossible_load(concurrency: Any, rate: Any) -> str | None:
    """Why a record's load is none a client sends (a concurrency below 1, a rate not above 0 or not finite, or
    beyond :data:`MAX_FIGURE`), or None."""
    if isinstance(concurrency, int) and not 1 <= concurrency <= MAX_FIGURE:
        return f"concurrency is {concurrency}: no client keeps fewer than 1 request (or more than 10^18) in flight"
    if isinstance(rate, int | float) and not (math.isfinite(rate) and 0 < rate <= MAX_FIGURE):
        return f"rate is {rate!r}: a request rate is above 0, finite and at most 10^18"
    return None


def impossible_identity(fields: dict[str, Any]) -> str | None:
    """Why a record's names or parameters (``fields``: the record's own, by name) are none a sweep writes, or
    None (see the module docstring)."""
    for name in _NAMES:
        value = fields.get(name)
        if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
            return f"{name} is {len(value):,} characters long: no sweep names one longer than {MAX_NAME_CHARS:,}"
    params = fields.get("params")
    for key, value in params.items() if isinstance(params, dict) else ():
        if len(key) > MAX_NAME_CHARS:
            return f"a parameter's name is {len(key):,} characters long (at most {MAX_NAME_CHARS:,})"
        if problem := setting_problem(value):
            return f"params.{key}: {problem}"
    return None
