"""A real single-node SLURM for the cluster tests: munged, slurmctld and slurmd started in a temp
folder with their own config, socket and ports (recipe: ../shared/notes/slurm_single_node.md).

One cluster per pytest process (each xdist worker gets its own, on ports the OS hands out, so two
workers, or two checkouts testing at once, never share a controller). Session-scoped: starting
takes ~2 s, stopping ~5 s. Only the three PIDs started here are signalled, in reverse order, also
when a test or the start itself fails (finalizer). Without the SLURM binaries every test using it
is skipped, saying what to install (``.ci/run`` installs them, so CI always runs these tests).

Job states: submitit polls ``sacct``, which needs accounting. Real accounting is ``slurmdbd`` plus a
MariaDB server: a database to initialise and a third daemon for every test session, not seconds of
start-up on a 2-core CI box. Without it ``sacct`` refuses, states stay UNKNOWN and a job SLURM kills
(cancel, time limit) never counts as done. So ``sacct`` here is a shim first on PATH that answers
submitit's one query, ``sacct -o JobID,State,NodeList --parsable2 -j ID...``, from
``squeue --states=all --array``, which still lists finished jobs because ``MinJobAge=3600`` keeps
them in the controller's memory for an hour.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

BINARIES = ("mungekey", "munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
INSTALL = "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge"

SLURM_CONF = """\
ClusterName=leanlooptest
SlurmctldHost={node}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket={root}/munge/sock,cred_expire=5
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# finished jobs stay visible to squeue (the sacct shim reads them from there)
MinJobAge=3600
# a requeued job may start again after cred_expire; let the scheduler notice within a second
SchedulerParameters=bf_interval=1,sched_interval=1
KillWait=2
SlurmdParameters=config_overrides
NodeName={node} CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""

# submitit's only accounting query, answered from the controller's job list
SACCT_SHIM = """\
#!/bin/sh
# sacct shim (tests/cluster/conftest.py): sacct -o JobID,State,NodeList --parsable2 -j ID [-j ID...]
ids=""
while [ $# -gt 0 ]; do
  case "$1" in
    -j) ids="$ids${ids:+,}$2"; shift 2 ;;
    *) shift ;;
  esac
done
echo "JobID|State|NodeList"
exec squeue --states=all --array --noheader --format='%i|%T|%N' ${ids:+--jobs="$ids"}
"""


def _find(name: str) -> str | None:
    """A SLURM or munge binary; the daemons live in /usr/sbin, not always on a user's PATH."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlurmCluster:
    """One controller and one compute node under ``root``; ``env`` is what clients need."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "etc" / "slurm.conf"
        self.bin = root / "bin"
        self.started: list[tuple[str, subprocess.Popen]] = []

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf), "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}"}

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(args, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=30)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def start(self) -> None:
        root = self.root
        for sub in ("munge", "etc", "state", "spool", "log", "bin"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "munge").chmod(0o700)  # munged refuses a socket folder others can write to
        self.conf.write_text(
            SLURM_CONF.format(
                node=socket.gethostname().split(".")[0], root=root, ctld_port=_free_port(), slurmd_port=_free_port()
            )
        )
        shim = self.bin / "sacct"
        shim.write_text(SACCT_SHIM)
        shim.chmod(0o755)
        subprocess.run(
            [_find("mungekey"), "--create", f"--keyfile={root}/munge/munge.key", "--bits=1024"],
            check=True,
            capture_output=True,
        )
        self._spawn(
            "munged",
            [
                "munged",
                "-F",
                "--force",
                f"--socket={root}/munge/sock",
                f"--key-file={root}/munge/munge.key",
                f"--pid-file={root}/munge/pid",
                f"--seed-file={root}/munge/seed",
                f"--log-file={root}/munge/log",
            ],
        )
        self._wait_for(lambda: (root / "munge" / "sock").exists(), "munged's socket", 10)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["slurmd", "-D"])
        self._wait_for(lambda: self.run("sinfo", "-h", "-o", "%T", check=False).strip() == "idle", "an idle node", 30)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")  # noqa: SIM115 (lives as long as the daemon)
        process = subprocess.Popen(
            [_find(argv[0]), *argv[1:]],
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.started.append((name, process))

    def _wait_for(self, ready, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [name for name, process in self.started if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"SLURM test cluster: no {what} after {timeout_s} s"
                    f"{' (' + ', '.join(dead) + ' exited)' if dead else ''}\n{self.logs()}"
                )
            time.sleep(0.2)

    def logs(self, lines: int = 15) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")) + [self.root / "munge" / "log"]:
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        """Cancel this cluster's jobs, then SIGTERM the daemons started here (slurmd, slurmctld,
        munged), SIGKILL after 10 s."""
        if any(name == "slurmctld" and process.poll() is None for name, process in self.started):
            self.run("scancel", "--full", f"--user={os.getuid()}", check=False)
            self._wait_for_no_jobs(15)
        for name, process in reversed(self.started):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in reversed(self.started):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.started.clear()

    def _wait_for_no_jobs(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            active = self.run(
                "squeue", "-h", "-o", "%i", "--states=PENDING,RUNNING,COMPLETING,CONFIGURING", check=False
            ).strip()
            if not active:
                return
            time.sleep(0.5)

    def state(self, job_id: str) -> str:
        return self.run("squeue", "--states=all", "-h", "-o", "%T", f"--jobs={job_id}", check=False).strip()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory, request):
    missing = [name for name in BINARIES if _find(name) is None]
    if missing:
        pytest.skip(f"SLURM is not installed (missing {', '.join(missing)}): {INSTALL}")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    request.addfinalizer(cluster.stop)
    cluster.start()
    return cluster


@pytest.fixture
def slurm(slurm_cluster, monkeypatch):
    """The test cluster as this test's SLURM: its config and the sacct shim for submitit and
    for every job it submits (sbatch passes the environment on)."""
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster
