"""Talking to Slurm (orchestrator/launchers/slurm/jobs.py): the parsers on answers recorded from Slurm 22.05
(Debian's slurm-wlm, the system tests' cluster), the batch script, job names and comments; and the launcher's
keys in an experiment file (orchestrator/experiment/hosts.py), each error with its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.launchers.slurm.jobs import (
    JobSettings,
    NodeInfo,
    job_comment,
    job_name,
    parse_comment,
    parse_key_values,
    parse_scontrol_job,
    parse_sinfo,
    parse_squeue,
    render_batch_script,
)
from orchestrator.plan.deployments import Deployment

SEP = "\x1f"
SQUEUE = (
    f"22{SEP}specsweep.x.r1.d1{SEP}PENDING{SEP}None{SEP}n/a{SEP}{SEP}specsweep-nosudo{SEP}specsweep;run=r1;deployment=d1\n"
    f"23{SEP}specsweep.x.r1.d2{SEP}RUNNING{SEP}None{SEP}specsweep-th1{SEP}specsweep-th1{SEP}specsweep-nosudo{SEP}"
    "specsweep;run=r1;deployment=d2\n"
    f"24{SEP}other job{SEP}PENDING{SEP}Priority{SEP}n/a{SEP}{SEP}alice{SEP}(null)\n"
)
# scontrol -o -d show job, as 22.05 prints it (shortened: the keys between are as many more of the same).
SCONTROL_RUNNING = (
    "JobId=9 JobName=specsweep.six.r1.d-0c UserId=specsweep-nosudo(1002) GroupId=specsweep-nosudo(1002) "
    "JobState=RUNNING Reason=None Dependency=(null) ExitCode=0:0 RunTime=00:00:04 TimeLimit=00:10:00 "
    "Partition=gpu NodeList=specsweep-th2 BatchHost=specsweep-th2 NumNodes=1 JOB_GRES=gpu:8 "
    "  Nodes=specsweep-th2 CPU_IDs=1 Mem=0 GRES=gpu:8(IDX:0-7) MinCPUsNode=1 Features=(null) "
    "Command=(null) WorkDir=/home/u Comment=specsweep;run=r1;deployment=d-0c;config=c-0c;script=abc  "
    "StdErr=/srv/shared/six/r1/d-0c.9.log StdIn=/dev/null StdOut=/srv/shared/six/r1/d-0c.9.log Power= "
    "TresPerNode=gres:gpu:8 "
)
SCONTROL_CANCELLED = (
    "JobId=4 JobName=specsweep.six.r1.d-40 UserId=specsweep-nosudo(1002) JobState=CANCELLED Reason=None "
    "ExitCode=0:15 NodeList=specsweep-th1 BatchHost=specsweep-th1 JOB_GRES=gpu:8   Nodes=specsweep-th1 "
    "CPU_IDs=1 Mem=0 GRES= MinCPUsNode=1 Comment=a comment with spaces  StdOut=/srv/x.log TresPerNode=gres:gpu:8 "
)
SCONTROL_PENDING = (
    "JobId=22 JobName=specsweep.x.r1.d1 UserId=specsweep-nosudo(1002) JobState=PENDING Reason=Resources "
    "ExitCode=0:0 NodeList= NumNodes=1 Comment=specsweep;run=r1;deployment=d1  StdOut=/srv/x1.log "
    "TresPerNode=gres:gpu:8 "
)


def test_squeue_lines_become_jobs() -> None:
    pending, running, other = parse_squeue(SQUEUE)
    assert (pending.job_id, pending.state, pending.node, pending.waiting) == ("22", "PENDING", "", True)
    assert pending.tags == {"run": "r1", "deployment": "d1"}
    assert (running.state, running.node, running.running) == ("RUNNING", "specsweep-th1", True)
    assert running.describe() == "job 23 RUNNING on specsweep-th1"
    assert (other.name, other.user, other.comment, other.tags) == ("other job", "alice", "", {})
    assert other.describe() == "job 24 PENDING (Priority)"


def test_scontrol_says_node_gres_output_and_how_a_job_ended() -> None:
    running = parse_scontrol_job(SCONTROL_RUNNING)
    assert running is not None
    assert (running.state, running.node, running.gres) == ("RUNNING", "specsweep-th2", "gpu:8(IDX:0-7)")
    assert running.stdout == "/srv/shared/six/r1/d-0c.9.log" and running.user == "specsweep-nosudo"
    assert running.tags["config"] == "c-0c"
    cancelled = parse_scontrol_job(SCONTROL_CANCELLED)
    assert cancelled is not None and cancelled.ended and cancelled.comment == "a comment with spaces"
    assert cancelled.gres == "gpu:8"  # released: the request stays
    assert cancelled.describe() == "job 4 CANCELLED on specsweep-th1, exit 0:15"
    pending = parse_scontrol_job(SCONTROL_PENDING)
    assert pending is not None and pending.describe() == "job 22 PENDING (Resources)"
    assert parse_scontrol_job("slurm_load_jobs error: Invalid job id specified") is None
    assert parse_scontrol_job("JobId=5 JobState=CANCELLED by 1002 Reason=None").state == "CANCELLED"  # type: ignore[union-attr]


def test_key_values_keep_spaces_inside_values() -> None:
    kv = parse_key_values("JobId=1 Comment=a b  c StdOut=/x AllocNode:Sid=h:1")
    assert kv == {"JobId": "1", "Comment": "a b  c", "StdOut": "/x", "AllocNode:Sid": "h:1"}


def test_sinfo_nodes_and_their_types() -> None:
    nodes = parse_sinfo("n1|gpu*|gpu:a100:8(S:0-1)|ib,a100\nn2|gpu*|gpu:a100:8|a100,ib\nn3|big|gpu:h100:8|(null)\n")
    assert [n.name for n in nodes] == ["n1", "n2", "n3"]
    assert nodes[0].node_type == nodes[1].node_type == "gpu:a100:8 [a100,ib]"
    assert nodes[2].node_type == "gpu:h100:8" and NodeInfo("n4").node_type == "no-gres"


def _deployment(**kw: object) -> Deployment:
    fields: dict[str, object] = {
        "id": "d-abc",
        "variant": "ddtree",
        "params": {"budget": 7},
        "command": "/usr/bin/python3 -m orchestrator.sim --port 18181 --note 'a b'",
        "environment": {"PYTHONPATH": "/x:/y"},
        "config_hash": "c-abc",
        "load_points": [],
    }
    fields.update(kw)
    return Deployment.model_validate(fields)


def test_the_batch_script_names_comments_and_execs_the_server() -> None:
    settings = JobSettings(partition="gpu", gres="gpu:8", time="1:00:00", qos="high", extra_args=("--exclusive",))
    script = render_batch_script(settings, _deployment(), experiment="six", run_id="r1", log_dir="/srv/s/six/r1")
    lines = script.text.splitlines()
    assert lines[0] == "#!/bin/sh"
    assert "#SBATCH --job-name=specsweep.six.r1.d-abc" in lines
    comment = next(line for line in lines if "--comment=" in line).split("--comment=", 1)[1].rstrip("'")
    assert parse_comment(comment) == {
        "run": "r1",
        "deployment": "d-abc",
        "config": "c-abc",
        "script": script.script_hash,
    }
    for option in ("--nodes=1", "--ntasks=1", "--partition=gpu", "--gres=gpu:8", "--time=1:00:00", "--qos=high"):
        assert f"#SBATCH {option}" in lines
    assert "#SBATCH --exclusive" in lines and "#SBATCH --output=/srv/s/six/r1/d-abc.%j.log" in lines
    assert lines[-2:] == [
        "export PYTHONPATH=/x:/y",
        "exec /usr/bin/python3 -m orchestrator.sim --port 18181 --note 'a b'",
    ]
    assert script.output == "/srv/s/six/r1/d-abc.%j.log" and script.name == job_name("six", "r1", "d-abc")
    # The hash is what the script runs: the same deployment hashes the same, another command does not.
    again = render_batch_script(settings, _deployment(), experiment="six", run_id="r1", log_dir="/srv/s/six/r1")
    other = render_batch_script(
        settings, _deployment(command="/bin/server"), experiment="six", run_id="r1", log_dir="/srv/s/six/r1"
    )
    assert again.script_hash == script.script_hash != other.script_hash
    with_dir = render_batch_script(
        JobSettings(workdir="/srv/a dir"), _deployment(), experiment="six", run_id="r1", log_dir="/l"
    )
    assert "cd -- '/srv/a dir' || exit 1" in with_dir.text and "#SBATCH --partition" not in with_dir.text


def test_comments_of_other_tools_are_not_ours() -> None:
    assert parse_comment("my job") == {} and parse_comment("specsweep;run=r") == {"run": "r"}
    assert job_comment("r1", _deployment(), "h").startswith("specsweep;run=r1;deployment=d-abc;")


# -- the experiment's keys -------------------------------------------------------------------------------------

BASE = """\
name: s
{top}
service:
{service}
server: {server}
engine: sim
variants:
  ar: {{spec: ""}}
