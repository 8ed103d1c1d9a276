"""The verification stage of a draft-length schedule (issue 39; docs/schedule.md): the experiment that deploys
the schedule as one more configuration beside the best static ones, made from the sweep it was derived from.

The verification run is an ordinary run of that experiment (``specsweep verify-schedule`` writes it beside the
source run and sweeps it): the same host, service, server, engine, workload and checks, and

- the autoregressive baseline, and the variant's configurations that won a measured load of the source sweep
  (the best static configuration at each load; the variant's matrix cut to their draft lengths);
- the schedule, as variant ``schedule``: the variant's configuration with the largest k of the schedule,
  rendered, its ``--speculative-config`` JSON replaced by the schedule's (``vllm_speculative_config``);
- the source sweep's concurrencies, and a ramp: open-loop Poisson arrivals (``load.rates``) whose number in
  flight, capped at the highest measured concurrency (``load.max_in_flight``), moves through the schedule's
  ranges. By default one rate: the requests per second the source sweep's winner completed at its middle
  measured concurrency, so the arrivals hold about that many requests in flight on average, fewer and more
  by turns.

The verdict (the schedule against the best static configuration at each load and over the ramp, and the k the
engine ran by its counters) is the verification run's answer: ``orchestrator/analysis/verification.py``.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from orchestrator.analysis.answer import Answer
from orchestrator.analysis.schedule import Schedule, ScheduleError, vllm_speculative_config
from orchestrator.errors import StoreError
from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.liveness import VERIFY_FILE

__all__ = ["VERIFY_FILE", "default_ramp_rate", "resumed_verification", "verification_experiment"]

SCHEDULE_VARIANT = "schedule"

_SPEC_FLAGS = ("--speculative-config", "--speculative_config")
_SIM = re.compile(r"orchestrator\.sim|specsweep\s+sim")


def _words(text: str) -> list[tuple[str, int, int]]:
    """The shell words of ``text`` with where each stands in it (start, end), quotes and line breaks
    included; ValueError for text a shell would not split (an open quote)."""
    stream = io.StringIO(text)
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    words: list[tuple[str, int, int]] = []
    end = 0
    while True:
        start = end
        while start < len(text) and text[start].isspace():
            start += 1
        word = lexer.get_token()
        if word is None:
            return words
        end = stream.tell()
        if end > start and end <= len(text) and text[end - 1].isspace():
            end -= 1  # the separator that ended the word
        words.append((word, start, end))


def _with_spec_config(text: str, flag_json: str) -> str | None:
    """``text`` with the value of its ``--speculative-config`` replaced by ``flag_json``, the rest as it was;
    None without one. The command is read as shell words and the old value as JSON, whatever its quoting and
    however many lines it spans (a regular expression stopped at the first ``}``, leaving the tail: issue 49)."""
    try:
        words = _words(text)
    except ValueError:
        return None
    for index, (word, start, end) in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag not in _SPEC_FLAGS:
            continue
        if eq:
            span, old = (start, end), value
        elif index + 1 < len(words):
            old, span = words[index + 1][0], (words[index + 1][1], words[index + 1][2])
        else:
            return None
        try:
            json.loads(old)
        except ValueError:
            return None
        new = f"{flag}={shlex.quote(flag_json)}" if eq else shlex.quote(flag_json)
        return text[: span[0]] + new + text[span[1] :]
    return None


def _escape(text: str) -> str:
    """A rendered value as a template that renders to itself."""
    return text.replace("{", "{{").replace("}", "}}")


def _plain(value: Any) -> Any:
    """A parameter as the experiment file had it: the frame keeps numbers as floats (4.0 for 4)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def default_ramp_rate(ans: Answer, sched: Schedule) -> float | None:
    """Requests per second the source sweep's winner completed at its middle measured concurrency."""
    loads = sorted({c.load for r in sched.ranges for c in r.evidence})
    if not loads:
        return None
    middle = loads[len(loads) // 2]
    for lv in ans.loads:
        if (lv.host, lv.workload, lv.mode, int(lv.load)) != (sched.host, sched.workload, "concurrency", middle):
            continue
        point = ans.point(lv.host, lv.workload, lv.winner, lv.load_label)
        value = point.value("requests_per_s") if point is not None else None
        return round(value, 4) if value else None
    return None


def verification_experiment(
    run_dir: Path, ans: Answer, sched: Schedule, *, rates: list[float] | None = None
) -> dict[str, Any]:
    """The verification experiment (a YAML-ready mapping) of ``sched``, derived from ``run_dir``'s sweep."""
    if sched.unsupported is not None:
        raise ScheduleError(f"{run_dir}: {sched.engine} takes no batch-size schedule: {sched.unsupported}")
    stored = run_dir / "experiment.yaml"
    experiment = load_experiment(stored, read_secrets=False)  # read where the sweep reads them (verifysecrets)
    doc: dict[str, Any] = yaml.safe_load(stored.read_text(encoding="utf-8"))
    variant = sched.variant
    if variant not in experiment.variants:
        raise ScheduleError(f"{stored}: no variant {variant!r}")

    choices = [c for r in sched.ranges for c in r.evidence]
    params_of = {p.label: {k: _plain(v) for k, v in p.params.items()} for p in ans.points if p.variant == variant}
    static = sorted(
        {c.winner for c in choices if c.winner in params_of}
        | {c.label for c in choices if c.label in params_of}
        | ({sched.static} if sched.static in params_of else set())
    )
    top = max(r.k for r in sched.ranges)
    top_label = next((c.label for c in choices if c.k == top and c.label in params_of), None)
    config = vllm_speculative_config(sched)
    if config is None or top_label is None:
        raise ScheduleError(
            f"{run_dir}: the schedule drafts nothing at any batch size: nothing to verify "
            f"(recommended: {sched.recommendation_text()})"
        )

    values = experiment.template_values(variant, dict(params_of[top_label]))
    fields = {name: str(values[name]) for name in experiment.variants[variant].template_fields}
    flag_json = json.dumps(config, separators=(",", ":"))
    replaced = False
    for name, text in fields.items():
        new = _with_spec_config(text, flag_json)
        if new is not None:
            fields[name], replaced = new, True
            break
    if not replaced:
        command = str(doc.get("service", {}).get("command") or doc.get("service", {}).get("exec_start") or "")
        if "spec_args" not in fields or not _SIM.search(command + " " + fields["spec_args"]):
            raise ScheduleError(
                f"{stored}: variant {variant!r} has no --speculative-config to put the schedule in; write the "
                "schedule's flag (specsweep recommend RUN --schedule) into a variant of your own"
            )
        fields["spec_args"] = (
            f"{fields['spec_args']} --speculative-config '{flag_json}'"  # the simulator's vLLM dialect
        )

    source_variant = dict(doc["variants"][variant])
    keys = sorted({k for label in static for k in params_of[label]})
    source_variant["matrix"] = {k: sorted({params_of[label][k] for label in static}) for k in keys}
    source_variant["include"], source_variant["exclude"] = [], []
    name = SCHEDULE_VARIANT if SCHEDULE_VARIANT not in doc["variants"] else f"{SCHEDULE_VARIANT}_{variant}"
    ar_variant = next((p.variant for p in ans.points if p.label == sched.ar), None)
    doc["variants"] = {
        **({ar_variant: doc["variants"][ar_variant]} if ar_variant is not None else {}),
        variant: source_variant,
        name: {"matrix": {}, "include": [], "exclude": [], **{k: _escape(v) for k, v in fields.items()}},
    }
    doc["baselines"] = [ar_variant] if ar_variant is not None else []
    doc["name"] = f"{doc['name']}-verify"
    doc["description"] = (
        f"verification of the draft-length schedule {sched.entries} of variant {variant} "
        f"(derived from run {run_dir.name}) against its best static configurations"
    )
    for key in ("search", "objective", "results_dir"):
        doc.pop(key, None)
    if doc.get("gpus_per_deployment") == 1:  # the stored default; written out it draws an advisory
        doc.pop("gpus_per_deployment")
    load = dict(doc["load"])
    loads = sorted({c.load for c in choices})
    load["concurrency"] = loads
    ramp = rates if rates else [r for r in [default_ramp_rate(ans, sched)] if r]
    if not ramp:
        raise ScheduleError(f"{run_dir}: no request rate for the ramp; pass one with --rate")
    load["rates"] = ramp
    load["max_in_flight"] = max(loads)
    doc["load"] = load
    return doc


def resumed_verification(resume: str, run: str | None, results: Path | None) -> tuple[Path, Path, Path]:
    """What ``verify-schedule --resume VERIFY_RUN`` continues (issue 58, S9): (the verification run, its
    verification experiment, the source run that experiment was derived from). A StoreError names a run that is
    no verification run, or one of another source than ``run`` (when given)."""
    from orchestrator.runs.liveness import is_verification_file, resume_hint
    from orchestrator.runs.runref import resolve_run
    from orchestrator.runs.store import RunStore

    made = resolve_run(resume, results)
    file = RunStore.open(made).info.experiment_file
    if not file or not is_verification_file(file):
        raise StoreError(
            f"{made}: not a verification run (its experiment file is {file or 'not recorded'}, not a run's "
            f"{VERIFY_FILE}): continue it with {resume_hint(made, file)}"
        )
    path = Path(file)
    if run is not None and resolve_run(run, results).resolve() != path.parent.resolve():
        raise StoreError(f"{made} verifies the schedule of run {path.parent}, not of {run}: leave RUN out")
    return made, path, path.parent
