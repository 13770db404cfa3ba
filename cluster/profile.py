"""Cluster resource profiles: ``configs/cluster/<name>.yaml``, typed by :class:`ClusterProfile`.

A profile says where and with what a job runs (partition, nodes, GPUs per node, CPUs, memory,
time, account, QoS, array size). It never says *what* is trained: that stays in the stage's
config. ``configs/cluster/`` is not a stage's config folder: its files are parsed here, against
:class:`ClusterProfile`, and tested in tests/cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cluster.command import render_value
from leanloop.paths import REPO_ROOT

PROFILES_DIR = REPO_ROOT / "configs" / "cluster"
DEFAULT_PROFILE = PROFILES_DIR / "local.yaml"


class ProfileError(ValueError):
    """A cluster profile that cannot describe a job."""


@dataclass
class ClusterProfile:
    """Resources of one job. Field names follow submitit's shared parameters where one exists."""

    executor: Literal["auto", "slurm", "local", "debug"] = "auto"
    """auto: SLURM when ``srun`` is on PATH, else a local process (submitit's AutoExecutor)."""
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    nodes: int = 1
    gpus_per_node: int = 0
    gpu_memory_gb: float = 80.0
    """Memory of one GPU: submit and sweeps refuse a run whose memory plan (leanloop.plan) needs more
    per GPU, unless ``--force true``."""
    cpus_per_task: int | None = None
    """CPUs of each task; with ``distributed`` that is per GPU, so size data loader workers by it."""
    mem_gb: float | None = None
    """Memory per node; 0 asks SLURM for all of it (``--mem=0``), None leaves the site default."""
    time_min: int = 60
    distributed: bool = True
    """One SLURM task per GPU and Lightning reads its ranks from SLURM (``--trainer.num_nodes`` and
    ``--trainer.devices`` are set to match). False: one task per node that uses the GPUs itself
    (e.g. a sampler with tensor-parallel vLLM)."""
    array: int = 0
    """Above 0: an array job of this many shards, each told its shard: ``--shard I/N`` on its
    command line (sharded stages only: data, sample, classify, prm-generate) and
    ``LEANLOOP_SHARD_INDEX``/``_COUNT`` in its environment."""
    array_parallelism: int = 64
    setup: list[str] = field(default_factory=list)
    """Shell lines run on the node before the job (``module load cuda``, ``source .venv/bin/activate``)."""
    env: dict[str, str] = field(default_factory=dict)
    slurm_additional: dict[str, Any] = field(default_factory=dict)
    """Any other ``#SBATCH`` option, e.g. ``{exclusive: true, mail-type: END}``."""

    def validate(self) -> None:
        if self.nodes < 1:
            raise ProfileError(f"nodes must be at least 1, got {self.nodes}")
        if self.gpus_per_node < 0:
            raise ProfileError(f"gpus_per_node must be 0 or more, got {self.gpus_per_node}")
        if self.gpu_memory_gb <= 0:
            raise ProfileError(f"gpu_memory_gb must be positive, got {self.gpu_memory_gb}")
        if self.time_min < 1:
            raise ProfileError(f"time_min must be at least 1 minute, got {self.time_min}")
        if self.array < 0:
            raise ProfileError(f"array must be 0 (no array) or the number of shards, got {self.array}")
        if self.array and self.nodes > 1:
            raise ProfileError("an array job shards work over independent tasks; use nodes: 1 with array")
        if self.nodes > 1 and self.gpus_per_node and not self.distributed:
            raise ProfileError(
                "several GPU nodes need distributed: true (one task per GPU, ranks from SLURM); "
                "a non-distributed program cannot span nodes"
            )

    def tasks_per_node(self, cpu_processes: int = 1) -> int:
        """SLURM tasks per node. Lightning's SLURM environment wants ntasks-per-node == devices (one
        process per device): the GPUs when the profile has them, else the CPU processes the stage's
        trainer asks for (``trainer.devices`` of e.g. configs/strategy/ddp_cpu.yaml)."""
        if not self.distributed:
            return 1
        return self.gpus_per_node or max(1, cpu_processes)

    def trainer_overrides(self) -> dict[str, Any]:
        """Options that make Lightning's world match the allocation: a distributed GPU job's devices,
        and any distributed job's node count."""
        if not self.distributed:
            return {}
        if not self.gpus_per_node:
            return {"trainer.num_nodes": self.nodes} if self.nodes > 1 else {}
        return {"trainer.accelerator": "gpu", "trainer.devices": self.gpus_per_node, "trainer.num_nodes": self.nodes}

    def submitit_parameters(self, name: str, cpu_processes: int = 1) -> dict[str, Any]:
        """Parameters for ``AutoExecutor.update_parameters`` (shared ones plus ``slurm_*``);
        ``cpu_processes``: the trainer's CPU devices, the task count of a distributed CPU job."""
        params: dict[str, Any] = {
            "name": name,
            "timeout_min": self.time_min,
            "nodes": self.nodes,
            "tasks_per_node": self.tasks_per_node(cpu_processes),
            "gpus_per_node": self.gpus_per_node,
            "slurm_array_parallelism": self.array_parallelism,
        }
        if self.cpus_per_task:
            params["cpus_per_task"] = self.cpus_per_task
        if self.mem_gb is not None:
            params["mem_gb"] = self.mem_gb
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(self, key):
                params[f"slurm_{key}"] = getattr(self, key)
        if self.setup:
            params["slurm_setup"] = list(self.setup)
        if self.slurm_additional:
            params["slurm_additional_parameters"] = dict(self.slurm_additional)
        return params


def profile_parser(exit_on_error: bool = True):
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(exit_on_error=exit_on_error, prog="cluster profile")
    parser.add_class_arguments(ClusterProfile, "profile")
    return parser


def load_profile(path: str | Path | None = None, **changes: Any) -> ClusterProfile:
    """Read and validate a profile file (default: ``configs/cluster/local.yaml``)."""
    from jsonargparse import ArgumentError

    path = Path(path) if path is not None else DEFAULT_PROFILE
    if not path.is_file() and not path.is_absolute() and (REPO_ROOT / path).is_file():
        path = REPO_ROOT / path
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in PROFILES_DIR.glob("*.yaml")))
        raise ProfileError(f"cluster profile {path} not found (shipped profiles in {PROFILES_DIR}: {known})")
    parser = profile_parser(exit_on_error=False)
    args = ["--profile", str(path)]
    for key, value in changes.items():
        args += [f"--profile.{key}", render_value(value)]
    try:
        config = parser.parse_args(args)
    except ArgumentError as error:
        raise ProfileError(f"cluster profile {path}: {error}") from None
    profile = parser.instantiate(config).profile
    profile.validate()
    return profile
