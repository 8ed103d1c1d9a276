"""The bad-input campaign's documents: hypothesis strategies for experiment and playbook files, and the verdict
on each one.

A document starts from a valid seed (the shipped sweeps and playbooks, or a generated valid experiment) and
takes one to four mutations, each of one category a user (or a bad merge) produces: wrong types, unknown and
misspelt keys, bad durations, unresolvable templates, empty matrices, huge matrices, missing keys, and damage
to the YAML text itself (truncation, stray characters, tabs, duplicate keys, aliases and alias bombs, deep
nesting, invalid UTF-8). A mutation is named only if it changed the document, and a document whose bytes
are still the seed's is not used at all (hypothesis draws another; ``UNCHANGED`` counts them). Its verdict
is one of:

    valid        it loads and plans (and every deployment renders to a command the service would apply)
    unappliable  it loads and plans, but a deployment's command would be refused when applied on the host
    refused      one ConfigError: one line, starting with the file's path (``has_line``: with a line number)
    bad_error    a SpecsweepError that is not a ConfigError, or a ConfigError of more than one line or
                 without the file
    traceback    anything else: a bug

Further along, a sample goes through ``specsweep sweep FILE --dry-run`` (:func:`dry_run`: the dry run's text
or one error line), and valid experiments are applied on the test host for real (:func:`apply_on_host`:
systemd's own view of the unit, or what the process received, must be the document's; the host as before
once restored).

``bench/reliability_bad_inputs.py`` runs 10,000 of these; ``test_bad_inputs.py`` a few hundred.
"""

from __future__ import annotations

import copy
import random
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import assume
from hypothesis import strategies as st

from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]

__all__ = [
    "UNCHANGED",
    "Verdict",
    "apply_on_host",
    "check",
    "documents",
    "dry_run",
    "experiment_documents",
    "install_campaign_unit",
    "playbook_documents",
    "remove_campaign_unit",
]


def _seed(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


EXPERIMENT_SEEDS = [_seed(p) for p in sorted((ROOT / "sweeps").glob("*.yaml"))] + [
    _seed(p) for p in sorted((ROOT / "playbooks" / "experiments").glob("*.yaml"))
]
PLAYBOOK_SEEDS = [_seed(p) for p in sorted((ROOT / "playbooks").glob("*.yaml"))]

DURATION_FIELDS = [
    ("server", "ready_timeout"),
    ("server", "expected_load_time"),
    ("load", "duration"),
    ("load", "timeouts", "connect"),
    ("load", "timeouts", "first_token"),
    ("load", "timeouts", "total"),
    ("host", "connect_timeout"),
    ("host", "command_timeout"),
    ("host", "keepalive"),
    ("service", "stop_timeout"),
]
BAD_DURATIONS = st.one_of(
    st.sampled_from(
        [
            "15mm",
            "-1s",
            "1h30",
            "1e999s",
            "nan",
            "inf",
            "",
            " ",
            "1 h",
            "1.5.5s",
            "s",
            "10x",
            "-0s",
            "1h-30m",
            "9" * 400 + "s",
            "0x10s",
            "１０s",
            "1h 30m",
            "15m15m15m",
            "∞",
            "3 days",
            "-5",
            "1_000s",
            "PT15M",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.text(alphabet="0123456789.hmsd -+e", max_size=12),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
BAD_TEMPLATES = [
    "{undefined}",
    "{",
    "}",
    "{a b}",
    "{{",
    "}}",
    "{0}",
    "{python",
    "{}",
    "{budget!r}",
    "{budget:>10}",
    "{budget.real}",
    "{budget[0]}",
    "{ budget }",
    "{{{budget}}}",
    "{host}",
    "{experiment}{python}",
    "{\n}",
    # Words a shell could not split: an unbalanced quote, a trailing backslash.
    "'",
    '"',
    "\\",
]
JUNK = st.one_of(
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["{budget}", "15m", "-1s", "{host}", "kind", "ssh", "local", "%n", "$(id)", "systemd", "~"]),
    st.lists(st.integers(min_value=-3, max_value=50), max_size=4),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
    st.lists(st.text(max_size=5), max_size=3),
    st.none(),
)

_NAME = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)
_FIELD = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in {"matrix", "include", "exclude", "args", "python", "experiment", "host"}
)


@st.composite
def valid_experiment(draw: st.DrawFn) -> dict[str, Any]:
    """A random experiment that should load and plan."""
    keys = draw(st.lists(_FIELD, min_size=0, max_size=3, unique=True))
    variants: dict[str, Any] = {}
    for name in draw(st.lists(_NAME, min_size=1, max_size=4, unique=True)):
        variant: dict[str, Any] = {"args": "--x " + " ".join(f"{{{k}}}" for k in keys) if keys else "--plain"}
        matrix = {k: draw(st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True)) for k in keys}
        if matrix:
            variant["matrix"] = matrix
        variants[name] = variant
    kind = draw(st.sampled_from(["systemd", "process"]))
    command = "/opt/venv/bin/python -m server --port 30001 {args}"
    service: dict[str, Any] = (
        {"kind": "systemd", "unit": "server.service", "exec_start": command}
        if kind == "systemd"
        else {"kind": "process", "command": command}
    )
    host = draw(
        st.sampled_from(
            [
                "local",
                "root@gpu-box",
                {"ssh": "root@gpu-box:2222", "connect_timeout": "5s"},
                None,
            ]
        )
    )
    doc: dict[str, Any] = {
        "name": draw(_NAME),
        "service": service,
        "server": {"url": "http://127.0.0.1:30001", "ready_timeout": draw(st.sampled_from(["900s", "15m", 60]))},
        "engine": draw(st.sampled_from(["sglang", "vllm", "llamacpp", "sim"])),
        "variants": variants,
        "baselines": list(variants)[: draw(st.integers(0, min(2, len(variants))))],
        "load": {"concurrency": draw(st.lists(st.integers(1, 256), min_size=1, max_size=4, unique=True))},
    }
    if host is not None:
        doc["host"] = host
    return doc


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out.extend(_paths(value, (*prefix, index)))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    node = doc
    for part in path[:-1]:
        node = node[part]
    return node


