"""The command line of one stage run, and the callable that runs it inside a submitit job.

Locally, in a sweep and on SLURM the command is the same: ``python -m <stage>.train --config A
[--config B ...] --run NAME [--a.b value ...]``. Overrides are rendered as the values a user
would type (JSON for anything that is not a plain string), so jsonargparse reads them exactly as
it reads a typed command line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leanloop import artifacts
from leanloop.artifacts import MANIFEST, last_checkpoint, read_manifest, run_dir
from leanloop.paths import REPO_ROOT

DOTTED_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# options the cluster tools set themselves; an override may not smuggle them in
RESERVED_KEYS = {"config", "run"}


class CommandError(ValueError):
    """A stage run that cannot be turned into a command line."""


def render_value(value: Any) -> str:
    """A command-line value jsonargparse parses back to ``value`` (strings stay as typed)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def check_override_key(key: str, where: str = "override") -> None:
    if not DOTTED_KEY.match(key):
        raise CommandError(
            f"{where} key {key!r} is not a dotted option name like 'model.optim.lr' "
            "(letters, digits and underscores, separated by dots)"
        )
    if key in RESERVED_KEYS:
        raise CommandError(
            f"{where} key {key!r} is set by the cluster tools; list config files under 'config' "
            "and let the sweep or --run name the run"
        )


def parse_cli_overrides(args: list[str]) -> dict[str, str]:
    """``['--model.optim.lr', '1e-4', '--trainer.max_steps=10']`` -> ordered dict of strings."""
    overrides: dict[str, str] = {}
    index = 0
    while index < len(args):
        token = args[index]
        if not token.startswith("--"):
            raise CommandError(f"expected an option like --model.optim.lr, got {token!r}")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if index + 1 >= len(args) or args[index + 1].startswith("--"):
                raise CommandError(f"option --{key} has no value (write --{key} VALUE)")
            index += 1
            value = args[index]
        check_override_key(key)
        overrides[key] = value
        index += 1
    return overrides


