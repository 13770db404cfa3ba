"""Every stage config parses against its stage's signature, and every stage's debug.yaml trains.

Generic over stages: a folder configs/<stage>/ whose <stage>/train.py exists is a Lightning stage;
its train.py exposes ``run(args)`` (leanloop.training.cli.run_stage). configs/data (not Lightning),
configs/sweeps and configs/strategy (cluster tooling) are tested by their owners; YAMLs in
subfolders (e.g. configs/pretrain/corpus/) belong to other tools and are tested with them.
"""

from __future__ import annotations

import importlib
import json
import re

import pytest
import yaml

from leanloop.paths import REPO_ROOT

NOT_LIGHTNING = {"data", "sweeps", "strategy"}


def _stages() -> list[str]:
    return sorted(p.name for p in (REPO_ROOT / "configs").iterdir()
                  if p.is_dir() and p.name not in NOT_LIGHTNING and (REPO_ROOT / p.name / "train.py").is_file())


def _stage_run(stage: str):
    module = importlib.import_module(f"{stage}.train")
    if not callable(getattr(module, "run", None)):
        pytest.fail(f"{stage}/train.py must expose run(args) calling leanloop.training.cli.run_stage")
    return module.run


STAGE_CONFIGS = [(stage, path) for stage in _stages()
                 for path in sorted((REPO_ROOT / "configs" / stage).glob("*.yaml"))]
DEBUG_CONFIGS = [stage for stage in _stages() if (REPO_ROOT / "configs" / stage / "debug.yaml").is_file()]


def test_pretrain_is_discovered():
    # guards the discovery itself: if it found nothing, the parametrized tests would silently vanish
    assert ("pretrain", REPO_ROOT / "configs/pretrain/qwen3_8b.yaml") in STAGE_CONFIGS
    assert "pretrain" in DEBUG_CONFIGS


@pytest.mark.parametrize("stage,path", STAGE_CONFIGS,
                         ids=[f"{s}/{p.name}" for s, p in STAGE_CONFIGS])
def test_config_parses_against_stage_signature(stage, path, artifacts, capsys):
    result = _stage_run(stage)(["--config", str(path), "--dry_run", "true"])
    resolved = yaml.safe_load(result.config)
    # what the file sets survives into the resolved config (nothing ignored)
    written = yaml.safe_load(path.read_text()) or {}
    for section in ("model", "data", "trainer"):
        for key, value in (written.get(section) or {}).items():
            if not isinstance(value, dict):
                assert resolved[section][key] == value, f"{path}: {section}.{key}"
    assert resolved["run"] == path.stem
    assert not artifacts.exists()  # a dry run writes nothing


def test_unknown_key_is_rejected(artifacts, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  learning_rate: 0.1\n")
    with pytest.raises(SystemExit):
        _stage_run("pretrain")(["--config", str(REPO_ROOT / "configs/pretrain/debug.yaml"),
                                "--config", str(bad), "--dry_run", "true"])


def test_layered_configs_and_overrides(artifacts, tmp_path):
    layer = tmp_path / "layer.yaml"
    layer.write_text("data:\n  max_length: 64\ntrainer:\n  max_steps: 2\n")
    result = _stage_run("pretrain")([
        "--config", str(REPO_ROOT / "configs/pretrain/debug.yaml"), "--config", str(layer),
        "--model.optim.lr", "0.5", "--dry_run", "true"])
    resolved = yaml.safe_load(result.config)
    assert resolved["data"]["max_length"] == 64  # later file wins
    assert resolved["data"]["batch_size"] == 2  # earlier file kept where not overridden
    assert resolved["model"]["optim"]["lr"] == 0.5  # dotted override wins over both
    assert resolved["run"] == "debug+layer"
    assert resolved["data"]["base"]["name"] == "qwen3-tiny"  # linked from model.base


UPSTREAM = re.compile(r"artifacts://([A-Za-z_]+)/([\w.+=-]+)")


def _build_upstream(config_path, built: set) -> None:
    """Build the artifacts a debug config names (``artifacts://<stage>/<run>``) from
    configs/<stage>/<run>.yaml first, the way make chains stages: data with data.build, a training
    stage with fast_dev_run (recursively)."""
    for stage, run in UPSTREAM.findall(config_path.read_text()):
        if (stage, run) in built:
            continue
        built.add((stage, run))
        upstream = REPO_ROOT / "configs" / stage / f"{run}.yaml"
        if not upstream.is_file():
            pytest.fail(f"{config_path} names artifacts://{stage}/{run} but {upstream} does not exist")
        _build_upstream(upstream, built)
        if stage == "data":
            from data.build import build, parse_config

            build(parse_config(["--config", str(upstream)]), progress=False)
        else:
            _stage_run(stage)(["--config", str(upstream), "--trainer.fast_dev_run", "true"])


@pytest.mark.parametrize("stage", DEBUG_CONFIGS)
def test_debug_config_fast_dev_run(stage, artifacts):
    _build_upstream(REPO_ROOT / "configs" / stage / "debug.yaml", set())
    result = _stage_run(stage)(["--config", str(REPO_ROOT / "configs" / stage / "debug.yaml"),
                                "--trainer.fast_dev_run", "true"])
    assert result.run_dir == artifacts / stage / "debug"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["stage"] == stage and manifest["fast_dev_run"] is True
    assert (result.run_dir / "config.yaml").is_file()
    if "model" in manifest:  # a model run exports Hugging Face files that from_pretrained reads
        assert (result.run_dir / "final" / "config.json").is_file()