def _typo(rnd: random.Random, word: str) -> str:
    if len(word) < 2:
        return word + "x"
    i = rnd.randint(0, len(word) - 2)
    how = rnd.choice(["swap", "drop", "double", "upper"])
    if how == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if how == "drop":
        return word[:i] + word[i + 1 :]
    if how == "double":
        return word[:i] + word[i] + word[i:]
    return word[:i] + word[i].upper() + word[i + 1 :]


def _mutate(draw: st.DrawFn, rnd: random.Random, doc: Any, playbook: bool) -> tuple[Any, str]:
    kinds = ["wrong_type", "unknown_key", "delete", "rename"]
    if not playbook:
        kinds += ["bad_duration", "bad_template", "empty_matrix", "huge_matrix"]
    kind = rnd.choice(kinds)
    targets = _paths(doc)
    if kind == "bad_duration" and isinstance(doc, dict):
        path = rnd.choice(DURATION_FIELDS)
        parent: Any = doc
        for part in path[:-1]:
            if not isinstance(parent, dict):
                return doc, kind
            parent = parent.setdefault(part, {}) if part != "host" or isinstance(parent.get(part), dict) else {}
        if isinstance(parent, dict):
            parent[path[-1]] = draw(BAD_DURATIONS)
        return doc, kind
    if kind == "bad_template" and isinstance(doc, dict):
        strings = [p for p in targets if p and isinstance(_parent(doc, p), dict) and isinstance(_get(doc, p), str)]
        templated = [p for p in strings if p[0] in ("service", "variants", "vars")] or strings
        if templated:
            path = rnd.choice(templated)
            value = _get(doc, path)
            bad = rnd.choice(BAD_TEMPLATES)
            at = rnd.randint(0, len(value))
            _parent(doc, path)[path[-1]] = value[:at] + bad + value[at:]
        return doc, kind
    if kind in ("empty_matrix", "huge_matrix") and isinstance(doc, dict) and isinstance(doc.get("variants"), dict):
        names = [n for n, v in doc["variants"].items() if isinstance(v, dict)]
        if not names:
            return doc, kind
        variant = doc["variants"][rnd.choice(names)]
        matrix = variant.get("matrix") if isinstance(variant.get("matrix"), dict) else {}
        if kind == "empty_matrix":
            choice = rnd.choice(["empty_list", "empty_matrix", "null"])
            if choice == "empty_list" and matrix:
                matrix[rnd.choice(sorted(matrix, key=str))] = []
                variant["matrix"] = matrix
            else:
                variant["matrix"] = {} if choice != "null" else None
        else:
            # Huge in what it expands to, small as text: 13 values of 3 keys are 2,197 deployments; 201 levels of
            # 101 deployments are 20,301 load points. (Both limits must be met before anything expands.)
            keys = list(matrix)[:3] or ["budget"]
            size = rnd.choice([13, 101, 2001]) if len(keys) < 3 else rnd.choice([5, 13])
            for key in keys:
                matrix[key] = list(range(size))
            variant["matrix"] = matrix
            if rnd.random() < 0.5 and isinstance(doc.get("load"), dict):
                doc["load"]["concurrency"] = list(range(1, rnd.choice([10, 201]) + 1))
        return doc, kind
    # The whole document replaced is one case in twenty (hypothesis favours the first element it may pick).
    if len(targets) < 2 or rnd.random() < 0.05:
        return (draw(JUNK), kind) if kind == "wrong_type" else (doc, kind)
    path = rnd.choice(targets[1:])
    parent = _parent(doc, path)
    last = path[-1]
    if kind == "wrong_type":
        parent[last] = draw(JUNK)
    elif kind == "delete":
        del parent[last]
    elif kind == "rename" and isinstance(parent, dict):
        parent[_typo(rnd, str(last)) if rnd.random() < 0.5 else draw(st.text(min_size=1, max_size=10))] = parent.pop(
            last
        )
    elif kind == "unknown_key":
        target = parent[last] if isinstance(parent[last], dict) else parent
        if isinstance(target, dict) and target:
            near = _typo(rnd, str(rnd.choice(sorted(target, key=str))))
            target[near if rnd.random() < 0.5 else draw(st.text(min_size=1, max_size=10))] = draw(JUNK)
    return doc, kind


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    node = doc
    for part in path:
        node = node[part]
    return node


