"""Shared fixtures: paths of the checkout and a writer for experiment files."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.engine_setup import marker_stages, wait_for
from tests.timing import scaled

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write ``text`` to ``tmp_path/name`` and return the path."""

    def write(text: str, name: str = "exp.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    # pytest runs fixture teardown on KeyboardInterrupt but not on SIGTERM: a CI time-out or a `kill` would
    # otherwise leave test hosts (containers, network namespaces) and simulators behind.
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, _sigterm_as_interrupt)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (scripts/test.sh runs ``-n N --dist loadgroup``), the tests that share a module- or
    class-scoped fixture (one sweep, one started server) run in one worker, so the fixture is built once and
    not once per worker; a test already in an ``xdist_group`` keeps it. The other tests are dealt freely.
    (tryfirst: xdist's own hook, which reads the marks, runs after this one.)"""
    _scale_time_limits(items)
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group") is not None:
            continue
        shared = sorted(
            f"{defs[-1].baseid}::{name}"
            for name, defs in info.name2fixturedefs.items()
            if defs and defs[-1].scope in ("module", "class", "package")
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0]))


def _scale_time_limits(items: list[pytest.Item]) -> None:
    """Each test's pytest-timeout limit (its ``timeout`` mark, else the configured one) multiplied by the machine's
    time scale (tests/timing.py): a limit guards against a hang, and a busy machine is not one."""
    from pytest_timeout import get_env_settings

    if not items:
        return
    configured = get_env_settings(items[0].config).timeout
    for item in items:
        mark = item.get_closest_marker("timeout")
        limit = (mark.args[0] if mark.args else mark.kwargs.get("timeout")) if mark is not None else configured
        if limit:  # 0 or none: no limit to scale
            item.add_marker(pytest.mark.timeout(scaled(float(limit))), append=False)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test that needs a real engine waits for scripts/test.sh's background set-up of it (tests/engine_setup.py)
    here, outside its own time limit (pytest-timeout's timer starts inside this wrapper)."""
    for stage in marker_stages({mark.name for mark in item.iter_markers()}):
        wait_for(stage)
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test whose engine is not there is skipped, with the reason (not built, its set-up failed, ...)."""
    from tests.contract.llamacpp_timings import llama_cpp_tree
    from tests.integration.llamacpp_support import built_paths
    from tests.integration.sglang_support import engine_paths as sglang_paths
    from tests.integration.vllm_support import engine_paths

    lookups = {"llamacpp_tree": llama_cpp_tree, "llamacpp": built_paths, "vllm": engine_paths, "sglang": sglang_paths}
    for name in sorted({mark.name for mark in item.iter_markers()} & lookups.keys()):
        found = lookups[name]()
        if isinstance(found, str):
            pytest.skip(found)


@pytest.fixture(autouse=True, scope="session")
def _own_controller_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each pytest process (an xdist worker) its own registry of live controllers (orchestrator/runs/neighbours.py,
    under ``$XDG_STATE_HOME``; the CLI subprocesses inherit it): the sweeps of parallel workers would otherwise
    warn of each other and carry the ``overlapping_runs`` finding. A test of that registry sets its own."""
    previous = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = previous


@pytest.fixture(autouse=True)
def _no_remembered_secrets() -> Iterator[None]:
    """orchestrator.redaction remembers every secret value it meets, for the life of the process, and masks it
    by value in everything written after; a test's values (hypothesis draws among them: '00000000',
    'errors_by_kind') must not mask the next test's output in the same pytest worker."""
    from orchestrator.redaction import forget

    yield
    forget()
