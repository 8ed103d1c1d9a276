"""What every dialect provides: the life-cycle lines, the scheduler hooks and the HTTP side of one engine.

The scheduler (``orchestrator.sim.engine``) calls ``prefill``, ``decode_step`` and ``request_finished``; a
dialect that logs on a clock (vLLM) sets ``tick_seconds`` and the server calls ``tick``. The HTTP server
(``orchestrator.sim.server``) asks the dialect which endpoints the engine has, what its ``/metrics`` says,
and how its responses look (``ResponseFormat``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from orchestrator.errors import ConfigError
from orchestrator.sim.stats import Counts, ServerStats

if TYPE_CHECKING:
    from orchestrator.sim.config import SimConfig
    from orchestrator.sim.request import SimRequest

__all__ = ["Dialect", "EndpointInfo", "compact"]

LogFn = Callable[[str], None]


def compact(value: Any) -> str:
    """JSON without spaces, as pydantic's ``model_dump_json`` and msgspec write it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class EndpointInfo:
    """One GET endpoint of an engine: ``kind`` is what the server does for it."""

    path: str
    kind: str  # health | health_generate | models | info | version | props | metrics | ping
    body: str | None = None  # health: the body a healthy server answers with (None: empty)


@dataclass
class Dialect:
    """The engine-specific side of the simulator. Subclasses set the class variables and the hooks."""

    engine: ClassVar[str] = ""
    versions: ClassVar[tuple[str, ...]] = ()  # the first is the default (current) version
    algorithms: ClassVar[tuple[str, ...]] = ("ar", "linear", "ddtree")
    tick_seconds: ClassVar[float | None] = None
    #: What the dialect simulates beyond every dialect's flags; the simulator refuses these for a dialect that
    #: does not (orchestrator/sim/dialects/__init__.py ``make_dialect``).
    takes_dp_size: ClassVar[bool] = False  # --dp-size: DP-attention groups, each its own scheduler
    takes_idle_debug: ClassVar[bool] = False  # the idle-debug-intervals fault: data-parallel engines
    takes_spec_schedule: ClassVar[bool] = False  # num_speculative_tokens_per_batch_size, on a chain
    coloured_log: ClassVar[bool] = False  # the coloured-log fault (:meth:`coloured`)
    uncoloured: ClassVar[str] = ""  # why the engine's log has no colours, said when the fault is refused
    #: The engine opens its HTTP port only once the model is loaded (vLLM), not before loading.
    http_after_load: ClassVar[bool] = False

    config: SimConfig
    log: LogFn
    version: str = ""
    groups: list[ServerStats] = field(default_factory=list)  # one per scheduler (DP group), set by the server
    drafted: int = 0  # tokens drafted per request per verify step (tree nodes for ddtree), set by the server
    draft_depth: int = 0  # the draft's depth: the number of positions a draft has
    started_wall: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if not self.version:
            self.version = self.versions[0]
        if self.version not in self.versions:
            raise ConfigError(
                f"--engine-version {self.version!r}: the {self.engine} dialect knows {', '.join(self.versions)}"
            )
        if self.config.algorithm not in self.algorithms:
            raise ConfigError(
                f"--algorithm {self.config.algorithm}: the {self.engine} dialect simulates {', '.join(self.algorithms)}"
            )

    @classmethod
    def max_running(cls, config: SimConfig) -> int:
        """The requests one scheduler runs at once: the profile's ``max_running_requests``."""
        return config.profile.max_running_requests

    @classmethod
    def coloured(cls, log: LogFn) -> LogFn:
        """The coloured-log fault (orchestrator/sim/faults.py): ``log`` with each line as the engine's own
        formatter writes it under a terminal; the lines as they are for a dialect without colours."""
        return log

    # The configuration.

    @property
    def speculative(self) -> bool:
        return self.config.algorithm != "ar"

    # Life cycle (lines the engine prints).

    def startup_lines(self, url: str) -> list[str]:
        return []

    def load_begin_lines(self) -> list[str]:
        """Lines printed when the model starts loading (before the progress lines)."""
        return []

    def loading_line(self, done: int, total: int, elapsed: float, remaining: float) -> str | None:
        return None

    def loaded_lines(self) -> list[str]:
        return []

    def uvicorn_lines(self, url: str) -> list[str]:
        """Lines the engine's HTTP server prints once it listens, before the model is loaded (SGLang's uvicorn)."""
        return []

    def warmup_request(self) -> dict[str, Any] | None:
        """The native ``/generate`` body the engine sends itself before it says it is ready (None: no warm-up)."""
        return None

    def ready_lines(self, url: str) -> list[str]:
        return []

    def fail_start_lines(self) -> list[str]:
        return []

    def crash_lines(self, completed: int) -> list[str]:
        return []

    # Scheduler hooks.

    def prefill(self, group: int, batch: list[SimRequest], new_tokens: int, now: float) -> None:
        """A prefill batch ran on scheduler ``group``; each request got its first token."""

    def decode_step(self, group: int, step: Counts, now: float) -> None:
        """One decode step of scheduler ``group`` committed ``step``."""

    def request_finished(self, req: SimRequest, now: float) -> None:
        """``req`` left the batch finished (not aborted)."""

    def idle_hook(self, group: int, now: float) -> None:
        """Scheduler ``group`` has nothing to run."""

    def setup_groups(self) -> None:
        """Called once the server has made its schedulers (``groups``)."""

    def route(self, in_flight: list[int], counter: int) -> int:
        """The scheduler a new request goes to, given each one's requests in flight and the number of requests
        routed before: round robin (SGLang's DP controller, managers/data_parallel_controller.py
        DataParallelController.round_robin_scheduler, its default load_balance_method)."""
        return counter % len(in_flight)

    def truth(self, record: dict[str, Any]) -> None:
        """Append ``record`` (what the engine counted over a logged interval but did not print) to the
        ``--truth-log`` file, when one is set: the tests' view of the engine's own sums, never the engine's."""
        path = self.config.truth_log
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")

    def tick(self, now: float) -> None:
        """Called every ``tick_seconds`` by the server (engines that log on a clock)."""

    # HTTP.

    def endpoints(self) -> list[EndpointInfo]:
        return []

    def generation_paths(self) -> dict[str, str]:
        """POST path -> api kind (chat, completions, generate, llamacpp)."""
        return {"/v1/chat/completions": "chat", "/v1/completions": "completions"}

    def loading_response(self) -> tuple[int, str | None]:
        """What every endpoint answers while the model loads: status and JSON body (None: empty)."""
        return 503, None

    def metrics_text(self, *, bad_line: bool = False) -> str:
        return ""

    def reset_counters(self) -> None:
        """The ``counter-reset`` fault (orchestrator/sim/faults.py): every counter ``metrics_text`` exports goes
        back to where a new process starts it, the rest of the state (log, gauges, pid) as it was."""

    def info(self, port: int) -> dict[str, Any]:
        """The body of the engine's information endpoint."""
        return {}

    def info_requested(self, path: str) -> None:
        """An ``info`` or ``model_info`` endpoint was asked for (the engine may log a deprecation)."""

    def model_info(self) -> dict[str, Any]:
        """The body of the engine's ``model_info`` endpoint, when it has one."""
        return {}

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": []}

    def error_body(self, message: str, *, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}

    def control_routes(self) -> list[tuple[str, str]]:
        """(method, path) of the engine's control endpoints the simulator answers: its prefix-cache flush
        (``orchestrator/engines/cache.py`` names each engine's)."""
        return []

    def control(self, method: str, path: str, params: dict[str, str], busy: bool) -> tuple[int, Any]:
        """The answer to a control request on ``path`` (the route's pattern) with its query and path
        ``params``, ``busy`` when requests are running or waiting: status and body (a dict is JSON, a str
        text, None an empty body)."""
        return 404, None

    def bad_metric_lines(self, index: int) -> list[str]:
        return []

    # Responses (the server builds them with these).

    def completion_id(self, req: SimRequest, chat: bool) -> str:
        return req.rid

    def openai_response(
        self, req: SimRequest, *, chat: bool, model: str, created: int, options: dict[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def stream_format(self, req: SimRequest, *, chat: bool, model: str, created: int) -> StreamFormat:
        raise NotImplementedError

    def native_meta_info(self, req: SimRequest, *, final: bool, e2e_latency: float) -> dict[str, Any]:
        """The ``meta_info`` of a native ``/generate`` chunk (engines whose ``generation_paths`` have one)."""
        raise NotImplementedError

    def stream_tail(self, req: SimRequest, fmt: StreamFormat, *, reason: str, options: dict[str, Any]) -> list[str]:
        """The chunks after the last content chunk (finish, extensions, usage), ``[DONE]`` excluded."""
        raise NotImplementedError


@dataclass
class StreamFormat:
    """Pre-rendered pieces of one streamed response's SSE chunks (the firehose writes many per second)."""

    head: str  # 'data: {...,"choices":[{"index":0,' up to the content string's opening quote
    tail: str  # after the content string, to the end of the event
    first: str | None = None  # the chat role chunk, sent before the first content chunk (None: none)
    envelope: dict[str, Any] = field(default_factory=dict)

    def content(self, text: str) -> str:
        """One delta. ``text`` comes from the simulator's vocabulary, which needs no JSON escaping."""
        return self.head + text + self.tail
