"""How well each search strategy finds the grid's best configuration, and for how many restarts.

The space is ``sweeps/k26-search.yaml``'s: DDTree budget x topk x draft depth (4 x 4 x 3 = 48 configurations)
plus the AR and linear baselines, so the grid is 50 restarts. The objective: output tokens/s at C=16.

The strategies are specsweep's own (``orchestrator.search``: the space built from the experiment's plan, the
same ``SuccessiveHalving`` and ``BayesianStrategy`` classes the sweep runs), driven here against simulated
measurements instead of a running server, so that 10 seeds x 4 strategies take a minute on 2 cores:

- the truth of a configuration is the simulator's own model of its k26 profile at C=16 (accept length from
  the acceptance model, steady-state C x E / step(C): the figures ``bench/sim_calibration.py`` prints);
- one window of ``requests`` requests measures the truth times (1 + noise), noise normal with a relative
  standard deviation of ``--noise`` (3%: the most the bootstrap intervals of 16-request windows at C=16 on
  the simulator with ``--step-jitter 0.05`` said, their median being 2.0%) divided by sqrt(requests / 16); a
  window's standard error is that standard deviation, as the record's interval would say;
- every strategy, the grid included, measures a candidate's first window at 16 requests; successive
  halving measures survivors eta times longer (48, then 144 requests), each a restart.

The grid picks the configuration with the best measured figure; a strategy picks its best feasible
candidate. The distance is ``1 - truth(strategy's pick) / truth(grid's pick)`` (negative: the strategy's pick
is better than the grid's). Restarts count the two baselines; GPU-hours take 480 s a restart on 8 GPUs.

    .venv/bin/python bench/search.py                       # 10 seeds, the table of bench/RESULTS-search.md
    .venv/bin/python bench/search.py --seeds 40 --first-seed 100   # seeds the tuning never saw
    .venv/bin/python bench/search.py --seeds 40 --noise 0.05
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.search.bayesian import BayesianStrategy
from orchestrator.search.cost import budget_restarts
from orchestrator.search.driver import search_plan
from orchestrator.search.objective import LevelScore, Score
from orchestrator.search.space import Candidate, SearchSpace
from orchestrator.search.strategies import GridStrategy, RandomStrategy, Strategy, SuccessiveHalving
from orchestrator.sim.model import Drafter, Speculator, expected_accept_length
from orchestrator.sim.profiles import PROFILES
from orchestrator.sim.timing import StepTiming

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = ROOT / "sweeps" / "k26-search.yaml"
RESTART_SECONDS = 480.0
GPUS = 8
CONCURRENCY = 16
BRIEF_REQUESTS = 16


def truth(candidate: Candidate) -> float:
    """The simulator's steady-state output tokens/s of this configuration at C=16 (k26 profile)."""
    profile = PROFILES["k26"]
    drafter = Drafter(profile.top1_accuracy, profile.depth_decay, profile.rank_share)
    params = candidate.deployment.params
    spec = Speculator(
        "ddtree", drafter, draft_tokens=int(params["depth"]), budget=int(params["budget"]), topk=int(params["topk"])
    )
    assert spec.tree is not None
    accept = expected_accept_length(spec.tree, drafter)
    return CONCURRENCY * accept / StepTiming(profile, spec).decode_seconds(CONCURRENCY)


class Bench:
    """Simulated windows for one seed: every strategy sees the same noise for the same (candidate, window)."""

    def __init__(self, space: SearchSpace, truths: dict[str, float], seed: int, noise: float) -> None:
        self.space, self.truths, self.seed, self.noise = space, truths, seed, noise

    def window(self, key: str, rung: int, eta: int) -> tuple[float, float]:
        requests = BRIEF_REQUESTS * eta**rung
        sigma = self.noise / math.sqrt(requests / BRIEF_REQUESTS)
        rng = random.Random(f"{self.seed}/{key}/{rung}")
        true = self.truths[key]
        return true * (1.0 + rng.gauss(0.0, sigma)), true * sigma

    def run(self, strategy: Strategy, eta: int = 3) -> tuple[str, int]:
        """Drive ``strategy`` to its end; its best feasible candidate and the candidate restarts it spent."""
        windows: dict[str, list[tuple[float, float]]] = {}
        restarts = 0
        while True:
            batch = strategy.ask()
            if not batch:
                break
            for proposal in batch:
                restarts += 1
                key = proposal.candidate.key
                windows.setdefault(key, []).append(self.window(key, proposal.rung, eta))
                strategy.tell(proposal, _pooled(windows[key]))
        best = max(windows, key=lambda k: _pooled(windows[k]).value or -math.inf)
        return best, restarts


