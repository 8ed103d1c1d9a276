"""Strategies: which candidates to measure next, from what the finished ones scored.

A strategy is asked for a batch of proposals (``ask``), told each one's score once its deployment is measured
(``tell``), and asked again; an empty batch ends the search. Every strategy is deterministic given its seed and
what it was told, which is what lets ``--resume`` replay it: the proposals come again in the same order, and
the driver answers those already measured from their records, without a restart.

- **grid**: every candidate once, in plan order (what a sweep without a search does).
- **random**: ``budget`` candidates drawn without replacement.
- **successive-halving**: the first rung measures candidates briefly at the objective's load: a third of it
  spread over the space (greedy max-min distance on the parameters' axes, from a seeded start), the rest
  grown towards the best (the untried neighbours, one step along an ordered axis, of the best candidate that
  has any), so that a search that measures part of the space still looks next to its best. The first rung
  takes all of the budget but ``budget / eta**2`` restarts (at least 2). Then the best ``1/eta`` survive, and
  so does every candidate not worse than the last survivor beyond noise (their intervals overlap), as far as
  the budget allows, and the survivors are measured ``eta`` times longer; it ends when one survivor is left or
  the budget is spent. Each longer measurement is a new deployment (a restart); a candidate's score pools all
  its windows.
- **bayesian**: Optuna's TPE (:mod:`orchestrator.search.bayesian`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

from orchestrator.search.objective import Score
from orchestrator.search.space import Candidate, SearchSpace

__all__ = ["GridStrategy", "Proposal", "RandomStrategy", "Strategy", "SuccessiveHalving", "spread"]


@dataclass(frozen=True)
class Proposal:
    """Measure ``candidate`` at rung ``rung`` (0: the first, brief measurement; rung r: ``eta**r`` times longer)."""

    candidate: Candidate
    rung: int = 0


class Strategy(Protocol):
    name: str

    def ask(self) -> list[Proposal]: ...

    def tell(self, proposal: Proposal, score: Score) -> None: ...


class GridStrategy:
    """Every candidate once, in plan order."""

    name = "grid"

    def __init__(self, space: SearchSpace, restarts: int | None = None) -> None:
        self.space = space
        self._asked = False
        self.limit = restarts

    def ask(self) -> list[Proposal]:
        if self._asked:
            return []
        self._asked = True
        candidates = self.space.candidates
        if self.limit is not None:
            candidates = candidates[: self.limit]
        return [Proposal(c) for c in candidates]

    def tell(self, proposal: Proposal, score: Score) -> None:
        del proposal, score


class RandomStrategy:
    """``restarts`` candidates drawn without replacement (seeded)."""

    name = "random"

    def __init__(self, space: SearchSpace, restarts: int, seed: int = 0) -> None:
        self.space = space
        self.restarts = restarts
        self.rng = random.Random(seed)
        self._asked = False

    def ask(self) -> list[Proposal]:
        if self._asked:
            return []
        self._asked = True
        count = min(self.restarts, len(self.space.candidates))
        return [Proposal(c) for c in self.rng.sample(self.space.candidates, count)]

    def tell(self, proposal: Proposal, score: Score) -> None:
        del proposal, score


def spread(space: SearchSpace, count: int, rng: random.Random) -> list[Candidate]:
    """``count`` candidates spread over the space: a random start, then each the farthest from those chosen
    (ties drawn at random)."""
    pool = list(space.candidates)
    if count >= len(pool):
        return pool
    chosen = [rng.choice(pool)]
    distance = {c.key: space.distance(c.coords, chosen[0].coords) for c in pool}
    while len(chosen) < count:
        taken = {c.key for c in chosen}
        rest = [c for c in pool if c.key not in taken]
        far = max(distance[c.key] for c in rest)
        pick = rng.choice([c for c in rest if distance[c.key] >= far - 1e-12])
        chosen.append(pick)
        for c in pool:
            distance[c.key] = min(distance[c.key], space.distance(c.coords, pick.coords))
    return chosen


class SuccessiveHalving:
    """Successive halving with noise-aware survival, its first rung grown towards the best (module docstring)."""

    name = "successive-halving"

    def __init__(self, space: SearchSpace, restarts: int, *, seed: int = 0, eta: int = 3) -> None:
        self.space = space
        self.restarts = restarts
        self.eta = eta
        self.rng = random.Random(seed)
        self.spent = 0
        self.rung = 0
        self.scores: dict[str, Score] = {}
        self.pool: list[Candidate] = []
        self.tried: set[str] = set()
        self._pending: list[Proposal] = []
        self._done = False
        # Restarts go where the noise is: finding the region of the best takes more than re-measuring it, so
        # the first rung takes all but budget/eta**2 (at least 2) of the budget; each promotion keeps 1/eta.
        reserve = max(2, math.ceil(restarts / eta**2))
        self.first_rung = max(2, min(len(space.candidates), restarts - reserve))

    def first_spread(self) -> int:
        """How many candidates open the first rung, spread over the space (the rest: the best's neighbours)."""
        return max(2, min(self.first_rung, math.ceil(self.first_rung * 0.35)))

    def _ranked(self, candidates: list[Candidate]) -> list[Candidate]:
        def key(c: Candidate) -> tuple[int, int, float, float, int]:
            s = self.scores.get(c.key)
            if s is None:
                return (1, 1, math.inf, math.inf, c.index)
            return (0, *s.rank_key(), c.index)

        return sorted(candidates, key=key)

    def _issue(self, proposals: list[Proposal]) -> list[Proposal]:
        proposals = proposals[: max(self.restarts - self.spent, 0)]
        self.spent += len(proposals)
        for p in proposals:
            self.tried.add(p.candidate.key)
        self._pending = list(proposals)
        return proposals

    def _grow(self) -> list[Proposal]:
        """Rung 0 grows towards the best: the untried neighbours of the best candidates that have any."""
        room = self.first_rung - len(self.pool)
        if room <= 0:
            return []
        for best in self._ranked(self.pool):
            fresh = [n for n in self.space.neighbours(best) if n.key not in self.tried]
            if fresh:
                self.rng.shuffle(fresh)
                fresh = fresh[:room]
                self.pool += fresh
                return self._issue([Proposal(c, 0) for c in fresh])
        return []

    def ask(self) -> list[Proposal]:
        if self._done or self._pending:
            return []
        if not self.pool:
            self.pool = spread(self.space, self.first_spread(), self.rng)
            return self._issue([Proposal(c, 0) for c in self.pool])
        if self.rung == 0:
            grown = self._grow()
            if grown:
                return grown
        room = self.restarts - self.spent
        ranked = self._ranked(self.pool)
        keep = max(1, math.ceil(len(ranked) / self.eta))
        survivors = ranked[:keep]
        last = self.scores.get(survivors[-1].key)
        for other in ranked[keep:]:
            # Dropped only when worse beyond noise: an interval that overlaps the last survivor's stays.
            score = self.scores.get(other.key)
            if last is not None and score is not None and score.feasible and not score.worse_beyond_noise(last):
                survivors.append(other)
        survivors = survivors[: max(room, 0)]
        if len(survivors) <= 1 or len(self.pool) <= 1:
            self._done = True
            return []
        self.rung += 1
        self.pool = survivors
        return self._issue([Proposal(c, self.rung) for c in survivors])

    def tell(self, proposal: Proposal, score: Score) -> None:
        self.scores[proposal.candidate.key] = score  # pooled over every window of the candidate so far
        self._pending = [p for p in self._pending if p != proposal]
