"""Mangled experiment documents: loading either succeeds or raises one ConfigError line, never anything else."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [
    yaml.safe_load((ROOT / "sweeps" / name).read_text()) for name in ("k26-ddtree.yaml", "demo.yaml", "vllm-eagle.yaml")
]

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["{budget}", "{", "}", "15m", "-1s", "1h30m", "{host}", "kind", "ssh", "local", "%n", "$(id)"]),
    st.lists(st.integers(min_value=-3, max_value=50), max_size=4),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.extend(paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out.extend(paths(value, (*prefix, index)))
    return out


@st.composite
def mangled(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        targets = paths(doc)
        path = draw(st.sampled_from(targets))
        action = draw(st.sampled_from(["replace", "delete", "rename", "add"]))
        if not path:
            if action == "replace":
                doc = draw(junk)
            continue
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        if action == "replace":
            parent[last] = draw(junk)
        elif action == "delete":
            del parent[last]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = parent.pop(last)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(junk)
    return doc


def _check(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.yaml"
        path.write_text(text)
        try:
            build_plan(load_experiment(path))
        except ConfigError as exc:
            message = str(exc)
            assert message.startswith(str(path)), message
            assert "\n" not in message, message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_mangled_documents_only_raise_config_error(doc: Any) -> None:
    _check(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_config_error(text: str) -> None:
    _check(text)
