"""The simulator's injectable faults (``--fault NAME``, repeatable), parsed into one ``Faults`` value.

fail-start          print a Python traceback while loading and exit non-zero (1)
crash-after=N       exit abruptly (code 1, after an error line) once N requests have completed
slow-start[=S]      loading takes S more seconds than --load-seconds (default 30)
http-500-rate=P     each generation request fails with HTTP 500 with probability P
stall[=P]           a generation request stops mid-response (after half its tokens) and never ends,
                    with probability P (default 1: every one); the connection stays open
bad-metrics         malformed metric lines among the good ones (log lines and one /metrics sample)
commit-bug          DDTree's commit path commits at most 2 tokens while reporting the true depth
wrong-token[=P]     a verification that accepts a wrong draft: each verify step that commits at least one
                    draft puts a wrong word in place of its last accepted draft with probability P (default
                    0.05), and the answer goes on from there as the target would after that token (its own
                    seeded continuation), so the output is no longer the autoregressive one; AR is untouched
                    (it drafts nothing), which is what the lossless check is tested against
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from orchestrator.errors import ConfigError

__all__ = ["FAULT_NAMES", "Faults", "parse_faults"]

FAULT_NAMES = (
    "fail-start",
    "crash-after",
    "slow-start",
    "http-500-rate",
    "stall",
    "bad-metrics",
    "commit-bug",
    "wrong-token",
)

DEFAULT_SLOW_START_SECONDS = 30.0
DEFAULT_WRONG_TOKEN_RATE = 0.05


@dataclass(frozen=True)
class Faults:
    """Which faults are switched on, with their parameters."""

    fail_start: bool = False
    crash_after: int | None = None
    slow_start_seconds: float = 0.0
    http_500_rate: float = 0.0
    stall_rate: float = 0.0
    bad_metrics: bool = False
    commit_bug: bool = False
    wrong_token_rate: float = 0.0
    specs: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.specs)


def _number(spec: str, value: str | None, kind: type[int] | type[float], low: float, high: float) -> float:
    if value is None or value == "":
        raise ConfigError(f"fault {spec!r} needs a value (e.g. {spec.split('=')[0]}=…)", key="fault")
    try:
        number = kind(value)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"fault {spec!r}: {value!r} is not {noun}", key="fault") from None
    if not low <= number <= high:
        raise ConfigError(f"fault {spec!r}: value must be between {low:g} and {high:g}", key="fault")
    return number


def parse_faults(specs: Iterable[str]) -> Faults:
    """Parse ``--fault`` values like ``crash-after=5`` into ``Faults``; unknown names are a ``ConfigError``."""
    faults = Faults()
    seen: list[str] = []
    for raw in specs:
        spec = raw.strip()
        name, _, value = spec.partition("=")
        arg = value if "=" in spec else None
        if name == "fail-start":
            faults = replace(faults, fail_start=True)
        elif name == "crash-after":
            faults = replace(faults, crash_after=int(_number(spec, arg, int, 1, 10**9)))
        elif name == "slow-start":
            seconds = DEFAULT_SLOW_START_SECONDS if arg is None else _number(spec, arg, float, 0, 86400)
            faults = replace(faults, slow_start_seconds=seconds)
        elif name == "http-500-rate":
            faults = replace(faults, http_500_rate=_number(spec, arg, float, 0, 1))
        elif name == "stall":
            faults = replace(faults, stall_rate=1.0 if arg is None else _number(spec, arg, float, 0, 1))
        elif name == "bad-metrics":
            faults = replace(faults, bad_metrics=True)
        elif name == "commit-bug":
            faults = replace(faults, commit_bug=True)
        elif name == "wrong-token":
            rate = DEFAULT_WRONG_TOKEN_RATE if arg is None else _number(spec, arg, float, 0, 1)
            faults = replace(faults, wrong_token_rate=rate)
        else:
            raise ConfigError(f"unknown fault {name!r}; known faults: {', '.join(FAULT_NAMES)}", key="fault")
        seen.append(spec)
    return replace(faults, specs=tuple(seen))
