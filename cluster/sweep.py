"""``python -m cluster.sweep --sweep configs/sweeps/<x>.yaml`` (``make sweep SWEEP=...``)

A sweep file (typed by :class:`SweepConfig`) names a stage, its base config(s), and either a
``grid`` (the cartesian product of dotted overrides) or a list of ``runs`` (override sets, e.g. an
ablation). Every run gets a deterministic name built from the sweep name and its override values,
so rerunning a sweep skips the runs whose ``artifacts/<stage>/<run>/manifest.json`` exists and
runs only the rest. Runs execute the stage's own entry point, one after another here, or through
``cluster.submit`` (``--executor submit --profile configs/cluster/gpu1.yaml``). At the end a table
of final metrics is printed and written to ``artifacts/sweeps/<name>/sweep_summary.csv`` with a
plot of the sweep's metric per run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from cluster.command import CommandError, StageRun, check_override_key, entry_module, lookup_option
from cluster.names import short_keys
from leanloop.artifacts import MANIFEST
from leanloop.paths import REPO_ROOT, repo_file

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_RUN_NAME = 120


class SweepError(ValueError):
    """A sweep file that cannot be expanded into runs."""


@dataclass
class RunSpec:
    """One run of a list sweep."""

    name: str | None = None
    """Short label used in the run name instead of the override values (e.g. ``no_packing``)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    config: list[str] = field(default_factory=list)
    """Extra config files layered after the sweep's base configs (e.g. a strategy)."""


@dataclass
class SweepConfig:
    name: str
    """Prefix of every run name and the folder of the summary (``artifacts/sweeps/<name>/``)."""
    stage: str
    config: list[str]
    """Base config file(s) of the stage, layered in order."""
    grid: dict[str, list[Any]] | None = None
    """Dotted option -> values; the runs are the cartesian product, in file order."""
    runs: list[RunSpec] | None = None
    """Explicit override sets; use this or ``grid``."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Applied to every run (e.g. a shorter ``trainer.max_steps`` for the whole sweep)."""
    entry: str | None = None
    """Module to run instead of ``<stage>.train``."""
    metric: str | None = None
    """Manifest metric to rank and plot (default: ``val/loss`` if present, else the first)."""
    mode: Literal["min", "max"] = "min"
    executor: Literal["local", "submit"] = "local"
    profile: str | None = None
    """Cluster profile for ``executor: submit`` (default ``configs/cluster/local.yaml``)."""


@dataclass
class SweepRun:
    """One expanded run: its name, what it varies, and its command."""

    stage_run: StageRun
    varied: dict[str, Any]
    label: str | None = None

    @property
    def name(self) -> str:
        return self.stage_run.run


def sweep_parser(exit_on_error: bool = True):
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(exit_on_error=exit_on_error, prog="sweep file")
    parser.add_class_arguments(SweepConfig, "sweep")
    return parser


def load_sweep(path: str | Path) -> SweepConfig:
    """Parse and validate a sweep file; every problem is a :class:`SweepError` naming the file."""
    from jsonargparse import ArgumentError

    path = existing_file(path, "sweep file")
    parser = sweep_parser(exit_on_error=False)
    try:
        sweep = parser.instantiate(parser.parse_args(["--sweep", str(path)])).sweep
    except ArgumentError as error:
        raise SweepError(f"sweep file {path}: {error}") from None
    try:
        validate(sweep)
    except (SweepError, CommandError) as error:
        raise SweepError(f"sweep file {path}: {error}") from None
    return sweep


