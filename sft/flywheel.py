"""The data flywheel: sft -> sample -> data -> sft, for ``rounds`` rounds.

python -m sft.flywheel --config configs/sft/flywheel/default.yaml --rounds 2     (make sft-flywheel ROUNDS=2)
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from leanloop.artifacts import Manifest, run_dir
from leanloop.paths import REPO_ROOT, artifacts_root
from leanloop.tool import parse_config
from sft.config import FlywheelConfig, SampleConfig
from sft.sample import CANDIDATES

STAGE = "sft_flywheel"


@dataclass
class Step:
    stage: str  # sft / sample / data
    round: int
    run: str
    command: list[str]
    data_config: dict | None = None  # the generated data config (data steps)
    config_path: Path | None = None


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    folder: Path = Path()


def _path(path: str) -> Path:
    """Config paths are relative to the repository (where make runs the entry points)."""
    return Path(path) if Path(path).is_absolute() else REPO_ROOT / path


def _read_yaml(path: str) -> dict:
    return yaml.safe_load(_path(path).read_text()) or {}


def plan(config: FlywheelConfig) -> Plan:
    """The commands of every round, in order, and the data configs they need."""
    if config.rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {config.rounds}")
    folder = run_dir(STAGE, config.prefix)
    python = sys.executable
    sample_config, _ = parse_config(SampleConfig, ["--config", str(_path(config.sample_config))], "sft.sample", "")
    filters_by_corpus = bool(sample_config.statements.corpus_splits)
    base_data = _read_yaml(config.data_config)
    corpus = (_read_yaml(config.sft_config).get("data") or {}).get("corpus")
    if corpus is None:
        raise ValueError(f"{config.sft_config} names no data.corpus: round 1 needs a corpus to train on")
    steps: list[Step] = []
    sample_files: list[str] = []
    for r in range(1, config.rounds + 1):
        run = f"{config.prefix}-{r}"
        if r > 1:
            corpus = f"artifacts://data/{config.prefix}-{r - 1}"
        sft = [python, "-m", "sft.train", "--config", config.sft_config, "--run", run, "--data.corpus", corpus]
        if config.continue_from_previous and r > 1:
            sft += ["--model.base.name", f"artifacts://sft/{config.prefix}-{r - 1}"]
        steps.append(Step("sft", r, run, sft + list(config.sft_args)))
        sample = [
            python,
            "-m",
            "sft.sample",
            "--config",
            config.sample_config,
            "--run",
            run,
            "--model.name",
            f"artifacts://sft/{run}",
        ]
        if filters_by_corpus:
            sample += ["--statements.corpus", corpus]
        steps.append(Step("sample", r, run, sample + list(config.sample_args)))
        sample_files.append(str(artifacts_root() / "sft_sample" / run / "final" / CANDIDATES))
        data = dict(base_data)
        data["run"] = run
        data["sources"] = list(base_data.get("sources", [])) + [
            {
                "name": f"{config.prefix}-{s}-samples",
                "path": path,
                "program_field": "program",
                "prover_field": "prover",
                "origin_field": "source",
            }
            for s, path in enumerate(sample_files, 1)
        ]
        path = folder / f"data-{run}.yaml"
        steps.append(
            Step(
                "data", r, run, [python, "-m", "data.build", "--config", str(path)], data_config=data, config_path=path
            )
        )
    return Plan(steps, folder)


def run(config: FlywheelConfig) -> Path:
    flywheel = plan(config)
    flywheel.folder.mkdir(parents=True, exist_ok=True)
    for step in flywheel.steps:
        if step.data_config is not None:
            step.config_path.write_text(yaml.safe_dump(step.data_config, sort_keys=False, allow_unicode=True))
        print(f"[flywheel] round {step.round} {step.stage}: {' '.join(step.command[1:])}", file=sys.stderr, flush=True)
        result = subprocess.run(step.command, cwd=REPO_ROOT)
        if result.returncode != 0:
            raise SystemExit(
                f"[flywheel] round {step.round} {step.stage} failed (exit "
                f"{result.returncode}); fix it and rerun: finished steps are skipped "
                "or resumed"
            )
    manifest = Manifest(stage=STAGE, run=config.prefix, extra={"rounds": config.rounds})
    for step in flywheel.steps:
        manifest.add_input(f"{step.stage}:{step.run}", artifacts_root() / step.stage / step.run)
    manifest.write(flywheel.folder)
    return flywheel.folder


def main(argv: list[str] | None = None) -> int:
    config, _ = parse_config(FlywheelConfig, argv, "sft.flywheel", __doc__.splitlines()[0])
    print(f"[flywheel] done: {run(config)}")
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m sft.flywheel"))
