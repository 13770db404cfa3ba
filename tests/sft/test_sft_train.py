"""The sft entry points: configs/sft/debug.yaml trains with fast_dev_run and exports a prover that the
sampler loads by its manifest; every configs/sft YAML parses against its entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from leanloop.artifacts import describe_input
from leanloop.paths import REPO_ROOT
from leanloop.training.models import ModelSpec
from leanloop.tool import parse_config
from sft.config import EvaluateConfig, FlywheelConfig, SampleConfig, StatementsConfig
from leanloop.prover.generation import SamplingConfig
from leanloop.prover.prompt import PromptConfig
from sft.sample import run as sample
from sft.train import run as train

CONFIGS = REPO_ROOT / "configs" / "sft"


def test_debug_config_trains_exports_and_samples(artifacts):
    result = train(["--config", str(CONFIGS / "debug.yaml"), "--trainer.fast_dev_run", "true"])
    manifest = result.manifest
    assert manifest["stage"] == "sft" and manifest["fast_dev_run"] is True
    assert manifest["model"]["prompt"]["style"] == "raw"
    assert manifest["counts"]["train_examples"] == 8 and manifest["counts"]["train_theorems"]
    assert (result.run_dir / "final" / "config.json").is_file()

    prover = ModelSpec(name="artifacts://sft/debug")
    config = SampleConfig(
        model=prover,
        run="from-sft",
        statements=StatementsConfig(limit=1),
        sampling=SamplingConfig(k=1, max_new_tokens=2),
    )
    target = sample(config)
    row = json.loads(target.read_text().splitlines()[0])
    identity = describe_input(result.run_dir)
    assert row["prover"] == f"{identity['path']}@{identity['hash']}"  # path + manifest hash
    # a prompt format other than the trained one is refused
    config.prompt, config.run = PromptConfig(style="chat"), "mismatch"
    with pytest.raises(ValueError, match="differs from the one"):
        sample(config)


def _assert_kept(written: dict, resolved: dict, where: str) -> None:
    """Every value the file sets survives into the resolved config (nothing silently ignored)."""
    for key, value in written.items():
        if isinstance(value, dict) and value:
            _assert_kept(value, resolved[key], f"{where}:{key}")
        else:
            assert resolved[key] == value, f"{where}:{key}"


TOOLS = {"sample": SampleConfig, "eval": EvaluateConfig, "flywheel": FlywheelConfig}


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_tool_config_parses(path: Path):
    """configs/sft/<tool>/*.yaml against the tool's dataclass (the training YAMLs beside them are
    parsed by tests/leanloop/test_training_configs.py)."""
    config, resolved = parse_config(TOOLS[path.parent.name], ["--config", str(path)], "sft", "")
    _assert_kept(yaml.safe_load(path.read_text()), yaml.safe_load(resolved), path.name)
    if isinstance(config, FlywheelConfig):
        assert (REPO_ROOT / config.sft_config).is_file() and (REPO_ROOT / config.sample_config).is_file()
