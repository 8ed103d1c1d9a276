"""The secrets of a verification experiment, read again from where the sweep read them (issue 49).

A run keeps its experiment redacted (``experiment.yaml``: a secret written inline is ``[redacted]``, an inline
``server.api_key`` pydantic's ``**********``). The verification experiment is made from that copy, so without
this its servers ran with ``HF_TOKEN=[redacted]`` and its load sent ``**********`` as the API key:

- a secret given by reference (``{secret_env: NAME}``, ``{secret_file: PATH}``) stays a reference, read when the
  verification sweep starts, as the sweep read it; a relative ``secret_file`` is made absolute against the
  experiment file the run came from (it was relative to that file, not to the run directory);
- a secret written inline is read again from that experiment file (run.json's ``experiment_file``), only where
  the file still holds, redacted, what the run stored; it reaches the verification sweep through this
  process's environment, as ``{secret_env: SPECSWEEP_VERIFY_...}``, so the verification experiment written
  into the run directory never holds it in clear. Where no reference can stand (inside a command line, a
  ``vars`` or matrix value), or the file is gone or changed, the verification is refused, naming the key.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.analysis.schedule import ScheduleError
from orchestrator.errors import SpecsweepError
from orchestrator.redaction import REDACTED

__all__ = ["MASKED_API_KEY", "restore_secrets", "verification_secrets"]

#: How pydantic writes a SecretStr (an inline ``server.api_key``) into the resolved experiment.
MASKED_API_KEY = "**********"
_NOT_NAME = re.compile(r"[^A-Z0-9]+")


def _masked(doc: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string of ``doc`` that holds a redacted secret, with its key path."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _masked(value, (*path, str(key)))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _masked(value, (*path, str(index)))
    elif isinstance(doc, str) and (REDACTED in doc or doc == MASKED_API_KEY):
        yield path, doc


def _at(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if isinstance(doc, dict):
            doc = doc.get(key)
        elif isinstance(doc, list) and key.isdigit() and int(key) < len(doc):
            doc = doc[int(key)]
        else:
            return None
    return doc


def _absolute_secret_files(doc: Any, base: Path) -> None:
    """Every relative ``secret_file`` of ``doc`` made absolute against ``base`` (in place)."""
    if isinstance(doc, dict):
        path = doc.get("secret_file")
        if isinstance(path, str) and len(doc) == 1:
            resolved = Path(path).expanduser()
            doc["secret_file"] = str(resolved if resolved.is_absolute() else base / resolved)
            return
        for value in doc.values():
            _absolute_secret_files(value, base)
    elif isinstance(doc, list):
        for value in doc:
            _absolute_secret_files(value, base)


def restore_secrets(doc: dict[str, Any], stored: Path, source: str | None) -> dict[str, str]:
    """Make ``doc`` (the run's stored experiment, ``stored``) carry its secrets again, in place; return the
    environment variables (name -> value) the verification sweep reads the inline ones from."""
    base = Path(source).parent if source else stored.parent
    _absolute_secret_files(doc, base)
    masked = list(_masked(doc))
    if not masked:
        return {}
    where = ".".join(masked[0][0])
    if not source or not Path(source).is_file():
        raise ScheduleError(
            f"{stored}: {where} is a secret written inline, which the run keeps redacted, and the experiment file "
            f"it came from ({source or 'not recorded'}) is not there to read it from again: give the secret as "
            "{secret_env: NAME} or {secret_file: PATH}"
        )
    from orchestrator.experiment.schema import load_experiment
    from orchestrator.runs.identity import resolved_experiment

    try:
        experiment = load_experiment(source)
    except SpecsweepError as exc:
        raise ScheduleError(f"cannot read the run's secrets again from {source}: {exc}") from None
    again = resolved_experiment(experiment)  # what the run would store now: it must be what it stored
    clear = experiment.model_dump(mode="json", exclude_none=True)
    env: dict[str, str] = {}
    for path, shown in masked:
        key = ".".join(path)
        if _at(again, path) != shown:
            raise ScheduleError(
                f"{source}: {key} is no longer what run {stored.parent.name} ran with (the file changed since): "
                "the secret it ran with cannot be read again"
            )
        if path == ("server", "api_key"):
            value = experiment.server.api_key_value
        elif len(path) == 3 and path[:2] == ("service", "environment"):
            value = _at(clear, path)
        else:
            raise ScheduleError(
                f"{stored}: {key} holds a secret written inline in a place a reference cannot stand: give it in "
                "service.environment or server.api_key as {secret_env: NAME} or {secret_file: PATH}"
            )
        if not isinstance(value, str) or not value:
            raise ScheduleError(f"{source}: {key}: the secret cannot be read again")
        name = "SPECSWEEP_VERIFY_" + _NOT_NAME.sub("_", "_".join(path[1:]).upper()).strip("_")
        env[name] = value
        parent = _at(doc, path[:-1])
        assert isinstance(parent, dict)
        parent[path[-1]] = {"secret_env": name}
    return env


def verification_secrets(source_run: Path) -> dict[str, str]:
    """The environment variables (name -> value) a verification experiment derived from ``source_run`` reads
    its inline secrets from, read again as when it was derived (``verify-schedule --resume``; issue 58, S9).
    The verification experiment keeps the source's ``server`` and ``service`` as they were, and only there can
    an inline secret become a reference (:func:`restore_secrets`), so only they are read."""
    from orchestrator.runs.store import RunStore

    store = RunStore.open(source_run)
    whole = store.experiment()
    doc: dict[str, Any] = {key: copy.deepcopy(whole[key]) for key in ("server", "service") if key in whole}
    return restore_secrets(doc, source_run / "experiment.yaml", store.info.experiment_file)
