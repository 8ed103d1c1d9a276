"""How long a test may wait: every subprocess timeout and wall-clock limit in the tests goes through :func:`scaled`.

A limit in a test is a guard against a hang, never a measurement: on a busy machine (a load average of 25 on two
cores) a sweep that takes a minute when quiet takes ten, and a fixed limit fails where nothing is wrong. So each
limit is written as it would be on a quiet machine and multiplied by :func:`time_scale`:

- ``SPECSWEEP_TEST_TIME_SCALE`` (a number >= 1) when set: a slow CI machine sets it once for the whole suite;
- else the machine's load, measured when the limit is set: the 1-minute load average per core (at least 1, at
  most :data:`MAX_MEASURED`, so a load spike cannot turn a hang into an hour's wait).

pytest-timeout's limit of each test is scaled alike (tests/conftest.py). Helpers that take a limit
(``run_cli``, ``wait_until``, ``wait_for``) scale it themselves; a caller passes the quiet machine's figure.
"""

from __future__ import annotations

import os

ENV = "SPECSWEEP_TEST_TIME_SCALE"

#: The largest factor the measured load gives (the variable may set more).
MAX_MEASURED = 8.0


def time_scale() -> float:
    """The factor every limit is multiplied by, now (see the module docstring)."""
    given = os.environ.get(ENV, "").strip()
    if given:
        try:
            value = float(given)
        except ValueError:
            raise ValueError(f"{ENV}={given!r}: not a number (a factor such as 2 or 4.5)") from None
        if not value >= 1:
            raise ValueError(f"{ENV}={given!r}: a factor of at least 1")
        return value
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this system
        return 1.0
    return min(max(per_core, 1.0), MAX_MEASURED)


def scaled(seconds: float) -> float:
    """``seconds`` (a limit on a quiet machine) multiplied by :func:`time_scale`."""
    return seconds * time_scale()