TEXT_DAMAGE = [
    "truncate",
    "insert",
    "tab",
    "duplicate_key",
    "aliases",
    "alias_bomb",
    "deep",
    "bad_utf8",
    "nul",
    "bom",
    "two_docs",
    "unclosed",
    "binary",
]


def _damage(draw: st.DrawFn, rnd: random.Random, text: str) -> tuple[bytes, str]:
    kind = rnd.choice(TEXT_DAMAGE)
    raw = text
    if kind == "truncate":
        raw = text[: rnd.randint(0, len(text))]
    elif kind == "insert":
        at = rnd.randint(0, len(text))
        raw = text[:at] + draw(st.text(min_size=1, max_size=5)) + text[at:]
    elif kind == "tab":
        raw = text.replace("  ", "\t", 1)
    elif kind == "duplicate_key":
        lines = text.splitlines()
        top = [ln for ln in lines if ln and not ln[0].isspace() and ":" in ln]
        raw = text + (rnd.choice(top) + "\n" if top else "name: again\n")
    elif kind == "alias_bomb":
        # "Billion laughs": a few hundred bytes that expand to 9**levels nodes.
        levels = rnd.choice([3, 5, 9])
        pairs = zip("abcdefgh"[: levels - 1], "bcdefghi", strict=False)
        raw = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in pairs
        )
        raw += text
    elif kind == "aliases":
        raw = "x-a: &a [1, 2, 3]\nx-b: &b [*a, *a, *a]\nx-c: &c [*b, *b]\n" + text.replace(
            "concurrency:", "concurrency: *a\nx:", 1
        )
    elif kind == "deep":
        depth = rnd.choice([50, 200, 5000])
        raw = text + "vars: " + "[" * depth + "]" * depth + "\n"
    elif kind == "unclosed":
        raw = text + "load: {concurrency: [1, 2\n"
    elif kind == "two_docs":
        raw = text + "---\n" + text
    elif kind == "bom":
        raw = "\ufeff" + text
    elif kind == "nul":
        raw = text.replace(":", ":\0", 1)
    elif kind == "bad_utf8":
        data = text.encode()
        at = rnd.randint(0, len(data))
        return data[:at] + b"\xff\xfe\xc3" + data[at:], kind
    elif kind == "binary":
        return draw(st.binary(max_size=200)), kind
    return raw.encode("utf-8", "surrogatepass"), kind


