"""Prometheus text exposition, written the way the engines' libraries write it.

SGLang and vLLM expose ``/metrics`` through the Python ``prometheus_client`` (``generate_latest``), llama.cpp
through its own C++ writer. What matters for a faithful copy, read from prometheus_client 0.26
(``prometheus_client/exposition.py`` ``generate_latest``, ``prometheus_client/utils.py`` ``floatToGoString``,
``prometheus_client/multiprocess.py`` ``MultiProcessCollector``):

- one ``# HELP name text`` and one ``# TYPE name type`` line per family; a counter's family name ends in
  ``_total`` in both lines (a Counter declared as ``x_total`` is stored as ``x`` and written back as ``x_total``);
- labels in ``name{a="1",b="2"}`` sorted by label name, values escaped (backslash, newline, double quote);
- values by ``floatToGoString``: ``repr(float(v))``, except that positive numbers with more than six digits
  before the point switch to Go's exponent form (``7557572.0`` -> ``7.557572e+06``);
- in multiprocess mode (SGLang always, vLLM with several API servers) a family appears only once one of its
  series was created, and there are no ``_created`` samples;
- a single-process registry (vLLM's default) adds a ``name_created`` gauge family after each counter family,
  holding the Unix time the series was created.

llama.cpp writes ``# HELP llamacpp:name text``, ``# TYPE llamacpp:name type`` and ``llamacpp:name value`` with
C++ ``std::ostream`` formatting of a double (six significant digits, ``%g``), read from
tools/server/server-context.cpp (handle_metrics) and the real captures in tests/data/llamacpp.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Family", "Series", "float_to_go_string", "format_cpp_double", "render"]

Series = tuple[Mapping[str, str], float]


def float_to_go_string(value: float) -> str:
    """prometheus_client's ``floatToGoString`` (prometheus_client/utils.py, 0.26)."""
    d = float(value)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def format_cpp_double(value: float) -> str:
    """A number written to a C++ ``std::ostream`` with default flags: a double as ``%g`` with six significant
    digits (``102``, ``2.03223``, ``159.494``, ``1.65116`` in llama-server's /metrics); an integer (the
    per-position counters are ``int64``) in full."""
    if isinstance(value, int):
        return str(value)
    return f"{float(value):g}"


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


@dataclass
class Family:
    """One metric family: its exposed name (a counter's with ``_total``), HELP text, type and series."""

    name: str
    help: str
    type: str  # counter | gauge
    series: list[Series] = field(default_factory=list)
    created: float | None = None  # single-process prometheus_client: the series' creation time

    def add(self, labels: Mapping[str, str], value: float) -> Family:
        self.series.append((labels, value))
        return self


def _labels(labels: Mapping[str, str], sort: bool) -> str:
    if not labels:
        return ""
    items: Iterable[tuple[str, str]] = sorted(labels.items()) if sort else labels.items()
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in items) + "}"


def render(families: Sequence[Family], *, created: bool = False, cpp: bool = False) -> str:
    """The exposition text of ``families`` (those without series are left out, as prometheus_client does).

    ``created``: add the ``_created`` families a single-process prometheus_client registry writes after each
    counter. ``cpp``: llama.cpp's writer (labels as given, ``%g`` numbers, no ``_created``)."""
    out: list[str] = []
    for fam in families:
        if not fam.series:
            continue
        out.append(f"# HELP {fam.name} {fam.help.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}")
        out.append(f"# TYPE {fam.name} {fam.type}")
        for labels, value in fam.series:
            number = format_cpp_double(value) if cpp else float_to_go_string(value)
            out.append(f"{fam.name}{_labels(labels, not cpp)} {number}")
        if created and not cpp and fam.type == "counter" and fam.name.endswith("_total"):
            base = fam.name[: -len("_total")]
            out.append(f"# HELP {base}_created {fam.help}")
            out.append(f"# TYPE {base}_created gauge")
            stamp = fam.created if fam.created is not None else 0.0
            for labels, _value in fam.series:
                out.append(f"{base}_created{_labels(labels, True)} {float_to_go_string(stamp)}")
    return "\n".join(out) + "\n" if out else ""
