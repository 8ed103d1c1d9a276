"""The seam between specsweep and one engine: what the rest of the code may ask of it.

An engine is everything specsweep knows about one server program, in one package under
``orchestrator/engines/`` (or in a user's own package, found through the ``specsweep.engines`` entry-point
group: :mod:`orchestrator.engines.registry`). The rest of the code never imports an engine's package; it asks
the registry for the :class:`Engine` an experiment's ``engine:`` names and uses these members:

- ``name`` (the ``engine:`` value), ``family`` (whose formats it speaks: the simulator speaks SGLang's),
  ``summary`` (one line for ``--help`` and errors);
- the log: ``markers`` (substrings that mark a metric line, for counting unreadable ones), :meth:`parse_log`
  (text -> typed samples, never raising) and :meth:`aggregate` (samples of one window -> figures, their
  definitions and details, computed as the engine computes them);
- ``/metrics``: ``prometheus_prefix``, ``prometheus_definitions`` and :meth:`derive_prometheus` (the
  engine's own figures from two scrapes, after the shared counter derivation);
- control endpoints: ``health_paths`` (polled until the server answers), :meth:`flush_cache`
  (``flush_path`` names its request), ``info_paths``, ``version_key``, ``info_settings`` and
  ``info_settings_object`` (what the server says about itself), and the lines it prints when listening or
  ready (``listening_patterns``, ``ready_patterns``), and the lines it prints once per process start
  (``start_patterns``: a window holding one holds two processes, see ``orchestrator.metrics.window``);
- the stats tick: ``tick_patterns`` (a line the engine prints once per stats interval) and
  :meth:`stats_interval` (seconds between them for a server started with a given command and environment): a
  window is closed by the first tick after its load ends (``orchestrator.sweep.closing``); ``idle_tick_patterns``
  (a tick of an empty engine that did nothing in its interval) close it too when the engine then stops ticking;
- per-response figures: :meth:`response_fields` (what the engine writes into its responses and the readers of
  it, :class:`~orchestrator.engines.responses.ResponseFields`) and :meth:`request_extras` (the body fields that
  ask for them);
- the simulator: :meth:`sim_dialect`, the class of the simulator's imitation of the engine
  (``orchestrator.sim.dialects``), None for an engine the simulator does not speak;
- ``no_batch_schedule``: why the engine takes no draft length per batch size (``orchestrator.analysis.schedule``
  then leaves a recommendation per load), None when it takes vLLM's ``num_speculative_tokens_per_batch_size``;
- ``specsweep init``: :meth:`starter`, the engine's parts of a starter experiment file
  (:class:`~orchestrator.engines.starter.Starter`), None for an engine that offers none.

:class:`EngineBase` gives the defaults (nothing offered); the built-in engines subclass it, and an engine from
outside may too. Every definition an engine gives cites the engine source file it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from orchestrator.engines.samples import ParseResult
    from orchestrator.engines.starter import Starter
    from orchestrator.sim.dialects.base import Dialect

__all__ = ["ADDRESS", "Call", "Edges", "Engine", "EngineBase", "WindowFigures"]

#: The address in a "listening on" line: scheme, host (a bracketed IPv6 address or a name) and port.
ADDRESS = r"(?P<scheme>https?)://(?P<host>\[[^\]\s]*\]|[^\s:/\[\]]+):(?P<port>\d{1,5})\b"


#: ``(samples) -> (kept, groups whose first line was dropped, groups kept with their edge line)``: how a
#: window's interval lines are cut at its start (``orchestrator.metrics.window.drop_window_edges``, or keep all).
Edges = Callable[[Sequence[Any]], tuple[list[Any], int, int]]

#: ``(method, path) -> (status, body)``: one control-plane request to the server, ``(None, None)`` unanswered.
Call = Callable[[str, str], tuple[int | None, str | None]]


@dataclass
class WindowFigures:
    """One window's figures from an engine's log samples: ``figures`` (``accept_len``, ``acceptance_rate``,
    ``gen_throughput``, ``details``), ``definitions`` (figure -> how it was computed, with the engine file),
    and, for interval lines cut at the window's start, how many groups lost their first line (``dropped``)
    and how many kept it (``kept``); ``intervals`` is False for an engine whose samples are whole requests."""

    figures: dict[str, Any]
    definitions: dict[str, str]
    dropped: int = 0
    kept: int = 0
    intervals: bool = True


@runtime_checkable
class Engine(Protocol):
    """What specsweep may ask of an engine (the module docstring says what each member is for)."""

    name: str
    family: str
    summary: str
    markers: tuple[str, ...]
    prometheus_prefix: str | None
    prometheus_definitions: Mapping[str, str]
    flush_path: str | None
    health_paths: tuple[str, ...]
    info_paths: tuple[str, ...]
    version_key: str
    info_settings: tuple[str, ...]
    info_settings_object: str | None
    listening_patterns: tuple[tuple[str, re.Pattern[str]], ...]
    ready_patterns: tuple[tuple[str, re.Pattern[str]], ...]
    start_patterns: tuple[tuple[str, re.Pattern[str]], ...]
    tick_patterns: tuple[re.Pattern[str], ...]
    idle_tick_patterns: tuple[re.Pattern[str], ...]
    no_batch_schedule: str | None

    def stats_interval(self, command: str | None, environment: Mapping[str, str]) -> float | None: ...

    def parse_log(self, text: str) -> ParseResult: ...

    def aggregate(self, result: ParseResult, *, edges: Edges, version: str | None) -> WindowFigures: ...

    def derive_prometheus(self, window: Any, after: Any, generated: float | None, version: str | None) -> None: ...

    def request_extras(self, api: str) -> dict[str, Any]: ...

    def response_fields(self) -> Any: ...

    def sim_dialect(self) -> type[Dialect] | None: ...

    def reconcile_log(self, window: Any, spec: Mapping[str, Any]) -> None: ...

    def drafter_corpus(self, settings: Mapping[str, Any], command: str) -> str | None: ...

    def command_problems(self, command: str) -> list[str]: ...

    def spec_shape(self, command: str, settings: Mapping[str, Any] | None) -> dict[str, Any] | None: ...

    def golden(
        self,
        command: str,
        settings: Mapping[str, Any] | None,
        requests: list[dict[str, Any]],
        python: str,
        cache: dict[str, Any],
    ) -> dict[str, Any] | None: ...

    def version_from_log(self, text: str) -> str | None: ...

    def flush_cache(self, call: Call) -> tuple[bool, str | None] | None: ...

    def starter(self, host: str) -> Starter | None: ...


@dataclass(frozen=True)
class EngineBase:
    """Defaults for every member of :class:`Engine`: an engine that offers nothing beyond its name."""

    name: str
    family: str = ""
    summary: str = ""
    markers: tuple[str, ...] = ()
    prometheus_prefix: str | None = None
    prometheus_definitions: Mapping[str, str] = field(default_factory=dict)
    flush_path: str | None = None
    health_paths: tuple[str, ...] = ("/health",)  # what a health wait GETs when the experiment names none
    info_paths: tuple[str, ...] = ("/version",)
    version_key: str = "version"
    info_settings: tuple[str, ...] = ()
    info_settings_object: str | None = None  # an object of the info answer that also holds settings
    #: (who prints it, pattern with groups scheme, host, port): lines printed once the HTTP socket listens
    listening_patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    #: (who prints it, pattern): lines that say the server serves, naming no port
    ready_patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    #: (who prints it, pattern): lines the engine prints exactly once per process start (a version banner, the
    #: server arguments), searched line by line (``re.MULTILINE``). A pattern with a ``pid`` group (and a
    #: ``proc`` group naming the process) is a process identity instead: the line where a process's pid changes
    #: is a start (orchestrator/metrics/window.py ``process_starts``).
    start_patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    aliases: Sequence[str] = ()
    #: Lines the engine prints once per stats interval (searched line by line, ``re.MULTILINE``): an interval
    #: line covers what happened since the previous tick, so the tick after a load ends closes its window.
    tick_patterns: tuple[re.Pattern[str], ...] = ()
    #: Tick lines of an engine that did nothing in the interval and holds no request at the tick (a ``engine``
    #: group in both kinds of pattern tells one engine's ticks from another's): an engine that logs such ticks
    #: at DEBUG once the interval before was idle too (vLLM) goes quiet at INFO, and a window whose every
    #: engine's last tick is one of these holds all it did (``orchestrator.sweep.closing``).
    idle_tick_patterns: tuple[re.Pattern[str], ...] = ()
    #: Why the engine takes no draft length per batch size (docs/schedule.md, with the engine's source), None
    #: when it takes vLLM's ``num_speculative_tokens_per_batch_size`` (the default, as before engines said).
    no_batch_schedule: str | None = None

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", self.name)

    def stats_interval(self, command: str | None, environment: Mapping[str, str]) -> float | None:
        """Seconds between the engine's stats ticks for a server started with ``command`` (the rendered command
        line or ExecStart) and ``environment``; None when the engine prints no ticks (``tick_patterns``)."""
        return None

    def parse_log(self, text: str) -> ParseResult:
        from orchestrator.engines.samples import ParseResult

        return ParseResult()

    def aggregate(self, result: ParseResult, *, edges: Edges, version: str | None) -> WindowFigures:
        return WindowFigures(
            {"accept_len": None, "acceptance_rate": None, "gen_throughput": None, "details": {}}, {}, intervals=False
        )

    def derive_prometheus(self, window: Any, after: Any, generated: float | None, version: str | None) -> None:
        return None

    def request_extras(self, api: str) -> dict[str, Any]:
        return {}

    def response_fields(self) -> Any:
        """What the engine writes into its responses and how to read it: an
        ``orchestrator.engines.responses.ResponseFields`` (not imported here: that module reaches the engines
        through the registry, which checks engines against this protocol), checked where the fields are merged;
        None (the default) when it writes no speculative figures there."""
        return None

    def sim_dialect(self) -> type[Dialect] | None:
        """The simulator's dialect of this engine (a subclass of ``orchestrator.sim.dialects.Dialect``, which
        the simulator finds here through the registry); None (the default) when the simulator does not speak it."""
        return None

    def reconcile_log(self, window: Any, spec: Mapping[str, Any]) -> None:
        """Correct (or label) the log window's figures by what the window's responses say the log counts that
        the engine did not commit (SGLang: orchestrator/engines/sglang/overshoot.py); nothing by default."""
        return None

    def drafter_corpus(self, settings: Mapping[str, Any], command: str) -> str | None:
        """Why the deployment's drafter keeps a corpus across requests (orchestrator/sweep/corpus.py), from the
        server's reported settings or its command; None when it does not (the default)."""
        return None

    def command_problems(self, command: str) -> list[str]:
        """Why the engine would refuse a rendered server command, or silently run another configuration than the
        one written (``specsweep validate`` refuses it, with the variant's file and line); empty by default."""
        return []

    def spec_shape(self, command: str, settings: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The speculative tree or chain a deployment runs: ``configured`` (from its command), ``served`` (from
        the server's reported settings, as it resolved them) and whether they agree; None for an engine or a
        deployment without one (the default)."""
        return None

    def golden(
        self,
        command: str,
        settings: Mapping[str, Any] | None,
        requests: list[dict[str, Any]],
        python: str,
        cache: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The figures the model itself predicts for a point where the engine can say (SGLang's self-drafted
        chains: engines/sglang/golden.py), from the point's requests (``key``, ``messages`` or ``text``,
        ``tokens`` its output length, ``spec`` the response's figures), with the engine's own Python
        (``python``); ``cache`` keeps the model's answers across the run's points. None where no golden figure
        exists (the default)."""
        return None

    def version_from_log(self, text: str) -> str | None:
        """What the log itself says of the engine's version where no server told it (a saved log read by
        ``specsweep parse``): a version, or a lower bound written ``X.Y.Z+``; None by default."""
        return None

    def flush_cache(self, call: Call) -> tuple[bool, str | None] | None:
        """Empty the server's prefix cache through ``call``: ``(ok, note)``; None when the engine has no way."""
        return None

    def starter(self, host: str) -> Starter | None:
        """``specsweep init``'s starter file for a kind of host (``ssh`` or ``local``): the engine's flags, port,
        variants (orchestrator/engines/starter.py); None (the default) when the engine offers none."""
        return None