#: How many generated documents their mutations left as they were (not counted, not checked: hypothesis draws
#: another). The campaign reports it.
UNCHANGED = {"documents": 0}


def _dump(doc: Any) -> str:
    try:
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, ValueError):
        return "name: x\n"


@st.composite
def _document(draw: st.DrawFn, playbook: bool) -> tuple[bytes, str]:
    """A seed with one to four mutations, each named only if it changed the document, and the document only if
    its bytes differ from the seed's: a bad-input document is one a mutation really made."""
    # Structural choices come from a plain Random that hypothesis seeds: its own choices (st.randoms too)
    # favour the first option and 0, which would truncate most documents to nothing. Values (junk,
    # durations, text) stay hypothesis's own, where its taste for edge cases is the point.
    rnd = random.Random(draw(st.integers(0, 2**64)))
    seeds = PLAYBOOK_SEEDS if playbook else EXPERIMENT_SEEDS
    doc = copy.deepcopy(rnd.choice(seeds)) if playbook or rnd.random() < 0.5 else draw(valid_experiment())
    original = _dump(doc).encode("utf-8", "surrogatepass")
    kinds = []
    damage = rnd.random() < 0.15
    for _ in range(rnd.choice([1, 1, 1, 2, 2, 3, 4]) if not damage else rnd.choice([0, 0, 1, 2])):
        before = repr(doc)
        doc, kind = _mutate(draw, rnd, doc, playbook)
        if repr(doc) != before:
            kinds.append(kind)
    text = _dump(doc)
    data = text.encode("utf-8", "surrogatepass")
    if damage:
        damaged, kind = _damage(draw, rnd, text)
        if damaged != data:
            kinds.append(kind)
        data = damaged
    if data == original or not kinds:
        UNCHANGED["documents"] += 1
        assume(False)
    return data, "+".join(kinds)


def experiment_documents() -> st.SearchStrategy[tuple[bytes, str]]:
    """(file content, mutation kinds) of experiment files."""
    return _document(playbook=False)


def playbook_documents() -> st.SearchStrategy[tuple[bytes, str]]:
    """(file content, mutation kinds) of playbook files."""
    return _document(playbook=True)


def documents() -> st.SearchStrategy[tuple[str, bytes, str]]:
    """(``experiment`` or ``playbook``, file content, mutation kinds): four experiments to one playbook."""
    return st.one_of(
        experiment_documents().map(lambda d: ("experiment", *d)),
        experiment_documents().map(lambda d: ("experiment", *d)),
        experiment_documents().map(lambda d: ("experiment", *d)),
        experiment_documents().map(lambda d: ("experiment", *d)),
        playbook_documents().map(lambda d: ("playbook", *d)),
    )


@dataclass(frozen=True)
class Verdict:
    """What specsweep made of one document (see the module docstring)."""

    outcome: str
    message: str = ""
    has_line: bool = False

    @property
    def acceptable(self) -> bool:
        return self.outcome in ("valid", "refused")


def _applies(plan: Any, experiment: Any) -> str | None:
    """Why a planned deployment would be refused at apply time (its command does not render), or None."""
    from orchestrator.errors import SpecsweepError
    from orchestrator.quoting import split_command, validate_env_name
    from orchestrator.services.systemd import render_dropin

    for deployment in plan.deployments:
        try:
            if experiment.service.kind == "systemd":
                if experiment.service.mode == "dropin":
                    render_dropin(deployment)
            else:
                split_command(deployment.command or "", what="the process command")
                for key in deployment.environment:
                    validate_env_name(key)
        except SpecsweepError as exc:
            return str(exc)
    return None


