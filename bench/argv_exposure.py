"""How often a value of the server's environment is seen on a command line while the process service starts it.

The process service's wrapper (orchestrator/services/process.py ``_WRAPPER``) once ran the server as
``env -- HF_TOKEN=... program args``: ``env``'s argv holds the environment until it execs the program, an
instant in which ``ps`` (or any reader of ``/proc/*/cmdline``) shows it. CI's secrets test sampled it there once.
Now the wrapper exports the environment in the server's subshell and execs the program.

This bench starts ``/bin/true`` through the wrapper ``--starts`` times each way, with the launch file the service
writes (``ProcessService.launch_text``) and, for the old way, the same file with ``set -- env -- K=V program``
and the old last line ``"$@"``, while a thread reads every ``/proc/*/cmdline`` in a loop; it prints how many
readings held the value. Run it with a busy core to widen the instant (``while :; do :; done &``).

    python bench/argv_exposure.py --starts 400

Results: bench/RESULTS-suite.md (session twelve).
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import tempfile
import threading
from pathlib import Path

from orchestrator.hosts import LocalHost
from orchestrator.plan.deployments import Deployment
from orchestrator.quoting import shell_join
from orchestrator.services import ProcessService
from orchestrator.services.process import _WRAPPER

OLD_LAST_LINE = '"$@"; echo $? > "$0"\n'


def sightings(wrapper: str, launch: str, value: str, starts: int, where: Path) -> int:
    """Readings of ``/proc/*/cmdline`` that held ``value`` while ``wrapper`` ran ``launch`` ``starts`` times."""
    seen, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    try:
                        seen[0] += value.encode() in (entry / "cmdline").read_bytes()
                    except OSError:
                        continue

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        for _ in range(starts):
            (where / "b.launch").write_text(launch)
            files = [str(where / n) for n in ("b.exit", "b.pid", "b.launch")]
            subprocess.run(["sh", "-c", wrapper, *files, ""], check=True)
    finally:
        stop.set()
        thread.join()
    return seen[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=400)
    args = parser.parse_args()
    token = str(secrets.randbelow(10**12) + 10**12)
    deployment = Deployment(
        id="d", variant="v", command="/bin/true", environment={"HF_TOKEN": token}, config_hash="c", load_points=[]
    )
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        now = ProcessService(LocalHost(), "b", state_dir=tmp).launch_text(deployment)
        old_wrapper = _WRAPPER.replace('(specsweep_environment; exec "$@"); echo $? > "$0"\n', OLD_LAST_LINE)
        assert old_wrapper != _WRAPPER
        old = f"set -- {shell_join(['env', '--', f'HF_TOKEN={token}', '/bin/true'])}\n"
        for name, wrapper, launch in (
            ("env K=V program", old_wrapper, old),
            ("exported in the subshell", _WRAPPER, now),
        ):
            count = sightings(wrapper, launch, token, args.starts, where)
            print(f"{name}: {count} readings held the value, in {args.starts} starts")


if __name__ == "__main__":
    main()
