"""The flywheel driver chains rounds through named runs: round r samples from round r's prover,
labels the samples of rounds 1..r, and round r+1 trains on round r's corpus."""

from __future__ import annotations

import yaml

from leanloop.paths import REPO_ROOT
from sft.config import FlywheelConfig
from sft.flywheel import plan


def _option(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def test_rounds_chain_through_named_runs(artifacts):
    config = FlywheelConfig(rounds=3, sft_args=["--trainer.max_steps", "2"])
    steps = plan(config).steps
    assert [(s.stage, s.round) for s in steps] == [(stage, r) for r in (1, 2, 3) for stage in ("sft", "sample", "data")]
    base = yaml.safe_load((REPO_ROOT / config.sft_config).read_text())["data"]["corpus"]
    base_data = yaml.safe_load((REPO_ROOT / config.data_config).read_text())
    for r in (1, 2, 3):
        sft, sample, data = [s for s in steps if s.round == r]
        assert sft.command[1:3] == ["-m", "sft.train"] and _option(sft.command, "--run") == f"round-{r}"
        corpus = base if r == 1 else f"artifacts://data/round-{r - 1}"
        assert _option(sft.command, "--data.corpus") == corpus
        assert sft.command[-2:] == ["--trainer.max_steps", "2"]
        assert _option(sample.command, "--model.name") == f"artifacts://sft/round-{r}"
        assert _option(sample.command, "--statements.corpus") == corpus
        assert data.data_config["run"] == f"round-{r}"
        sources = data.data_config["sources"]
        assert sources[: len(base_data["sources"])] == base_data["sources"]
        samples = [s["path"] for s in sources[len(base_data["sources"]) :]]
        assert samples == [
            str(artifacts / "sft_sample" / f"round-{s}" / "final" / "candidates.jsonl") for s in range(1, r + 1)
        ]
        assert _option(data.command, "--config") == str(data.config_path)


def test_continue_from_previous_round(artifacts):
    steps = plan(FlywheelConfig(rounds=2, continue_from_previous=True)).steps
    second = next(s for s in steps if s.stage == "sft" and s.round == 2)
    assert _option(second.command, "--model.base.name") == "artifacts://sft/round-1"
