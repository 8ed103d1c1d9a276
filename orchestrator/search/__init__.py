"""Finding the best configuration without the whole grid: an objective, a search space, strategies that
propose the next deployments and read back their records, the search's history and its recommendations.

The modules, each small: :mod:`~orchestrator.experiment.search` (the ``objective:`` and ``search:`` sections),
:mod:`~orchestrator.search.space` (the candidates and their ordered parameters),
:mod:`~orchestrator.search.objective` (a candidate's score from its records),
:mod:`~orchestrator.search.strategies` (grid, random, successive halving) and
:mod:`~orchestrator.search.bayesian` (Optuna's TPE), :mod:`~orchestrator.search.driver` (the plan a search
starts from, its strategy, the lossless verdicts), :mod:`~orchestrator.search.history` (``search/history.jsonl``),
:mod:`~orchestrator.search.cost` (restarts and GPU-hours up front), :mod:`~orchestrator.search.preview`
(the plan's cost line and the dry run's first round), :mod:`~orchestrator.search.recommend` (the best
configuration per load, as YAML) and :mod:`~orchestrator.report.search` (the report's figure and closing
section). docs/search.md is the user's guide.

This package decides *what* to deploy next, never *where*: the launcher and its slots stay the runner's, and the
seam the runner asks for the next deployment is the sweep's (``sweep/searching.py``). Nothing here
imports the sweep, the launchers, the hosts or the services.
"""
