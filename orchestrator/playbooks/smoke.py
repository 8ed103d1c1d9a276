"""The smoke test: a few requests to the server as it runs now, nothing deployed, nothing changed.

It answers "does the current unit serve?" before a sweep touches it. The service's state is read first (read
only): a unit that is still starting is waited for (up to ``server.ready_timeout``, failing fast with the
journal's evidence if it fails), a stopped one is named in the verdict, since from the client's side a
stopped unit and a broken one look alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from orchestrator.errors import SpecsweepError, StartFailed
from orchestrator.experiment.hosts import LocalHostSpec, SSHHostSpec
from orchestrator.experiment.schema import Experiment
from orchestrator.hosts import connect_host
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.playbooks.expectations import OutcomeStatus, format_number
from orchestrator.services import make_service
from orchestrator.sweep.frame import StopSignal
from orchestrator.sweep.measure import point_settings, run_load_until_stopped

__all__ = ["smoke_test"]

#: ``progress(elapsed_seconds, timeout_seconds, latest_log_line)`` while a starting unit is waited for.
HealthCallback = Callable[[float, float, str], None]


def _wait_if_starting(
    experiment: Experiment, spec: SSHHostSpec | LocalHostSpec, stop: StopSignal, progress: HealthCallback | None
) -> tuple[str, list[str] | None]:
    """(the service's state, None) or, when it is running but never became healthy, (why, evidence)."""
    host: Any = None
    try:
        host = connect_host(spec)
        service = make_service(experiment, host)
        state = service.state()
        if not state.running:
            return state.describe(), None
        api_key = experiment.server.api_key_value
        try:
            wait_until_healthy(
                service,
                experiment.server_url(spec),
                experiment.health_paths,
                experiment.server.ready_timeout,
                api_key=api_key,
                progress=progress,
                stop=stop.requested,
            )
        except StartFailed as exc:
            return f"running but not healthy: {exc}", list(exc.evidence)[-12:]
        return state.describe(), None
    except SpecsweepError as exc:
        return f"unknown ({exc})", None
    finally:
        if host is not None:
            with contextlib.suppress(Exception):
                host.close()


def smoke_test(
    experiment: Experiment,
    spec: SSHHostSpec | LocalHostSpec,
    requests: int,
    stop: StopSignal,
    progress: HealthCallback | None = None,
) -> tuple[OutcomeStatus, str, list[str]]:
    """(status, detail, evidence) of ``requests`` sequential requests to the experiment's server on ``spec``."""
    url = experiment.server_url(spec)
    name = getattr(experiment.service, "unit", None) or "the service"
    state, evidence = _wait_if_starting(experiment, spec, stop, progress)
    if evidence is not None:
        return "fail", f"{url}: {name} is {state}", evidence
    settings = point_settings(experiment, url, None, concurrency=1, requests=requests)
    try:
        result = run_load_until_stopped(settings, stop.requested, None)
    except SpecsweepError as exc:
        return "fail", f"{url}: the load generator could not run: {exc}", []
    figures = result.figures
    completed = int(figures.get("completed") or 0)
    if completed == requests:
        ttft = (figures.get("ttft_ms") or {}).get("p50")
        detail = (
            f"{url}: {completed}/{requests} answered, {figures.get('output_tokens')} tokens, "
            f"{format_number(figures.get('output_tok_s'))} tok/s, TTFT p50 {format_number(ttft)} ms"
        )
        return "pass", detail, []
    errors = [f"{r.error_kind}: {r.error}" for r in result.records if r.error_kind is not None]
    return "fail", f"{url}: {completed}/{requests} answered; {name} is {state}", errors[:5]