def check(kind: str, data: bytes, path: Path) -> Verdict:
    """Load (and plan) one document written to ``path``; never raises."""
    from orchestrator.errors import ConfigError, SpecsweepError
    from orchestrator.experiment.schema import load_experiment
    from orchestrator.plan.deployments import build_plan

    path.write_bytes(data)
    try:
        if kind == "playbook":
            from orchestrator.playbooks.schema import load_playbook

            load_playbook(path)
            return Verdict("valid")
        experiment = load_experiment(path)
        plan = build_plan(experiment)
        problem = _applies(plan, experiment)
        return Verdict("unappliable", problem) if problem else Verdict("valid")
    except ConfigError as exc:
        message = str(exc)
        if "\n" in message or not message.startswith(str(path)):
            return Verdict("bad_error", message)
        has_line = re.match(re.escape(str(path)) + r":\d+", message) is not None
        return Verdict("refused", message, has_line)
    except SpecsweepError as exc:
        return Verdict("bad_error", f"{type(exc).__name__}: {exc}")
    except Exception:
        return Verdict("traceback", traceback.format_exc())


# -- further along: the CLI's dry run, and a real apply on the test host -------------------------------------


def dry_run(data: bytes, path: Path, *, timeout: float = 120) -> Verdict:
    """``specsweep sweep FILE --dry-run`` on an experiment document, as a user would run it: ``planned`` (exit 0,
    the dry run's text), ``refused`` (exit 2 and one error line naming the file), else ``bad_error`` or
    ``traceback``."""
    import os
    import subprocess
    import sys

    path.write_bytes(data)
    env = {**os.environ, "COLUMNS": "100000", "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    out, err = proc.stdout, proc.stderr
    if "Traceback" in out + err:
        return Verdict("traceback", err[-2000:])
    lines = err.strip().splitlines()
    if proc.returncode == 0 and out.startswith("# dry run of "):
        return Verdict("planned")
    if proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"specsweep: error: {path}"):
        return Verdict("refused", lines[0])
    return Verdict("bad_error", f"exit {proc.returncode}: {err[-2000:]}")


#: Prints its arguments and environment as JSON: what a process document's program becomes on the test host.
_PRINTER = "import json,os,sys; print('APPLIED ' + json.dumps([sys.argv[1:], dict(os.environ)]), flush=True)"


def apply_on_host(data: bytes, path: Path, host: Any, unit: str, *, deployments: int = 2) -> Verdict:
    """Apply the first ``deployments`` of a valid experiment document on the test host for real, and check
    what the host then holds; never raises.

    systemd (the document's unit name replaced by ``unit``, a stopped stub installed there): after ``apply``,
    systemd's own view of the unit over D-Bus (``busctl``) must be the document's command, word for word, and
    its environment; in ``mode: unit`` the unit file must be what was rendered and load. A process: its
    program is replaced by a printer of its arguments and environment, which must be the document's. Then
    ``restore``, and the host must be as before (``applied``). Otherwise: ``refused_on_host`` (a
    SpecsweepError: the host refused what validation let through), ``mismatch``, ``host_modified`` or
    ``traceback``.
    """
    import json
    import shlex
    import sys
    import time

    from orchestrator.errors import SpecsweepError
    from orchestrator.experiment.schema import load_experiment
    from orchestrator.plan.deployments import build_plan
    from orchestrator.quoting import shell_join, split_command
    from orchestrator.services.process import ProcessService
    from orchestrator.services.systemd import SystemdService
    from tests.system.support import etc_snapshot, unit_snapshot

    path.write_bytes(data)
    before = (etc_snapshot(host), unit_snapshot(host, unit))
    ssh = host.ssh()
    service: Any = None
    verdict = Verdict("applied")
    try:
        experiment = load_experiment(path)
        spec = experiment.service
        for deployment in build_plan(experiment).deployments[:deployments]:
            if spec.kind == "systemd":
                service = SystemdService(
                    ssh, unit, mode=spec.mode, unit_template=spec.unit_file if spec.mode == "unit" else None
                )
                service.apply(deployment)
                problem = _systemd_view_differs(host, unit, service, deployment, split_command)
            elif spec.kind == "process":
                argv = split_command(deployment.command or "", what="the process command")
                printer = shell_join([sys.executable, "-c", _PRINTER, *argv[1:]])
                service = ProcessService(ssh, "campaign", state_dir="/tmp/specsweep-campaign", stop_timeout=2)
                service.apply(deployment.model_copy(update={"command": printer}))
                deadline = time.monotonic() + scaled(20)
                log = ""
                while time.monotonic() < deadline and "APPLIED " not in log:
                    time.sleep(0.1)
                    log = host.admin(f"cat {shlex.quote(service.log_path)} 2>/dev/null; true").stdout
                printed = [json.loads(ln[8:]) for ln in log.splitlines() if ln.startswith("APPLIED ")]
                got_argv, got_env = printed[-1] if printed else (None, {})
                want_env = dict(deployment.environment)
                problem = None
                if got_argv != argv[1:]:
                    problem = f"the program received {got_argv!r}, not {argv[1:]!r}"
                elif any(got_env.get(k) != v for k, v in want_env.items()):
                    problem = f"the environment differs: {sorted(want_env)}"
            else:
                return Verdict("applied", f"service kind {spec.kind}: nothing to apply")
            service.restore()
            service = None
            if problem:
                verdict = Verdict("mismatch", problem)
                break
    except SpecsweepError as exc:
        verdict = Verdict("refused_on_host", f"{type(exc).__name__}: {exc}")
    except Exception:
        verdict = Verdict("traceback", traceback.format_exc())
    finally:
        try:
            if service is not None:
                service.restore()
        except Exception:  # the snapshot below says what was left
            verdict = Verdict("traceback", traceback.format_exc()) if verdict.outcome == "applied" else verdict
        ssh.close()
        host.admin("rm -rf /tmp/specsweep-campaign ~/.local/state/specsweep/campaign.*", check=False)
    after = (etc_snapshot(host), unit_snapshot(host, unit))
    if after != before and verdict.outcome == "applied":
        return Verdict("host_modified", f"before={before!r} after={after!r}"[:2000])
    return verdict


