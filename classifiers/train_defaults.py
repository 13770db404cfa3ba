"""``python -m classifiers.train_defaults [--config A.yaml --config B.yaml] [--run NAME] [overrides...]`` (``make classifiers``)

Each ``--config`` is a run of its own (default: the two default verdict classifiers,
``configs/classifiers/encoder_default.yaml`` and ``onetoken_default.yaml``); they are independent
runs, so they train side by side, one process and one CPU thread each (the 2-core budget: ~10 minutes for both instead of ~20). Each process's output goes to
``artifacts/classifiers/<run>.log`` (``tail -f`` it for progress); a failed run's log tail is printed.
When all finished, one report beside the majority and TF-IDF baselines is written to
``artifacts/classifiers/<run>_default_report`` (:mod:`classifiers.combined_report`). ``--run NAME``
prefixes the runs' names (``NAME_encoder_default``, ...). Extra arguments are dotted overrides passed
to every run (``--trainer.max_steps 10``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from leanloop.paths import REPO_ROOT, artifacts_root

DEFAULTS = (
    REPO_ROOT / "configs/classifiers/encoder_default.yaml",
    REPO_ROOT / "configs/classifiers/onetoken_default.yaml",
)
REPORT = "default_report"
SUMMARY_PREFIX = "[classifiers] "


def run_names(prefix: str | None, configs: list[Path] | tuple[Path, ...] = DEFAULTS) -> tuple[list[str], str]:
    """The runs (one per config) and the report's run: ``<prefix>_<config stem>``."""
    tag = f"{prefix}_" if prefix else ""
    return [tag + Path(config).stem for config in configs], tag + REPORT


def train_side_by_side(
    prefix: str | None, overrides: list[str], logs: Path, configs: list[Path] | tuple[Path, ...] = DEFAULTS
) -> list[str]:
    """Start every run, wait for all; returns the failed runs' names (their log tails printed)."""
    logs.mkdir(parents=True, exist_ok=True)
    runs, _ = run_names(prefix, configs)
    print(f"[classifiers] training {' and '.join(runs)} side by side (progress: tail -f {logs}/<run>.log)", flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    processes = {}
    for config, run in zip(configs, runs):
        with open(logs / f"{run}.log", "w") as log:
            processes[run] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "classifiers.train",
                    "--config",
                    str(config),
                    *(["--run", run] if prefix else []),
                    *overrides,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO_ROOT,
            )
    failed = [run for run, process in processes.items() if process.wait() != 0]
    for run in failed:
        tail = (logs / f"{run}.log").read_text(errors="replace").splitlines()[-30:]
        print(f"[classifiers] {run} FAILED; end of {logs}/{run}.log:", *tail, sep="\n", file=sys.stderr)
    for run in runs:  # each run's own summary lines
        for line in (logs / f"{run}.log").read_text(errors="replace").splitlines():
            if SUMMARY_PREFIX in line:
                print(line[line.index(SUMMARY_PREFIX) :])
    return failed


@dataclass
class TrainDefaultsConfig:
    """``python -m classifiers.train_defaults`` options; each ``--config`` is a classifier config, a run
    of its own (default: the two default configs), and any other option an override for every run."""

    run: str | None = None
    """Name the runs <run>_encoder_default, ... (default: the configs' stems)."""


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_stage_tool

    args, given, overrides = parse_stage_tool(
        TrainDefaultsConfig, argv, prog="python -m classifiers.train_defaults", description=__doc__.splitlines()[0]
    )
    configs = tuple(Path(c) for c in given) if given else DEFAULTS
    missing = [str(c) for c in configs if not Path(c).is_file()]
    if missing:
        raise SystemExit(f"python -m classifiers.train_defaults: config file not found: {', '.join(missing)}")
    if train_side_by_side(args.run, overrides, artifacts_root() / "classifiers", configs):
        return 1
    from classifiers.combined_report import ReportConfig, main as report

    runs, out = run_names(args.run, configs)
    report(ReportConfig(runs=[f"artifacts://classifiers/{run}" for run in runs], out=f"artifacts://classifiers/{out}"))
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m classifiers.train_defaults"))
