"""llama.cpp's own statistics code, compiled, makes the log lines; specsweep must recover each request's verify
steps exactly where the printed figures allow, and say when they do not.

``llamacpp_timings.py`` compiles the statements of tools/server/server-context.cpp that count a request's drafted
tokens, accepted tokens, verify steps and per-position accepts (``update_slots``) and the ``draft acceptance``
and ``acc per pos`` lines of ``print_timings`` (format strings ``"draft acceptance = %0.5f (%5d accepted / %5d
generated), mean len = %5.2f\\n"`` and ``string_format("%.3f", ...)`` per position, behind ``SLT_INF`` /
``SLT_TRC``), from the llama.cpp tree vendored in llama-cpp-python 0.3.36 that scripts/get-llama-server.sh
unpacks; without that tree (or a C++ compiler) the tests are skipped, like the live llama-server tests.

``mean len`` has 2 decimals, so for a long request it fits several step counts (1403 accepted in 700 steps
prints 3.00, which 700 to 703 steps all give); ``acc per pos`` (at ``-lv 4``) narrows that to the counts whose
3-decimal rates add up to the accepted tokens.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from orchestrator.engines.llamacpp.log import aggregate_llamacpp, parse_llamacpp
from orchestrator.engines.llamacpp.samples import LlamaRequestSample
from orchestrator.engines.samples import recover_steps
from orchestrator.metrics import parse_window
from tests.contract.llamacpp_timings import compile_harness, print_timings

pytestmark = pytest.mark.llamacpp_tree  # skipped, with the reason, without the tree or a compiler (tests/conftest.py)

Steps = list[tuple[int, int]]


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_harness(tmp_path_factory.mktemp("llamacpp"))


def requests_of(text: str) -> list[LlamaRequestSample]:
    return [s for s in parse_llamacpp(text).samples if isinstance(s, LlamaRequestSample)]


def long_request() -> Steps:
    """700 verify steps of 4 drafted tokens: 697 accept 2, 3 accept 3 (1403 accepted: mean len 3.00)."""
    return [(4, 2)] * 697 + [(4, 3)] * 3


def test_the_lines_are_llamacpps(harness: Path) -> None:
    text = print_timings(harness, [[(3, 3), (3, 1), (3, 0), (3, 2)]], n_max=3, trace=True)
    assert text == (
        "slot print_timing: id  0 | task 1 | draft acceptance = 0.50000 (    6 accepted /    12 generated), "
        "mean len =  2.50\n"
        "slot print_timing: id  0 | task 1 |      acc per pos = (0.750, 0.500, 0.250)\n"
    )


def test_a_two_decimal_mean_alone_bounds_the_steps(harness: Path) -> None:
    text = print_timings(harness, [long_request()], n_max=4, trace=False)
    assert "( 1403 accepted /  2800 generated), mean len =  3.00" in text
    (req,) = requests_of(text)
    assert (req.verify_steps_low, req.verify_steps_high) == (700, 703)  # every count 1 + 1403 / n rounds to 3.00
    assert recover_steps(1403, 3.00)[0] == 702  # the mean alone, rounded: what was taken as the count
    figures = aggregate_llamacpp([req])
    exact = figures["exactness"]["accept_len"]
    assert exact["kind"] == "bounded"
    low, high = exact["bounds"]
    assert low <= 1 + 1403 / 700 <= high and (low, high) == pytest.approx((1 + 1403 / 703, 1 + 1403 / 700))
    assert figures["details"]["verify_steps_bounds"] == [700, 703]
    assert figures["exactness"]["acceptance_rate"]["kind"] == "exact"


def test_the_per_position_rates_settle_the_steps(harness: Path) -> None:
    text = print_timings(harness, [long_request()], n_max=4, trace=True)
    (req,) = requests_of(text)
    assert (req.verify_steps, req.verify_steps_low, req.verify_steps_high) == (700, 700, 700)
    figures = aggregate_llamacpp([req])
    assert figures["accept_len"] == pytest.approx(1 + 1403 / 700)
    assert figures["exactness"]["accept_len"]["kind"] == "exact"
    assert figures["details"]["accepted_per_position"] == [700, 700, 3, 0]
    assert figures["exactness"]["per_position_acceptance"]["kind"] == "exact"
    # Through the window reader, as `specsweep parse` reads a saved log.
    window = parse_window("llamacpp", text)
    assert window.accept_len == pytest.approx(1 + 1403 / 700)
    assert window.exactness["accept_len"]["kind"] == "exact"


def test_nothing_accepted_bounds_the_steps_by_the_drafted_tokens(harness: Path) -> None:
    text = print_timings(harness, [[(16, 0), (5, 0)], [(3, 3), (3, 1)]], n_max=16, trace=False)
    first, second = requests_of(text)
    assert (first.verify_steps, first.verify_steps_low, first.verify_steps_high) == (None, 1, 21)
    figures = aggregate_llamacpp([first, second])
    assert figures["accept_len"] is None  # leaving the request out would bias the window upward
    low, high = figures["details"]["accept_len_bounds"]
    assert low <= 1 + 4 / 4 <= high


def random_requests(rng: random.Random, count: int, n_max: int) -> list[Steps]:
    out = []
    for _ in range(count):
        steps: Steps = []
        p = rng.uniform(0.1, 0.97)
        for _ in range(rng.choice([1, 7, 60, 400, 700, 1500, 4000])):
            drafted = rng.randint(1, n_max)
            accepted = 0
            while accepted < drafted and rng.random() < p:
                accepted += 1
            steps.append((drafted, accepted))
        out.append(steps)
    return out


@pytest.mark.parametrize("trace", [False, True], ids=["default-level", "lv4"])
def test_a_count_said_to_be_exact_is_the_count(harness: Path, trace: bool) -> None:
    rng = random.Random(27)
    n_max = 8
    truth = random_requests(rng, 160, n_max)
    text = print_timings(harness, truth, n_max=n_max, trace=trace)
    found = requests_of(text)
    assert len(found) == len(truth)
    settled = 0
    for req, steps in zip(found, truth, strict=True):
        n = len(steps)
        assert req.verify_steps_low is not None and req.verify_steps_high is not None
        assert req.verify_steps_low <= n <= req.verify_steps_high
        if req.verify_steps_low == req.verify_steps_high:
            settled += 1
            assert req.verify_steps == n
    assert settled >= (60 if trace else 30)  # the rates settle more of them
    # The window: exact when every count is settled, else bounds that hold the truth.
    for size in (1, 5, 40):
        for start in range(0, len(found), size):
            reqs, chunk = found[start : start + size], truth[start : start + size]
            figures = aggregate_llamacpp(reqs)
            accepted = sum(a for s in chunk for _, a in s)
            true_len = 1 + accepted / sum(len(s) for s in chunk)
            exact = figures["exactness"].get("accept_len")
            if exact is None:
                assert figures["accept_len"] is None  # a request accepted nothing: its steps are unknown
                low, high = figures["details"]["accept_len_bounds"]
            elif exact["kind"] == "exact":
                assert figures["accept_len"] == pytest.approx(true_len, rel=1e-12)
                continue
            else:
                low, high = exact["bounds"]
            assert low - 1e-12 <= true_len <= high + 1e-12
            if trace and figures["exactness"].get("per_position_acceptance", {}).get("kind") == "exact":
                counts = [sum(1 for s in chunk for _, a in s if a >= i + 1) for i in range(n_max)]
                assert figures["details"]["accepted_per_position"] == counts