def _systemd_view_differs(host: Any, unit: str, service: Any, deployment: Any, split: Any) -> str | None:
    """How systemd's view of ``unit`` (D-Bus properties) differs from what ``deployment`` asked for, or None."""
    import json

    text = host.admin(
        f"cat /etc/systemd/system/{unit}.d/50-specsweep.conf /etc/systemd/system/{unit} 2>/dev/null; true"
    ).stdout
    if service.render(deployment) not in text:
        return "the file on the host is not the rendered one"
    obj = json.loads(
        host.admin(
            f"busctl --json=short call org.freedesktop.systemd1 /org/freedesktop/systemd1 "
            f"org.freedesktop.systemd1.Manager LoadUnit s {unit}"
        ).stdout
    )["data"][0]

    def prop(name: str) -> Any:
        out = host.admin(
            f"busctl --json=short get-property org.freedesktop.systemd1 {obj} org.freedesktop.systemd1.Service {name}"
        ).stdout
        return json.loads(out)["data"]

    load = host.admin(f"systemctl show -p LoadState --value {unit}").stdout.strip()
    if load != "loaded":
        return f"systemd did not load the unit ({load})"
    if service.mode == "unit":
        return None  # the template's own syntax: the file and its loading are what can be checked
    argv = [entry[1] for entry in prop("ExecStart")]
    if deployment.command is not None and argv != [split(deployment.command, what="the service command")]:
        return f"systemd runs {argv!r}"
    environment = prop("Environment")
    want = [f"{k}={v}" for k, v in deployment.environment.items()]
    if [e for e in environment if e in want] != want:
        return f"systemd's environment is {environment!r}"
    return None


CAMPAIGN_UNIT = "specsweep-campaign.service"


def install_campaign_unit(host: Any) -> str:
    """The stopped stub unit whose drop-ins (or whole file) the applied documents replace."""
    text = "[Unit]\nDescription=specsweep bad-input campaign\n\n[Service]\nExecStart=/bin/true\n"
    host.admin(f"cat > /etc/systemd/system/{CAMPAIGN_UNIT} <<'EOF'\n{text}EOF\nsystemctl daemon-reload")
    return CAMPAIGN_UNIT


def remove_campaign_unit(host: Any) -> None:
    u = CAMPAIGN_UNIT
    host.admin(
        f"systemctl stop {u}; rm -rf /etc/systemd/system/{u} /etc/systemd/system/{u}.d /var/lib/specsweep/{u}.*; "
        f"rmdir /var/lib/specsweep 2>/dev/null; systemctl daemon-reload; systemctl reset-failed {u} 2>/dev/null; true",
        check=False,
    )
