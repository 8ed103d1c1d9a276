"""Name patterns match whole strings: ``re.match(r"^...$")`` accepts a trailing newline ("sim.service\\n")."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.playbooks import load_playbook

GOOD = """\
name: demo
host: local
service:
  kind: systemd
  unit: sim.service
  exec_start: "/opt/py -m sim {spec_args}"
  environment: {SIM_A: "1"}
server: {url: "http://127.0.0.1:18181"}
engine: sim
variants:
  ar: {spec_args: "--algorithm ar"}
baselines: [ar]
load: {concurrency: [1]}
"""


def _write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_good_file_loads(tmp_path: Path) -> None:
    load_experiment(_write(tmp_path, GOOD))


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("name: demo", 'name: "demo\\n"', "name"),
        ("unit: sim.service", 'unit: "sim.service\\n"', "service.unit"),
        ("unit: sim.service", 'unit: "sim\\n"', "service.unit"),
        ("{SIM_A:", '{"SIM_A\\n":', "service.environment"),
        ("  ar: {spec", '  "ar\\n": {spec', "variants"),
    ],
)
def test_a_trailing_newline_is_not_part_of_a_name(tmp_path: Path, old: str, new: str, key: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError) as info:
        load_experiment(_write(tmp_path, GOOD.replace(old, new).replace("baselines: [ar]\n", "")))
    assert f": {key}" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        'name: "check\\n"\nexperiment: exp.yaml\nsteps:\n  - deploy: {variant: ar}\n',
        'name: check\nexperiment: exp.yaml\nsteps:\n  - deploy: {variant: ar}\n  - load\n  - measure: "m\\n"\n',
    ],
    ids=["playbook-name", "measure-name"],
)
def test_playbook_names_too(tmp_path: Path, text: str) -> None:
    _write(tmp_path, GOOD)
    with pytest.raises(ConfigError, match="letters, digits"):
        load_playbook(_write(tmp_path, text, "p.yaml"))


def test_a_url_with_a_space_or_newline_after_the_host_is_refused(tmp_path: Path) -> None:
    for url in ("http://127.0.0.1:1/ x", "http://127.0.0.1:1\\n"):
        with pytest.raises(ConfigError, match=r"server\.url"):
            load_experiment(_write(tmp_path, GOOD.replace('"http://127.0.0.1:18181"', f'"{url}"')))
