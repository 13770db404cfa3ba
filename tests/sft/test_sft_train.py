"""The sft entry points: configs/sft/debug.yaml trains with fast_dev_run and exports a prover that the
sampler loads by its manifest; every configs/sft YAML parses against its entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanloop.artifacts import describe_input
from leanloop.paths import REPO_ROOT
from leanloop.training.models import ModelSpec
from sft.config import EvaluateConfig, FlywheelConfig, SampleConfig, StatementsConfig, parse_config
from sft.generation import SamplingConfig
from sft.prompt import PromptConfig
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
    config = SampleConfig(model=prover, run="from-sft",
                          statements=StatementsConfig(limit=1),
                          sampling=SamplingConfig(k=1, max_new_tokens=2))
    target = sample(config)
    row = json.loads(target.read_text().splitlines()[0])
    identity = describe_input(result.run_dir)
    assert row["prover"] == f"{identity['path']}@{identity['hash']}"  # path + manifest hash
    # a prompt format other than the trained one is refused
    config.prompt, config.run = PromptConfig(style="chat"), "mismatch"
    with pytest.raises(ValueError, match="differs from the one"):
        sample(config)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_sft_config_parses(path: Path, capsys):
    if path.name.startswith("sample"):
        config, _ = parse_config(SampleConfig, ["--config", str(path)], "sft.sample", "")
        assert config.sampling.k >= 1
    elif path.name.startswith("evaluate"):
        config, _ = parse_config(EvaluateConfig, ["--config", str(path)], "sft.evaluate", "")
        assert config.verifier.profile == "rl"
    elif path.name.startswith("flywheel"):
        config, _ = parse_config(FlywheelConfig, ["--config", str(path)], "sft.flywheel", "")
        assert (REPO_ROOT / config.sft_config).is_file()
    else:  # a training config: LightningCLI parses it against the module and datamodule
        with pytest.raises(SystemExit) as done:
            train(["--config", str(path), "--print_config"])
        assert done.value.code in (0, None)
        assert "prompt:" in capsys.readouterr().out
