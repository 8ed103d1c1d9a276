"""The simulator's acceptance model, with fixed seeds: chains, trees, the commit path, and the formulas."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from orchestrator.sim.model import (
    Drafter,
    Draws,
    Speculator,
    StepOutcome,
    build_tree,
    chain_tree,
    expected_accept_length,
    expected_chain_accept_length,
)
from orchestrator.sim.profiles import PROFILES

K26 = PROFILES["k26"]
DRAFTER = Drafter(K26.top1_accuracy, K26.depth_decay, K26.rank_share)


@pytest.mark.parametrize(
    ("budget", "max_depth", "length"),
    [
        pytest.param(7, 16, 7, id="budget-7"),
        pytest.param(16, 16, 16, id="budget-equals-depth"),
        pytest.param(32, 16, 16, id="depth-caps-budget"),
        pytest.param(1, 16, 1, id="one-node"),
    ],
)
def test_topk1_tree_is_exactly_the_chain(budget: int, max_depth: int, length: int) -> None:
    tree = build_tree(DRAFTER, budget, 1, max_depth)
    chain = chain_tree(length)
    assert tree == chain
    for seed in range(200):
        assert tree.walk(Draws(DRAFTER, random.Random(seed))) == chain.walk(Draws(DRAFTER, random.Random(seed)))


@pytest.mark.parametrize(
    ("budget", "topk"),
    [pytest.param(b, k, id=f"b{b}-k{k}") for b, k in [(7, 2), (16, 4), (32, 8), (64, 4), (32, 32)]],
)
def test_tree_never_accepts_less_than_its_chain_on_the_same_draws(budget: int, topk: int) -> None:
    tree = build_tree(DRAFTER, budget, topk, 16)
    chain = chain_tree(tree.greedy_depth)
    assert tree.greedy_depth >= 1
    gained = 0
    for seed in range(2000):
        draws = Draws(DRAFTER, random.Random(seed))
        tree_depth, chain_depth = tree.walk(draws), chain.walk(draws)
        assert tree_depth >= chain_depth
        gained += tree_depth > chain_depth
    if tree.size > tree.greedy_depth:  # a tree with side branches catches some of the chain's misses
        assert gained > 0
        assert expected_accept_length(tree, DRAFTER) > expected_accept_length(chain, DRAFTER)
    else:  # best-first spent the whole budget on the chain
        assert gained == 0


def test_best_first_tree_keeps_the_most_probable_nodes() -> None:
    budget, topk, depth_cap = 20, 3, 8
    tree = build_tree(DRAFTER, budget, topk, depth_cap)
    assert tree.size == budget
    assert tree.max_depth <= depth_cap
    assert all(len(kids) <= topk and set(kids) <= set(range(1, topk + 1)) for kids in tree.children)
    # Path probability of every node; then every frontier candidate left out is no likelier than any node kept.
    prob = [1.0] * len(tree.depth)
    for parent, kids in enumerate(tree.children):
        for rank, child in kids.items():
            prob[child] = prob[parent] * DRAFTER.rank_probability(tree.depth[child], rank)
    kept = min(prob[1:])
    frontier = [
        prob[node] * DRAFTER.rank_probability(tree.depth[node] + 1, rank)
        for node in range(len(tree.depth))
        if tree.depth[node] < depth_cap
        for rank in range(1, topk + 1)
        if rank not in tree.children[node]
    ]
    assert max(frontier) <= kept


@pytest.mark.parametrize(("alpha", "k"), [(0.6, 4), (0.8, 8), (0.9, 16)])
def test_chain_mean_accept_length_matches_the_closed_form(alpha: float, k: int) -> None:
    drafter = Drafter(alpha, depth_decay=1.0)
    spec = Speculator("linear", drafter, draft_tokens=k)
    rng = random.Random(1234)
    samples = [spec.step(drafter, rng).commit_len for _ in range(20000)]
    expected = expected_chain_accept_length(alpha, k)
    stderr = statistics.pstdev(samples) / math.sqrt(len(samples))
    assert abs(statistics.fmean(samples) - expected) < 4 * stderr
    assert expected_accept_length(chain_tree(k), drafter) == pytest.approx(expected)


def test_fast_chain_path_walks_like_the_tree() -> None:
    spec = Speculator("linear", DRAFTER, draft_tokens=16)
    chain = chain_tree(16)
    for seed in range(500):
        fast = spec.step(DRAFTER, random.Random(seed)).accepted_depth
        assert fast == chain.walk(Draws(DRAFTER, random.Random(seed)))


def test_rank_draws_follow_the_drafter() -> None:
    drafter = Drafter(0.5, depth_decay=1.0, rank_share=0.5)
    rng = random.Random(7)
    ranks = [Draws(drafter, rng).rank(1) for _ in range(20000)]
    for rank in (1, 2, 3):
        share = ranks.count(rank) / len(ranks)
        assert share == pytest.approx(drafter.rank_probability(1, rank), abs=0.02)


def test_ar_commits_one_token_a_step() -> None:
    spec = Speculator("ar", DRAFTER)
    assert not spec.speculative and spec.drafted == 0
    assert spec.step(DRAFTER, random.Random(0)) == StepOutcome(0, 0, 1)


def test_commit_bug_reports_the_depth_but_commits_at_most_two() -> None:
    spec = Speculator("ddtree", DRAFTER, budget=7, topk=1, commit_bug=True)
    assert spec.outcome(5) == StepOutcome(accepted_depth=5, accepted_drafts=2, commit_len=2)
    rng = random.Random(99)
    outcomes = [spec.step(DRAFTER, rng) for _ in range(5000)]
    assert max(o.commit_len for o in outcomes) == 2
    mean_depth = statistics.fmean(o.accepted_depth for o in outcomes)
    mean_commit = statistics.fmean(o.commit_len for o in outcomes)
    assert mean_depth > mean_commit
    # Without the bug the same configuration commits depth + 1 every step.
    healthy = Speculator("ddtree", DRAFTER, budget=7, topk=1)
    assert all(o.commit_len == o.accepted_depth + 1 for o in (healthy.step(DRAFTER, rng) for _ in range(500)))


def test_commit_bug_leaves_chains_alone() -> None:
    assert not Speculator("linear", DRAFTER, commit_bug=True).commit_bug


def test_temperature_lowers_acceptance() -> None:
    hot = DRAFTER.at_temperature(1.0, K26.temperature_penalty)
    assert hot.top1(1) < DRAFTER.top1(1)
    assert DRAFTER.at_temperature(0.0, K26.temperature_penalty) is DRAFTER
    chain = chain_tree(16)
    assert expected_accept_length(chain, hot) < expected_accept_length(chain, DRAFTER)


def test_k26_linear16_accepts_what_the_field_report_saw() -> None:
    # DOMAIN.md: linear DFlash with 16 drafts accepts 3.5-4.0 tokens per verify step.
    assert 3.5 <= expected_accept_length(chain_tree(16), DRAFTER) <= 4.0


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--algorithm", "linear", "--draft-tokens", "4"], id="chain-4"),
        pytest.param(["--algorithm", "ddtree", "--budget", "16", "--topk", "4"], id="tree-16-4"),
    ],
)
def test_truncated_truth_matches_requests_cut_at_max_tokens(args: list[str]) -> None:
    # The truth a load of 40-token requests measures: each request's last step is cut at what is left.
    from orchestrator.sim.config import parse_args
    from orchestrator.sim.model import Drafter, Speculator

    config = parse_args(["--profile", "tiny", *args])
    prof = config.profile
    drafter = Drafter(prof.top1_accuracy, prof.depth_decay, prof.rank_share)
    shape = {"draft_tokens": config.draft_tokens, "budget": config.budget, "topk": config.topk}
    spec = Speculator(config.algorithm, drafter, **shape)
    rng = random.Random(3)
    tokens = steps = 0
    for _ in range(4000):
        left = 40 - 1  # the prefill gives the first token
        while left > 0:
            left -= min(spec.step(drafter, rng).commit_len, left)
            steps += 1
        tokens += 39
    truth = config.expected_accept_length(max_tokens=40)
    assert tokens / steps == pytest.approx(truth, rel=0.01)
    assert truth < config.expected_accept_length()  # cutting the last step only lowers it
