"""bench/reliability_figures.py refuses figures from a suite in which any test did not pass (a scenario that
errors in set-up used to vanish from the table, counted as skipped), and counts what its outcomes say, once."""

from __future__ import annotations

from typing import Any

from bench.reliability_figures import campaign_problems, figures, suite_problems


def _entries(*tests: tuple[str, dict[str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "collected", "nodeid": nodeid} for nodeid, _ in tests]
    for nodeid, phases in tests:
        out += [{"type": "report", "nodeid": nodeid, "when": w, "outcome": o} for w, o in phases.items()]
    return out


PASSED = {"setup": "passed", "call": "passed", "teardown": "passed"}


def test_a_clean_suite_has_no_problem() -> None:
    assert suite_problems(_entries(("a", PASSED), ("b", PASSED)), 0) == []


def test_an_error_in_set_up_a_failure_or_a_skip_refuses_the_figures() -> None:
    entries = _entries(
        ("ok", PASSED),
        ("setup-error", {"setup": "failed", "teardown": "passed"}),
        ("failed", {"setup": "passed", "call": "failed", "teardown": "passed"}),
        ("skipped", {"setup": "skipped", "teardown": "passed"}),
        ("teardown-error", {"setup": "passed", "call": "passed", "teardown": "failed"}),
    )
    problems = suite_problems(entries, 1)
    assert problems[0] == "pytest exited with status 1"
    assert [p.split(":")[0] for p in problems[1:]] == ["setup-error", "failed", "skipped", "teardown-error"]


def test_a_collected_test_with_no_report_at_all_is_a_problem() -> None:
    entries = [*_entries(("ran", PASSED)), {"type": "collected", "nodeid": "vanished"}]
    assert suite_problems(entries, 0) == ["vanished: set-up never ran"]


def _outcome(**counts: Any) -> dict[str, Any]:
    base = dict.fromkeys(
        (
            "faults",
            "sweeps",
            "points_checked",
            "points_lost",
            "host_checks",
            "hosts_modified",
            "injection_attempts",
            "injections_reached",
            "refused",
            "secret_checks",
            "secret_leaks",
        ),
        0,
    )
    return {"scenario": "s", "kind": "fault", "passed": True, "skipped": False, **base, **counts}


def _bad(**extra: Any) -> dict[str, Any]:
    return {
        "documents": 100,
        "outcomes": {"valid": 10, "refused": 90, "unappliable": 0, "bad_error": 0, "traceback": 0},
        "dry_runs": {"planned": 2, "refused": 3, "bad_error": 0, "traceback": 0},
        "applies": {"applied": 4, "refused_on_host": 0, "mismatch": 0, "host_modified": 0, "traceback": 0},
        **extra,
    }


def test_figures_are_sums_of_what_each_scenario_did() -> None:
    values = figures(
        [
            _outcome(faults=6, sweeps=1, points_checked=14, host_checks=1),
            _outcome(kind="injection", injection_attempts=38, host_checks=1, hosts_modified=1),
            _outcome(kind="validation", refused=24),
        ],
        _bad(),
    )
    assert values["scenarios passed"] == "3 of 3"
    assert values["faults injected"] == "6" and values["sweeps run"] == "1"
    assert values["hosts left modified"] == "1 of 2 compared"
    assert values["hostile values sent to a host"] == "38" and values["hostile values refused by validation"] == "24"
    assert values["of them: dry runs / applied on the test host"] == "5 / 4"


def test_a_broken_campaign_promise_refuses_the_figures() -> None:
    assert campaign_problems(_bad()) == []
    broken = _bad(applies={"applied": 3, "refused_on_host": 1, "mismatch": 0, "host_modified": 0, "traceback": 0})
    assert campaign_problems(broken) == ["1 applies refused_on_host"]