load: {{concurrency: [1], requests: 2}}
"""
LAUNCHER = """launcher:
  kind: slurm
  login: user@login-node
  partition: gpu
  gres: "gpu:8"
  max_jobs: 2
{more}"""
PROCESS = "  kind: process\n  command: /opt/server --port 9000 {spec}"


def _load(
    tmp_path: Path, *, top: str = "", service: str = PROCESS, server: str = '{url: "http://{node}:9000"}'
) -> object:
    path = tmp_path / "e.yaml"
    path.write_text(BASE.format(top=top, service=service, server=server))
    return load_experiment(path)


def test_a_slurm_launcher_validates_with_shorthands(tmp_path: Path) -> None:
    exp = _load(tmp_path, top=LAUNCHER.format(more='  extra_args: "--exclusive --mem=0"\n  time: "1-00:00:00"'))
    launcher = exp.launcher  # type: ignore[attr-defined]
    assert launcher.login.kind == "ssh" and launcher.login.ssh == "user@login-node"
    assert launcher.extra_args == ["--exclusive", "--mem=0"] and launcher.target == "slurm-gpu"
    assert launcher.shared_dir == "~/.local/state/specsweep/slurm" and launcher.pending_timeout == 3600
    local = _load(tmp_path, top="launcher: {kind: slurm, login: local}", server='{url: "http://{node}:9000"}')
    assert local.launcher.login.kind == "local" and local.launcher.target == "slurm-default"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("top", "service", "server", "line", "words"),
    [
        (LAUNCHER.format(more="  time: 10 min"), PROCESS, '{url: "http://{node}:9"}', 8, "a Slurm time limit"),
        (
            LAUNCHER.format(more="  extra_args: [--output=x]"),
            PROCESS,
            '{url: "http://{node}:9"}',
            8,
            "set by specsweep",
        ),
        (LAUNCHER.format(more="  extra_args: [-Jname]"), PROCESS, '{url: "http://{node}:9"}', 8, "-J is set"),
        (LAUNCHER.format(more="  partition2: x"), PROCESS, '{url: "http://{node}:9"}', 8, "unknown key"),
        (LAUNCHER.format(more="  qos: high prio"), PROCESS, '{url: "http://{node}:9"}', 8, "one Slurm word"),
        (LAUNCHER.format(more="  shared_dir: relative/dir"), PROCESS, '{url: "http://{node}:9"}', 8, "absolute"),
        ("launcher: {kind: slurm, max_jobs: 0}", PROCESS, '{url: "http://{node}:9"}', 2, "greater than"),
        (LAUNCHER.format(more="host: local"), PROCESS, '{url: "http://{node}:9"}', 2, "not both"),
        (
            LAUNCHER.format(more=""),
            "  kind: systemd\n  unit: x.service\n  exec_start: /opt/s {spec}",
            '{url: "http://{node}:9"}',
            10,
            "use service kind process",
        ),
        (LAUNCHER.format(more=""), PROCESS + "\n  log_file: /x.log", '{url: "http://{node}:9"}', 12, "output file"),
        ("host: local", PROCESS, '{url: "http://{node}:9"}', 6, "{node} with a Slurm launcher"),
        ("host: local", PROCESS, '{url: "http://x:9", via: ssh}', 6, "every host must be ssh"),
        ("launcher: {kind: slurm, login: local}", PROCESS, '{url: "http://{node}:9", via: ssh}', 6, "drop via"),
        ("launcher: {kind: slurn}", PROCESS, '{url: "http://{node}:9"}', 2, "did you mean 'slurm'"),
    ],
)
def test_launcher_mistakes_name_their_line(
    tmp_path: Path, top: str, service: str, server: str, line: int, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, top=top, service=service, server=server)
    text = str(caught.value)
    assert f"e.yaml:{line}:" in text and words in text, text


def test_via_ssh_on_ssh_hosts_is_fine(tmp_path: Path) -> None:
    exp = _load(tmp_path, top="host: root@gpu-box", server='{url: "http://127.0.0.1:9", via: ssh}')
    assert exp.server.via == "ssh"  # type: ignore[attr-defined]


# Any text at all in a label, a workdir or the experiment's matrix values (which validate with newlines in
# them): the batch script keeps its shape. sbatch reads #SBATCH lines only up to the first line that is neither
# a comment nor blank, so every directive must come before the one command line, and there is exactly one.
_HOSTILE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60) | st.sampled_from(
    ["a\ntouch x #", "x\r\nexec rm -rf ~", "\n#SBATCH --partition=evil", "$(id)`id`;|&", "\u2028\x85\x1b[2J"]
)


@settings(max_examples=300, deadline=None)
@given(label=_HOSTILE, workdir=_HOSTILE)
def test_no_label_or_value_can_break_the_batch_script(label: str, workdir: str) -> None:
    try:
        script = render_batch_script(
            JobSettings(partition="gpu", workdir=workdir or None),
            _deployment(),
            experiment="six",
            run_id="r1",
            log_dir="/l",
            label=label,
        )
    except ConfigError:
        return  # a value no script can hold is refused, never written
    lines = script.text.split("\n")
    assert lines[-1] == "" and all("\r" not in line for line in lines)
    body = lines[:-1]
    commands = [i for i, line in enumerate(body) if line and not line.startswith("#")]
    assert body[0] == "#!/bin/sh" and body[1].startswith("# specsweep: experiment six, run r1, deployment d-abc")
    assert body[1].isascii() and body[1].isprintable()
    assert body[-1].startswith("exec ") and commands[-1] == len(body) - 1
    # the directives all come before the first command, and are the ones specsweep wrote
    first_command = commands[0]
    directives = [line for line in body if line.startswith("#SBATCH")]
    assert all(i < first_command for i, line in enumerate(body) if line.startswith("#SBATCH"))
    assert [d.replace("'", "").split("=")[0] for d in directives][:2] == ["#SBATCH --job-name", "#SBATCH --comment"]
    assert len(directives) == 2 + 5  # the two own ones, nodes, ntasks, output, open-mode, partition
    exports = len(_deployment().environment)  # an export line per environment value, before the exec
    assert len(commands) == (2 if workdir else 1) + exports
    assert all(body[i].startswith("export ") for i in commands[-1 - exports : -1])


def test_a_control_character_never_becomes_a_directive() -> None:
    from orchestrator.quoting import sbatch_directive

    assert sbatch_directive("--partition=gpu") == "#SBATCH --partition=gpu"
    assert sbatch_directive("--comment=a b") == "#SBATCH '--comment=a b'"
    for bad in ("--partition=a\ntouch x", "--qos=\r", "--x=\x00"):
        with pytest.raises(ConfigError):
            sbatch_directive(bad)
