"""Where runs land, and which run a command line means.

Where run directories are created (and looked up), first match wins:

1. ``--results DIR`` on the command line;
2. ``results_dir:`` in the experiment file (relative to that file);
3. ``$SPECSWEEP_RESULTS``;
4. ``results/`` beside the experiment file;
5. without an experiment file (``report``, ``compare``, ``ls``, and the notebook): the nearest ``results/``
   from the current directory up to the project's root (the first directory with a ``pyproject.toml`` or
   ``.git``), so ``./results`` in the project's root, and ``../results`` from ``notebooks/`` or ``sweeps/``;
   ``./results`` when there is none (:func:`nearest_results`).

So a sweep's results never depend on the directory the shell happens to be in, and the commands that read runs
find them with the same rule when given the experiment file.

A run on the command line (``RUN``) is any of: a run directory; ``latest`` (the newest sweep or search under
the results root, of any experiment: never a playbook's run); ``latest~N`` (the N-th run before it, of the same
experiment and kind); ``latest-KIND`` and ``latest-KIND~N`` (the same among the runs of one kind: ``sweep``,
``search`` or ``playbook``, so ``latest-playbook`` is the newest playbook run); ``NAME/latest``,
``NAME/latest~N`` (within experiment or playbook ``NAME``, whatever the kind of its runs) and
``NAME/latest-KIND~N``; ``NAME`` (its newest run); or an experiment file (its newest run, under that file's
results root). Newest means made last: runs are ordered by the sequence each got when it was made
(``orchestrator.runs.listing.run_order``), not by the clock, which can step back. A run's kind:
``orchestrator.runs.identity.run_kind``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import StoreError
from orchestrator.runs.identity import DEFAULT_KINDS, RUN_KINDS, run_kind
from orchestrator.runs.listing import refuse_unreadable, run_order

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment

__all__ = [
    "RESULTS_ENV",
    "all_runs",
    "kinds_text",
    "nearest_results",
    "of_kinds",
    "previous_run",
    "resolve_run",
    "results_root",
    "roots_below",
    "runs_of",
    "where_else",
]

RESULTS_ENV = "SPECSWEEP_RESULTS"
_LATEST = re.compile(rf"(?:(?P<name>[^/]+)/)?latest(?:-(?P<kind>{'|'.join(RUN_KINDS)}))?(?:~(?P<back>\d+))?")


def results_root(option: str | Path | None = None, experiment: Experiment | None = None) -> Path:
    """The results root by the rule in the module docstring."""
    if option is not None and str(option) != "":
        return Path(option).expanduser()
    source = experiment.source if experiment is not None else None
    configured = getattr(experiment, "results_dir", None) if experiment is not None else None
    if configured:
        path = Path(configured).expanduser()
        # normpath: `results_dir: ../results` beside sweeps/ is `results`, not `sweeps/../results`, in messages.
        return path if path.is_absolute() or source is None else Path(os.path.normpath(source.parent / path))
    env = os.environ.get(RESULTS_ENV)
    if env:
        return Path(env).expanduser()
    if source is not None:
        return source.parent / "results"
    return nearest_results() or Path("results")


_PROJECT_MARKERS = ("pyproject.toml", ".git")


def nearest_results(start: Path | None = None) -> Path | None:
    """The nearest ``results/`` directory from ``start`` (the current directory) up to the project's root (the
    first directory holding a ``pyproject.toml`` or ``.git``), or None: ``results`` itself when it is in
    ``start``, else its absolute path."""
    here = Path.cwd() if start is None else start
    for base in (here, *here.resolve().parents):
        if (base / "results").is_dir():
            return Path("results") if base == here and start is None else base / "results"
        if any((base / marker).exists() for marker in _PROJECT_MARKERS):
            break
    return None


_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages"})
_MAX_DIRS = 2000


def roots_below(start: Path | None = None, *, depth: int = 3) -> list[Path]:
    """The ``results/`` directories holding runs below ``start`` (the current directory), at most ``depth``
    levels down, hidden directories and virtualenvs skipped and at most a few thousand directories looked at:
    where a sweep of an experiment file in a subdirectory put its runs (``results/`` beside that file)."""
    here = Path.cwd() if start is None else start
    found: list[Path] = []
    level, seen = [here], 0
    for _ in range(depth + 1):
        below: list[Path] = []
        for directory in level:
            try:
                children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())
            except OSError:
                continue
            for child in children:
                seen += 1
                if seen > _MAX_DIRS:
                    return found
                if child.name.startswith(".") or child.name in _SKIP_DIRS or (child / "pyvenv.cfg").exists():
                    continue
                if child.name == "results" and all_runs(child):
                    found.append(child.relative_to(here) if start is None else child)
                else:
                    below.append(child)
        level = below
    return found


def where_else(base: Path) -> str:
    """``; runs are under sub/results: --results sub/results, or give the experiment file`` when there are
    runs below the current directory but not under ``base`` (empty otherwise)."""
    others = [p for p in roots_below() if p.resolve() != base.resolve()][:3]
    if not others:
        return ""
    return (
        f"; runs are under {', '.join(str(p) for p in others)}: --results {others[0]}, or give the experiment "
        "file (its runs are looked up beside it)"
    )


def _is_run(path: Path) -> bool:
    return (path / "run.json").is_file()


def runs_of(root: Path, experiment: str) -> list[Path]:
    """The run directories of one experiment under ``root``, oldest first (empty when there are none)."""
    base = root / experiment
    try:
        return sorted((p for p in base.iterdir() if _is_run(p)), key=run_order)
    except OSError:
        return []


def all_runs(root: Path) -> list[Path]:
    """Every run directory under ``root`` (``root/<experiment>/<run id>``), oldest first across experiments."""
    try:
        experiments = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    runs = [run for base in experiments for run in runs_of(root, base.name)]
    return sorted(runs, key=run_order)


def of_kinds(runs: list[Path], kinds: frozenset[str] | set[str]) -> list[Path]:
    """The runs of ``runs`` whose kind is one of ``kinds``, in the same order."""
    return [run for run in runs if run_kind(run) in kinds]


def kinds_text(kinds: frozenset[str] | set[str]) -> str:
    """``sweep or search``, ``playbook``: the kinds, in :data:`RUN_KINDS`' order, for messages."""
    return " or ".join(k for k in RUN_KINDS if k in kinds)