def lookup_option(tree: Any, dotted: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted option in a parsed config, through class_path/init_args."""
    node = tree
    for part in dotted.split("."):
        if isinstance(node, dict) and part not in node and isinstance(node.get("init_args"), dict):
            node = node["init_args"]  # class_path/init_args nesting of subclass options
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def entry_module(stage: str, entry: str | None = None) -> str:
    """The module a stage runs as (``<stage>.train`` unless ``entry`` names another)."""
    module = entry or f"{stage}.train"
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise CommandError(
            f"no module {module!r} to run for stage {stage!r}: a stage is a top-level folder with "
            "train.py (pretrain, classifiers, sft, feedback_model, rl, autoformalizer); pass --entry "
            "MODULE for another entry point"
        )
    return module


def default_run_name(configs: list[str]) -> str:
    """The run name the stage CLI would choose itself (``leanloop.artifacts.default_run_name``)."""
    try:
        return artifacts.default_run_name(configs)
    except ValueError as error:
        raise CommandError(str(error)) from None


@dataclass
class StageRun:
    """One run of one stage: what the command line is made of."""

    stage: str
    configs: list[str]
    run: str
    overrides: dict[str, Any] = field(default_factory=dict)
    entry: str | None = None
    overwrite: bool = False
    """Pass ``--overwrite true``: replace a finished run (the stage refuses otherwise)."""

    def __post_init__(self) -> None:
        if not self.configs:
            raise CommandError(f"stage {self.stage!r} run {self.run!r} has no config file")
        try:
            artifacts.check_run_name(self.run)
        except artifacts.RunNameError as error:
            raise CommandError(str(error)) from None
        for key in self.overrides:
            check_override_key(key)
        # the command runs in the repository root: keep paths that work from there as written
        # (readable in logs), make any other existing path absolute
        self.configs = [_for_repo_root(config) for config in self.configs]

    @property
    def module(self) -> str:
        return entry_module(self.stage, self.entry)

    @property
    def run_dir(self) -> Path:
        return run_dir(self.stage, self.run)

    @property
    def finished(self) -> bool:
        return (self.run_dir / MANIFEST).is_file()

    def option(self, dotted: str) -> Any:
        """The value the stage will read for a dotted option: an override, else the last config
        file that sets it; None when nothing does (the stage's default)."""
        if dotted in self.overrides:
            return self.overrides[dotted]
        import yaml

        value = None
        for config in self.configs:
            path = Path(config) if Path(config).is_absolute() else REPO_ROOT / config
            found, found_value = lookup_option(yaml.safe_load(path.read_text()) or {}, dotted)
            if found:
                value = found_value
        return value

    def cpu_processes(self) -> int:
        """How many processes the trainer starts per node when it runs on CPUs: ``trainer.devices``
        as a count, a list of ids, or 'auto' (one)."""
        devices = self.option("trainer.devices")
        if isinstance(devices, str):
            import yaml

            devices = yaml.safe_load(devices)  # an override is the text typed on the command line
        if isinstance(devices, (list, tuple)):
            return max(1, len(devices))
        if isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
            return devices
        return 1

    def argv(self, extra: dict[str, Any] | None = None) -> list[str]:
        args = ["-m", self.module]
        for config in self.configs:
            args += ["--config", str(config)]
        args += ["--run", self.run]
        if self.overwrite:
            args += ["--overwrite", "true"]
        for key, value in {**self.overrides, **(extra or {})}.items():
            args += [f"--{key}", render_value(value)]
        return [sys.executable, *args]

    def shell(self, extra: dict[str, Any] | None = None) -> str:
        import shlex

        argv = self.argv(extra)
        return shlex.join(["python", *argv[1:]])


def _for_repo_root(config: str | Path) -> str:
    path = Path(config)
    if path.is_absolute() and path.is_file():
        return str(path)
    if (REPO_ROOT / path).is_file():
        return str(config)
    if path.is_file():
        return str(path.resolve())
    raise CommandError(f"config file {config} not found (relative paths start at {REPO_ROOT})")


@contextmanager
def _slurm_ending():
    """Inside a SLURM job, a list that gets an entry when SLURM sends SIGTERM (else always empty)."""
    received: list[int] = []
    # a local submitit job started from inside an allocation sees SLURM_JOB_ID too: not SLURM's to end
    if "SLURM_JOB_ID" not in os.environ or "SUBMITIT_LOCAL_JOB_ID" in os.environ:
        yield received
        return
    try:
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    except ValueError:  # not the main thread: leave signals to whoever owns them
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class StageCommand:
    """What a submitit job executes: the stage's command line as a child process.

    Picklable by reference (module-level class), so the node imports ``cluster.command`` from the
    same checkout. Output is not captured (unlike ``submitit.helpers.CommandFunction``): it streams
    into the job's log files under ``<run>/slurm/``, which matters for hours-long training logs.
    """

    argv: list[str]
    run_dir: str
    cwd: str = str(REPO_ROOT)
    env: dict[str, str] = field(default_factory=dict)
    shard_count: int = 0

    def command(self, shard: int | None = None) -> list[str]:
        """The stage's command line; an array task's also names its shard (``--shard I/N``, the
        option every sharded stage takes)."""
        return list(self.argv) + ([] if shard is None else ["--shard", f"{shard}/{self.shard_count}"])

    def __call__(self, shard: int | None = None) -> dict[str, Any]:
        env = {**os.environ, **self.env}
        if shard is not None:
            env["LEANLOOP_SHARD_INDEX"] = str(shard)
            env["LEANLOOP_SHARD_COUNT"] = str(self.shard_count)
        argv = self.command(shard)
        restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        checkpoint = last_checkpoint(self.run_dir) if restarts else None
        if checkpoint is not None and "--ckpt_path" not in argv and not (Path(self.run_dir) / MANIFEST).is_file():
            # SLURM requeued this job (preemption, node failure, scontrol requeue): continue from the
            # last step checkpoint instead of training again from step 0
            print(f"requeued (restart {restarts}): resuming from {checkpoint}", flush=True)
            argv += ["--ckpt_path", str(checkpoint)]
        print("running:", " ".join(argv), flush=True)
        with _slurm_ending() as ending:
            code = subprocess.run(argv, cwd=self.cwd, env=env, check=False).returncode
        if ending:
            # SLURM cancels, times out and requeues a job alike: SIGTERM, then SIGKILL after its
            # KillWait. Returning would record a failed result that a requeued run has not earned
            # (and a cancel as a crash): wait for the SIGKILL instead, leaving SLURM's state to speak
            print(f"SLURM is ending job {os.environ.get('SLURM_JOB_ID')}; not recording a result", flush=True)
            while True:
                time.sleep(60)
        if code != 0:
            raise RuntimeError(
                f"{' '.join(argv[1:4])} ... exited with status {code}; its output is in this job's "
                f"log under {self.run_dir}/slurm/"
            )
        # every rank runs this; the manifest is rank zero's, and a shard of an array job may not
        # write one (the stage merges shards), so absence is not an error here
        folder = Path(self.run_dir)
        return read_manifest(folder) if (folder / MANIFEST).is_file() else {}