def validate(sweep: SweepConfig) -> None:
    if not NAME_PATTERN.match(sweep.name):
        raise SweepError(f"name {sweep.name!r} must be letters, digits, '.', '_' or '-' (it names folders)")
    if (sweep.grid is None) == (sweep.runs is None):
        raise SweepError(
            "give exactly one of 'grid' (cartesian product of overrides) or 'runs' (a list of override sets)"
        )
    entry_module(sweep.stage, sweep.entry)
    if not sweep.config:
        raise SweepError("'config' lists the stage's base config file(s); it is empty")
    for config in sweep.config:
        existing_file(config, "base config")
    for key in sweep.overrides:
        check_override_key(key, "overrides")
    if sweep.grid is not None:
        if not sweep.grid:
            raise SweepError("'grid' is empty: give at least one option with a list of values")
        for key, values in sweep.grid.items():
            check_override_key(key, "grid")
            if not isinstance(values, list) or not values:
                raise SweepError(f"grid option {key!r} needs a non-empty list of values, got {values!r}")
            if key in sweep.overrides:
                raise SweepError(f"{key!r} is both in 'grid' and in 'overrides'; keep one")
            if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
                raise SweepError(f"grid option {key!r} repeats a value: {values}")
    else:
        if not sweep.runs:
            raise SweepError("'runs' is empty: list at least one override set")
        for index, spec in enumerate(sweep.runs):
            if spec.name is not None and not NAME_PATTERN.match(spec.name):
                raise SweepError(f"runs[{index}].name {spec.name!r} must be letters, digits, '.', '_' or '-'")
            for key in spec.overrides:
                check_override_key(key, f"runs[{index}].overrides")
            for config in spec.config:
                existing_file(config, f"runs[{index}].config")
    if sweep.executor == "local" and sweep.profile:
        raise SweepError("'profile' only applies to executor: submit")


def existing_file(path: str | Path, what: str) -> Path:
    """``path`` as given or from the repository root (how the stages read config files)."""
    try:
        return repo_file(path, what)
    except FileNotFoundError as error:
        raise SweepError(str(error)) from None


# -- names ------------------------------------------------------------------------------------


def format_value(value: Any) -> str:
    """A value as it appears in a run name: exact (repr of floats), filesystem-safe."""
    if isinstance(value, bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, (int, str)):
        text = str(value)
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    safe = re.sub(r"[^A-Za-z0-9.+_-]+", "-", text)
    # the dashes that stand for other characters go at the ends; a number's sign stays (1 and -1 differ)
    return (safe if text.startswith("-") else safe.lstrip("-")).rstrip("-") or "empty"


def run_name(
    sweep_name: str, varied: dict[str, Any], label: str | None = None, short: dict[str, str] | None = None
) -> str:
    short = short or short_keys(list(varied))
    if label:
        body = label
    elif varied:
        body = "__".join(f"{short[k]}={format_value(v)}" for k, v in varied.items())
    else:
        body = "base"
    name = f"{sweep_name}__{body}"
    if len(name) > MAX_RUN_NAME:
        # keep the readable start, and a hash of everything so two long names never meet
        name = name[: MAX_RUN_NAME - 10] + "-" + _digest(varied, label)
    return name


def _digest(varied: dict[str, Any], label: str | None) -> str:
    payload = json.dumps({"varied": varied, "label": label}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:9]


