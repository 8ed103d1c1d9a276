"""The skeleton every run shares, a sweep's and a playbook's: its body, then its way out, whatever happened.

    frame = RunFrame(store, stop)
    end = frame.run(body, restore=..., closing=...)
        body()       the run's own work; returns the final state (``done``, ``failed``, ``stopped``,
                     ``interrupted``), or raises: an error ends the run ``failed``; Ctrl-C ends it
                     ``interrupted`` and propagates once the way out is done
        restore()    always: every host (slot) put back; returns the problems, one line each
        closing(end) always: the run's own last words (a playbook's expectations.json), and the fields of
                     the ``end`` event (``points``, ``stop_reason``)
        then the ``end`` event and the run's final state in ``run.json`` (a full disk does not replace the
        error that ended the run), and the run lock given back (orchestrator/runs/runlock.py)
    frame.raise_for(end, ...)
        restore problems first (ServiceError naming the run directory), then the error that ended the run
        (named with the run directory as the caller says), then ``Interrupted``

:class:`StopSignal` is how Ctrl-C and SIGTERM reach a running body.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from orchestrator.errors import Interrupted, ServiceError, SpecsweepError, StoreError

if TYPE_CHECKING:
    from orchestrator.runs.store import RunState, RunStore

__all__ = ["RunEnd", "RunFrame", "StopSignal"]


class StopSignal:
    """Set once to stop at the next safe point; set twice to also skip waiting (the host is still restored)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()

    def request(self) -> None:
        if self.requested.is_set():
            self.hurry.set()
        self.requested.set()

    def __bool__(self) -> bool:
        return self.requested.is_set()


@dataclass
class RunEnd:
    """How a run ended: its final state, the error that ended it (if one did), the restore problems."""

    state: str
    error: Exception | None = None
    restore_errors: list[str] = field(default_factory=list)


class RunFrame:
    """One run's way through: its body, then restore, closing words, the ``end`` event and the final state."""

    def __init__(self, store: RunStore, stop: StopSignal) -> None:
        self.store = store
        self.stop = stop

    def run(
        self,
        body: Callable[[], str],
        *,
        restore: Callable[[], list[str]],
        closing: Callable[[RunEnd], dict[str, Any]] | None = None,
    ) -> RunEnd:
        end = RunEnd("failed")
        try:
            end.state = body()
        except KeyboardInterrupt:
            self.stop.request()
            end.state = "interrupted"
            raise
        except Exception as exc:
            end.state, end.error = "failed", exc
        finally:
            end.restore_errors = list(restore())
            fields = closing(end) if closing is not None else {}
            if end.error is not None:  # what ended the run, for `report` of a run that measured nothing
                fields = {**fields, "error": " ".join(str(end.error).split())[:500] or type(end.error).__name__}
            with contextlib.suppress(StoreError):
                self.store.event("end", state=end.state, restore_errors=end.restore_errors, **fields)
            with contextlib.suppress(StoreError):
                self.store.set_state(
                    cast("RunState", end.state),
                    stop_reason=fields.get("stop_reason"),
                    points=fields.get("points") or None,
                )
            self.store.release()  # the run lock: the run's last word is written
        return end

    def raise_for(
        self,
        end: RunEnd,
        *,
        named: Callable[[SpecsweepError], SpecsweepError],
        interrupted: str,
    ) -> None:
        """Raise what the run ended with (see the module docstring); return when it ended well.

        ``named`` gives the SpecsweepError that ended the run as the user sees it (with the run directory);
        any other exception is a bug and propagates as it is. ``interrupted`` is the message of Interrupted.
        """
        path = self.store.path
        if end.restore_errors:
            raise ServiceError("; ".join(end.restore_errors) + f" (run directory: {path})")
        error = end.error
        if error is not None:
            if isinstance(error, SpecsweepError):
                shown = named(error)
                if shown is error:
                    raise error
                raise shown from error
            raise error
        if end.state == "interrupted":
            raise Interrupted(interrupted)