def _pooled(windows: list[tuple[float, float]]) -> Score:
    """Inverse-variance pooling of a candidate's windows, as ``orchestrator.search.objective`` pools them."""
    weights = [1.0 / se**2 for _, se in windows]
    value = sum(w * v for w, (v, _) in zip(weights, windows, strict=True)) / sum(weights)
    se = math.sqrt(1.0 / sum(weights))
    level = LevelScore(f"C={CONCURRENCY}", value, se, len(windows))
    return Score("output_tok_s", "max", value, se, 0.95, (level,))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed ... first-seed + seeds - 1")
    parser.add_argument("--noise", type=float, default=0.03, help="relative sd of a 16-request window")
    parser.add_argument("--budget", type=int, default=None, help="restarts, baselines included (default: the file's)")
    args = parser.parse_args(argv)

    experiment = load_experiment(EXPERIMENT)
    grid_plan = build_plan(experiment)
    plan = search_plan(experiment, grid_plan)
    space = SearchSpace.from_plan(plan)
    baselines = len(space.baselines)
    budget = args.budget or budget_restarts(experiment, grid_plan)
    grid_restarts = len(space) + baselines
    truths = {c.key: truth(c) for c in space.candidates}
    labels = {c.key: c.label for c in space.candidates}
    best_true = max(truths.values())
    print(
        f"space: {len(space)} candidates + {baselines} baselines = {grid_restarts} restarts for the grid; "
        f"budget {budget} restarts ({budget / grid_restarts:.0%}); noise {args.noise:.1%} a 16-request window; "
        f"true best {best_true:,.0f} tok/s ({labels[max(truths, key=lambda k: truths[k])]})",
        file=sys.stderr,
    )

    makers = {
        "grid": lambda seed: GridStrategy(space),
        "random": lambda seed: RandomStrategy(space, budget - baselines, seed=seed),
        "successive-halving": lambda seed: SuccessiveHalving(space, budget - baselines, seed=seed),
        "bayesian": lambda seed: BayesianStrategy(space, budget - baselines, seed=seed),
    }
    rows: dict[str, list[tuple[int, float, float]]] = {name: [] for name in makers}
    started = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        bench = Bench(space, truths, seed, args.noise)
        grid_pick, _ = bench.run(makers["grid"](seed))
        for name, make in makers.items():
            pick, spent = bench.run(make(seed))
            distance = 1.0 - truths[pick] / truths[grid_pick]
            to_true = 1.0 - truths[pick] / best_true
            rows[name].append((spent + baselines, distance, to_true))
            print(f"seed {seed} {name}: {labels[pick]} {distance:+.2%} from the grid's pick", file=sys.stderr)
    elapsed = time.perf_counter() - started

    hours_head = f"GPU-hours at {RESTART_SECONDS:.0f} s x {GPUS} GPUs"
    print(
        f"| strategy | restarts (mean, max) | share of the grid's | {hours_head} "
        "| distance to the grid's best (median, worst) | within 3% of the grid's best | distance to the true best "
        "(median, worst) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, results in rows.items():
        spent = [r[0] for r in results]
        dist = [r[1] for r in results]
        true = [r[2] for r in results]
        within = sum(1 for d in dist if d <= 0.03)
        hours = statistics.fmean(spent) * RESTART_SECONDS * GPUS / 3600
        print(
            f"| {name} | {statistics.fmean(spent):.1f}, {max(spent)} | {statistics.fmean(spent) / grid_restarts:.0%} "
            f"| {hours:.1f} | {statistics.median(dist):+.1%}, {max(dist):+.1%} | {within} of {len(results)} "
            f"| {statistics.median(true):+.1%}, {max(true):+.1%} |"
        )
    print(f"\n{args.seeds} seeds in {elapsed:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
