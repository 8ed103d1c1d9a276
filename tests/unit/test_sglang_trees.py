"""SGLang's draft trees and chains: the shape a command asks for and the rules SGLang 0.5.23 applies at start-up
(orchestrator/engines/sglang/tree.py), the chain walk of the golden accept length (golden.py), how the analysis
reads an EAGLE-family tree (analysis/roles.py), and `specsweep validate` refusing a tree SGLang would change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import CheckContext, CheckSettings, run_checks, tidy_frame
from orchestrator.analysis.compare import add_baseline_comparisons
from orchestrator.analysis.roles import BaselineRoles, annotate, tree_shape
from orchestrator.engines.registry import get_engine
from orchestrator.engines.sglang.golden import GoldenRequest, _key, chain_steps, compare_request, point_golden
from orchestrator.engines.sglang.tree import TreeShape, shape_problems
from orchestrator.runs.store import Record

REPO = Path(__file__).resolve().parents[2]
TREE = "--speculative-algorithm STANDALONE --speculative-draft-model-path /m --model-path /m"


def _cmd(depth: int, topk: int, budget: int, extra: str = "") -> str:
    return (
        f"python -m sglang.launch_server {TREE} --speculative-num-steps {depth} "
        f"--speculative-eagle-topk {topk} --speculative-num-draft-tokens {budget} {extra}"
    )


def test_a_command_gives_its_tree_and_a_self_draft_is_told_from_another_draft() -> None:
    shape = TreeShape.from_command(_cmd(3, 2, 6))
    assert shape is not None
    assert (shape.algorithm, shape.depth, shape.topk, shape.budget) == ("STANDALONE", 3, 2, 6)
    assert shape.self_draft and not shape.chain and shape.label == "tree(depth=3, topk=2, budget=6)"
    other = TreeShape.from_command(
        _cmd(3, 1, 4).replace("--speculative-draft-model-path /m", "--speculative-draft-model-path /d")
    )
    assert other is not None and other.chain and not other.self_draft
    assert TreeShape.from_command("python -m sglang.launch_server --speculative-algorithm NGRAM") is None
    served = TreeShape.from_settings(
        {
            "speculative_algorithm": "STANDALONE",
            "speculative_num_steps": 3,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4,
            "speculative_draft_model_path": "/m/",
            "model_path": "/m",
        }
    )
    assert served is not None and served.self_draft and served.chain


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (_cmd(3, 1, 6), "silently change budget 6 to 4"),
        (_cmd(3, 2, 12), "use a budget of at most 11"),  # 2 + 2 * 4 candidates, plus the root
        (_cmd(0, 1, 1), "depth >= 1"),
        (_cmd(3, 2, 6, "--page-size 16"), "flashinfer, fa3 or triton"),
        ("x --speculative-algorithm EAGLE --speculative-eagle-topk 2", "but no --speculative-num-steps"),
        (_cmd(3, 1, 4).replace("--speculative-draft-model-path /m ", ""), "needs its draft model"),
    ],
)
def test_trees_sglang_would_refuse_or_change_are_named(command: str, words: str) -> None:
    problems = shape_problems(command)
    assert problems and words in problems[0] + " ".join(problems), problems


@pytest.mark.parametrize("shape", [(3, 1, 4), (3, 2, 6), (3, 2, 11), (5, 4, 8), (1, 1, 2)])
def test_trees_sglang_runs_as_written_pass(shape: tuple[int, int, int]) -> None:
    assert shape_problems(_cmd(*shape)) == []
    assert get_engine("sglang").command_problems(_cmd(*shape)) == []


def test_a_tree_sglang_chooses_itself_passes() -> None:
    # None of depth, top-k and budget: SGLang's _auto_choose_speculative_params picks them (read back later).
    assert shape_problems("python -m sglang.launch_server --speculative-algorithm EAGLE --model-path /m") == []


def test_the_engine_reads_back_the_tree_the_server_runs() -> None:
    served = {
        "speculative_algorithm": "STANDALONE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "model_path": "/m",
        "speculative_draft_model_path": "/m",
    }
    same = get_engine("sglang").spec_shape(_cmd(3, 1, 4), served)
    assert same is not None and same["agree"] is True
    changed = get_engine("sglang").spec_shape(_cmd(3, 1, 6), served)
    assert changed is not None and changed["agree"] is False and changed["served_label"].startswith("chain")
    assert get_engine("vllm").spec_shape(_cmd(3, 1, 4), served) is None


def test_the_chain_walk_accepts_the_longest_agreeing_prefix_and_counts_drafts_past_the_end() -> None:
    # Position 0 is the prefill's token. A step at 1 proposes 1-3 (all agree: 3 accepted, bonus 4); at 5 the
    # first draft disagrees (0 accepted, bonus 5); at 6 and 10 all agree.
    agree = [False, True, True, True, True, False] + [True] * 10
    assert [s + 1 for s in chain_steps(agree, 12, 3)] == [4, 1, 4, 4]
    # A disagreement after two agreeing drafts ends that step at 2: the bonus token is never a draft.
    assert chain_steps([False] + [True] * 6 + [False] + [True] * 8, 12, 3) == [3, 2, 3]
    # Past the end (12 tokens) the last step still accepts what agrees, as SGLang counts it.
    assert chain_steps([False] + [True] * 20, 12, 3) == [3, 3, 3]
    assert chain_steps([False] * 10, 5, 3) == [0, 0, 0, 0]
    assert chain_steps([False, True], 1, 3) == []  # one token: the prefill's, no verify step
    with pytest.raises(ValueError):
        chain_steps([], 4, 0)


def test_a_response_is_compared_with_the_prediction_by_steps_then_by_histogram() -> None:
    agree = [False, True, True, True, True, False] + [True] * 10
    golden = GoldenRequest("0", 12, chain_steps(agree, 12, 3))
    assert isinstance(golden, GoldenRequest) and golden.steps == [3, 0, 3, 3] and golden.histogram(3) == [1, 0, 0, 3]
    assert compare_request(golden, {"verify_steps": 4, "accepted_histogram": [1, 0, 0, 3]}, 3) is None
    assert "5 verify steps where the model predicts 4" in str(compare_request(golden, {"verify_steps": 5}, 3))
    where = compare_request(golden, {"verify_steps": 4, "accepted_histogram": [0, 1, 0, 3]}, 3)
    assert where is not None and where.startswith("0 steps accepted 0 drafts where the model predicts 1")
    assert compare_request(golden, None, 3) == "the response carried no speculative figures"


def test_the_analysis_reads_an_eagle_tree_budget_as_drafts_and_its_depth_as_the_chain() -> None:
    shape = tree_shape({"budget": 6, "topk": 2}, _cmd(3, 2, 6))
    assert shape is not None and (shape.budget, shape.topk, shape.chain_drafts) == (5, 2, 3)
    chain = tree_shape({}, _cmd(3, 1, 4))
    assert chain is not None and chain.chain_drafts == 3
    # DDTree's own budget is its drafts, as before.
    ddtree = tree_shape({"budget": 7, "topk": 1}, "--speculative-algorithm DDTREE --speculative-ddtree-budget 7")
    assert ddtree is not None and ddtree.chain_drafts == 7


def test_validate_refuses_a_chain_whose_budget_sglang_would_change_with_file_and_line(tmp_path: Path) -> None:
    text = (REPO / "sweeps" / "sglang-tree-cpu.yaml").read_text()
    bad = text.replace(
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n  # Trees",
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6\n  # Trees",
        1,
    )
    assert bad != text
    path = tmp_path / "tree.yaml"
    path.write_text(bad)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    out = done.stdout + done.stderr
    line = next(i for i, row in enumerate(bad.splitlines(), 1) if row.startswith("  chain:"))
    assert f"tree.yaml:{line}" in out and "silently change budget 6 to 4" in out, out
    assert "Traceback" not in out
    ok = subprocess.run(
        [sys.executable, "-m", "orchestrator", "validate", str(REPO / "sweeps" / "sglang-tree-cpu.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr


# ---- the analysis of SGLang tree points -------------------------------------------------------------------------


def _record(variant: str, deployment: str, accept: float, **server: Any) -> Record:
    return Record(
        run_id="r",
        experiment="tree",
        deployment_id=deployment,
        point_id=f"p-{deployment}",
        config_hash="c",
        host="h",
        variant=variant,
        params={},
        baseline=variant in ("autoregressive", "chain"),
        mode="concurrency",
        concurrency=1,
        status="ok",
        started_at="t0",
        finished_at="t1",
        client={"requests": 32, "errors": 0, "output_tok_s": 10.0, "per_user_tok_s": 10.0},
        server={"engine": "sglang", "lines_matched": 20, "accept_len": accept, "gen_throughput": 10.0, **server},
    )


def _tree_findings(records: list[Record], commands: dict[str, str]) -> list[Any]:
    roles = BaselineRoles(ar="autoregressive", linear="chain")
    frame, params = tidy_frame(records, commands=commands)
    checks = CheckSettings()
    frame = add_baseline_comparisons(annotate(frame, roles, params), roles)
    return run_checks(CheckContext(frame=frame, roles=roles, settings=checks))


def test_sglang_tree_points_are_held_to_the_chain_the_golden_figures_and_their_served_shape() -> None:
    other = _cmd(3, 1, 4).replace("--speculative-draft-model-path /m", "--speculative-draft-model-path /d")
    commands = {
        "d-ar": "python -m sglang.launch_server --model-path /m",
        "d-chain": _cmd(3, 1, 4),
        "d-tree": _cmd(3, 2, 6),
        "d-low": _cmd(3, 4, 6),
        "d-other": other,
        "d-other-tree": other.replace(
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
            "--speculative-eagle-topk 2 --speculative-num-draft-tokens 6",
        ),
    }
    golden_ok = {"kind": "chain", "agree": True, "accept_len": 3.5, "requests": 3}
    golden_bad = {
        "kind": "chain",
        "agree": False,
        "accept_len": 3.5,
        "measured_accept_len": 3.2,
        "requests": 3,
        "requests_differing": 1,
        "first_difference": "request 2: 9 verify steps where the model predicts 8",
    }
    changed = {"agree": False, "served_label": "chain(depth=3, topk=1, budget=4)", "configured_label": "x"}
    records = [
        _record("autoregressive", "d-ar", 1.0),
        _record("chain", "d-chain", 3.5, golden=golden_bad),
        _record("tree", "d-tree", 3.6, golden={"kind": "tree_chain_reference", "accept_len": 3.5}),
        _record("tree", "d-low", 2.0, spec_shape=changed),  # holds the chain (5 drafts) yet accepts less
        _record("draft24", "d-other", 1.5),  # another draft: a top-k 1 chain of its own, not the baseline's
        _record("draft24tree", "d-other-tree", 1.4),
    ]
    found = _tree_findings(records, commands)
    by_check = {(f.check, f.severity, f.point) for f in found if f.severity != "info"}
    assert ("golden", "error", "p-d-chain") in by_check
    assert ("spec_shape", "error", "p-d-low") in by_check
    assert ("tree_below_chain", "warning", "p-d-low") in by_check
    assert not {c for c in by_check if c[2] in ("p-d-other", "p-d-other-tree", "p-d-tree")}, by_check
    message = next(f.message for f in found if f.check == "golden")
    assert "request 2: 9 verify steps where the model predicts 8" in message and "1 of 3 requests" in message
    clean = _tree_findings([*records[:1], _record("chain", "d-chain", 3.5, golden=golden_ok)], commands)
    assert not [f for f in clean if f.check in ("golden", "spec_shape")]


def test_a_request_without_a_prediction_or_verify_steps_is_not_compared_and_none_gives_no_figure() -> None:
    shape = TreeShape.from_command(_cmd(3, 1, 4))
    assert shape is not None
    agree = [False, True, True, True, True, False] + [True] * 10
    requests = [
        {
            "key": "0",
            "messages": [{"role": "user", "content": "a"}],
            "text": None,
            "tokens": 12,
            "spec": {"verify_steps": 4, "accepted_histogram": [1, 0, 0, 3]},
        },
        {"key": "1", "messages": [{"role": "user", "content": "b"}], "text": None, "tokens": 12, "spec": None},
    ]
    # The probe's answers are already in the run's cache: no engine Python is run.
    cache = {
        _key({**requests[0], "tokens": 16}): {"agree": agree},
        _key({**requests[1], "tokens": 16}): {"agree": agree},
    }
    block = point_golden(shape, requests, "false", cache)
    assert block["agree"] is True and block["requests"] == 1 and block["verify_steps"] == 4
    assert block["accept_len"] == block["measured_accept_len"] == 11 / 4
    assert block["not_compared"] == ["request 1: its response carried no verify steps"]
    none = point_golden(shape, [requests[1]], "false", cache)
    assert "agree" not in none and none["skipped"].startswith("no request could be compared")