def _elsewhere(runs: list[Path], kinds: frozenset[str] | set[str]) -> str:
    """``; 2 playbook runs there: latest-playbook names the newest`` when runs of other kinds exist."""
    others: dict[str, int] = {}
    for run in runs:
        kind = run_kind(run)
        if kind not in kinds:
            others[kind] = others.get(kind, 0) + 1
    return "".join(
        f"; {n} {kind} run{'s' if n != 1 else ''} there: latest-{kind} names the newest" for kind, n in others.items()
    )


def previous_run(run_dir: Path) -> Path:
    """The run of the same experiment that started just before ``run_dir`` (beside it)."""
    siblings = runs_of(run_dir.parent.parent, run_dir.parent.name)
    resolved = run_dir.resolve()
    earlier = [p for p in siblings if p.name < run_dir.name and p.resolve() != resolved]
    if not earlier:
        raise StoreError(f"{run_dir}: no earlier run of {run_dir.parent.name} beside it to compare with")
    return earlier[-1]


def resolve_run(ref: str | Path, root: str | Path | None = None) -> Path:
    """The run directory ``ref`` names (module docstring); ``root`` defaults by :func:`results_root`."""
    text = str(ref)
    path = Path(text).expanduser()
    if _is_run(path):
        return path
    if path.suffix in (".yaml", ".yml") and path.is_file():
        from orchestrator.experiment.schema import load_experiment

        experiment = load_experiment(path)
        base = results_root(root, experiment)
        runs = runs_of(base, experiment.name)
        if not runs:
            raise StoreError(f"no runs of {experiment.name} ({path}) under {base}")
        return runs[-1]
    base = results_root(root)
    match = _LATEST.fullmatch(text)
    if match is None and "/" not in text and (base / text).is_dir():
        match = _LATEST.fullmatch(f"{text}/latest")
    if match is None:
        raise StoreError(
            f"{text}: not a run directory (no run.json); give a run directory, an experiment file, latest, "
            f"latest~N or EXPERIMENT/latest (runs are looked up under {base}; --results or ${RESULTS_ENV} "
            "changes that)"
        )
    back = int(match.group("back") or 0)
    name = match.group("name")
    # A name says which runs; without one, bare `latest` means a sweep or a search, never a playbook's run.
    kinds = frozenset(RUN_KINDS) if name is not None else DEFAULT_KINDS
    if match.group("kind"):
        kinds = frozenset({match.group("kind")})
    if name is None:
        everything = all_runs(base)
        if not everything:
            elsewhere = where_else(base)
            raise StoreError(
                f"no runs under {base}" + (elsewhere or f" (--results or ${RESULTS_ENV} names another root)")
            )
        chosen = of_kinds(everything, kinds)
        if not chosen:
            raise StoreError(f"{text}: no {kinds_text(kinds)} runs under {base}{_elsewhere(everything, kinds)}")
        name = chosen[-1].parent.name
    every = runs_of(base, name)
    runs = of_kinds(every, kinds)
    if not runs:
        what = f"{kinds_text(kinds)} runs" if kinds != frozenset(RUN_KINDS) else "runs"
        raise StoreError(f"no {what} of {name!r} under {base}{_elsewhere(every, kinds)}")
    if back >= len(runs):
        what = f"{kinds_text(kinds)} run(s)" if kinds != frozenset(RUN_KINDS) else "run(s)"
        raise StoreError(f"{text}: {name} has {len(runs)} {what} under {base}, not {back + 1}")
    if back == 0:
        refuse_unreadable(every, runs[-1], name)  # a newest run.json unreadable made latest an older run
    return runs[-1 - back]