def expand(sweep: SweepConfig) -> list[SweepRun]:
    """The sweep's runs in a fixed order (grid: file order of keys and values; runs: list order)."""
    specs: list[tuple[dict[str, Any], list[str], str | None]] = []
    if sweep.grid is not None:
        keys = list(sweep.grid)
        for values in itertools.product(*(sweep.grid[k] for k in keys)):
            specs.append((dict(zip(keys, values)), [], None))
    else:
        for spec in sweep.runs or []:
            specs.append((dict(spec.overrides), list(spec.config), spec.name))
    all_keys = list(dict.fromkeys(k for varied, _, _ in specs for k in varied))
    short = short_keys(all_keys)
    runs: list[SweepRun] = []
    for varied, extra_configs, label in specs:
        name = run_name(sweep.name, varied, label, short)
        stage_run = StageRun(
            stage=sweep.stage,
            configs=[*sweep.config, *extra_configs],
            run=name,
            overrides={**sweep.overrides, **varied},
            entry=sweep.entry,
        )
        runs.append(SweepRun(stage_run=stage_run, varied=varied, label=label))
    names = [r.name for r in runs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SweepError(
            f"runs would share a name ({', '.join(duplicates)}): give list entries distinct 'name's "
            "or distinct overrides"
        )
    return runs


# -- resuming ---------------------------------------------------------------------------------


def check_finished(run: SweepRun) -> None:
    """A finished run is reused only if it ran with the values this sweep asks for.

    Names come from the values, so a mismatch means a renamed list entry or changed fixed
    overrides; reusing it silently would put another experiment's metrics in the table.
    """
    config_file = run.stage_run.run_dir / "config.yaml"
    if not config_file.is_file():
        return
    resolved = yaml.safe_load(config_file.read_text()) or {}
    for key, wanted in run.stage_run.overrides.items():
        found, value = lookup_option(resolved, key)
        if found and not _same(value, wanted):
            raise SweepError(
                f"{run.stage_run.run_dir} finished with {key}={value!r} but the sweep asks for "
                f"{wanted!r}; rename the run (sweep 'name' or the list entry's 'name') or delete that folder"
            )


def _debug_leftover(run: SweepRun) -> bool:
    """A finished fast_dev_run while this sweep asks for real training."""
    wanted = run.stage_run.overrides.get("trainer.fast_dev_run", False)
    if wanted not in (False, 0, "false", "False", "0"):
        return False
    manifest = json.loads((run.stage_run.run_dir / MANIFEST).read_text())
    return bool(manifest.get("fast_dev_run"))


def _same(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, str) and not isinstance(found, str):
        try:
            wanted = yaml.safe_load(wanted)
        except yaml.YAMLError:
            return False
    if (
        isinstance(found, (int, float))
        and isinstance(wanted, (int, float))
        and not isinstance(found, bool)
        and not isinstance(wanted, bool)
    ):
        return abs(float(found) - float(wanted)) <= 1e-12 * max(1.0, abs(float(wanted)))
    return found == wanted


# -- running ----------------------------------------------------------------------------------


@dataclass
class RunStatus:
    run: SweepRun
    status: Literal["existing", "finished", "failed", "submitted", "pending"]
    detail: str = ""


def run_sweep(
    sweep: SweepConfig,
    executor: str | None = None,
    profile: str | None = None,
    wait: bool = True,
    dry_run: bool = False,
    force: bool = False,
) -> list[RunStatus]:
    """Run (or submit) every run without a manifest, in order; returns one status per run."""
    runs = expand(sweep)
    executor = executor or sweep.executor
    statuses: list[RunStatus] = []
    todo: list[SweepRun] = []
    for run in runs:
        if run.stage_run.finished and _debug_leftover(run):
            # a fast_dev_run smoke test of this sweep left a manifest; it holds no real result
            run.stage_run.overwrite = True
            todo.append(run)
            statuses.append(RunStatus(run, "pending", "replaces a fast_dev_run"))
        elif run.stage_run.finished:
            check_finished(run)
            statuses.append(RunStatus(run, "existing", "manifest present, skipped"))
        else:
            todo.append(run)
            statuses.append(RunStatus(run, "pending"))
    print(
        f"sweep {sweep.name}: {len(runs)} runs of {sweep.stage}, {len(runs) - len(todo)} already "
        f"finished, {len(todo)} to {'submit' if executor == 'submit' else 'run'}",
        flush=True,
    )
    by_name = {s.run.name: s for s in statuses}
    if dry_run:
        for run in todo:
            print("  " + run.stage_run.shell())
        return statuses
    if executor == "submit":
        _submit_all(todo, by_name, profile or sweep.profile, wait, sweep.name, force)
    else:
        for index, run in enumerate(todo, 1):
            print(f"[{index}/{len(todo)}] {run.name}", flush=True)
            code = subprocess.run(run.stage_run.argv(), cwd=REPO_ROOT, check=False).returncode
            status = by_name[run.name]
            if code == 0 and run.stage_run.finished:
                status.status, status.detail = "finished", ""
            else:
                # keep going: one diverging configuration must not cost the rest of the sweep
                status.status, status.detail = "failed", f"exit status {code}" if code else "no manifest written"
    return statuses


def _submit_all(
    todo: list[SweepRun],
    by_name: dict[str, RunStatus],
    profile_path: str | None,
    wait: bool,
    sweep_name: str,
    force: bool = False,
) -> None:
    from cluster.profile import load_profile
    from cluster.submit import SubmitError, submit, submit_array
    from leanloop.paths import artifacts_root

    profile = load_profile(profile_path)
    waiting = []
    # on SLURM the runs go as one job array (one scheduler entry, one scancel); logs in the sweep's folder
    try:
        array = (
            submit_array(
                [run.stage_run for run in todo],
                profile,
                artifacts_root() / "sweeps" / sweep_name / "slurm",
                f"sweep-{sweep_name}",
                force,
            )
            if len(todo) > 1
            else None
        )
    except RuntimeError as error:  # SubmitError, or sbatch refusing the array
        for run in todo:
            by_name[run.name].status, by_name[run.name].detail = "failed", f"not submitted: {error}"
        print(f"  sweep {sweep_name}: array not submitted: {error}", file=sys.stderr, flush=True)
        return
    for run, submission in zip(todo, array or []):
        by_name[run.name].status = "submitted"
        by_name[run.name].detail = f"slurm array job {submission.job_ids[0]}"
        print(f"  submitted {run.name}: {by_name[run.name].detail}", flush=True)
        waiting.append((run, submission))
    for run in todo if array is None else []:
        try:
            submission = submit(run.stage_run, profile, force=force)
        except RuntimeError as error:  # SubmitError, or sbatch refusing the job
            by_name[run.name].status, by_name[run.name].detail = "failed", f"not submitted: {error}"
            print(f"  {run.name}: not submitted: {error}", file=sys.stderr, flush=True)
            continue
        by_name[run.name].status = "submitted"
        by_name[run.name].detail = f"{submission.executor} job {', '.join(submission.job_ids)}"
        print(f"  submitted {run.name}: {by_name[run.name].detail}", flush=True)
        if submission.executor != "slurm":
            # no scheduler queues local jobs: one at a time, or N trainings share this machine
            _collect(run, submission, by_name[run.name], SubmitError)
        else:
            waiting.append((run, submission))
    for run, submission in waiting if wait else []:
        _collect(run, submission, by_name[run.name], SubmitError)


def _collect(run: SweepRun, submission: Any, status: RunStatus, submit_error: type) -> None:
    try:
        submission.wait()
    except submit_error as error:
        status.status, status.detail = "failed", str(error).splitlines()[-1].strip()
        return
    if run.stage_run.finished:
        status.status, status.detail = "finished", ""
    else:
        status.status, status.detail = "failed", "job ended without a manifest"


@dataclass
class SweepOptions:
    """The command line of ``python -m cluster.sweep``."""

    sweep: str
    """Sweep file, e.g. configs/sweeps/pretrain_lr.yaml."""
    executor: Literal["local", "submit"] | None = None
    """Override the sweep file's executor."""
    profile: str | None = None
    """Cluster profile for ``--executor submit``."""
    wait: bool = True
    """With submit: wait for the jobs, then summarize (false: submit and return)."""
    dry_run: bool = False
    """List the runs and their commands only."""
    summary_only: bool = False
    """Run nothing; summarize the runs that have finished."""
    force: bool = False
    """With submit: submit GPU runs whose memory plan exceeds the profile's gpu_memory_gb."""


def main(argv: list[str] | None = None) -> int:
    from cluster.sweep_report import summarize

    from cluster.profile import ProfileError

    from leanloop.tool import parse_config

    args, _ = parse_config(SweepOptions, argv, prog="python -m cluster.sweep", description=__doc__.splitlines()[0])
    try:
        sweep = load_sweep(args.sweep)
        if args.profile and (args.executor or sweep.executor) != "submit":
            raise SweepError("--profile only applies with --executor submit")
        if args.summary_only:
            statuses = [RunStatus(r, "existing" if r.stage_run.finished else "pending") for r in expand(sweep)]
        else:
            statuses = run_sweep(
                sweep,
                executor=args.executor,
                profile=args.profile,
                wait=args.wait,
                dry_run=args.dry_run,
                force=args.force,
            )
    except (SweepError, CommandError, ProfileError) as error:
        print(f"sweep: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        return 0
    summary = summarize(sweep, statuses)
    print(summary.table)
    print(f"summary: {summary.csv_path}" + (f", plot: {summary.plot_path}" if summary.plot_path else ""))
    return failure_status(statuses)


def failure_status(statuses: list[RunStatus], prefix: str = "", noun: str = "run") -> int:
    """Exit status of a finished sweep: 1 (naming the failed runs on stderr) if any run failed."""
    failed = [s.run.name for s in statuses if s.status == "failed"]
    if failed:
        print(f"{prefix}{len(failed)} {noun}(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m cluster.sweep"))
