"""Every prm tool config parses against its dataclass, with what it writes surviving; debug_grpo.yaml
(the GRPO phase, which the generic debug test does not run) trains with fast_dev_run."""

from __future__ import annotations

import json

import pytest
import yaml

from leanloop.paths import REPO_ROOT
from leanloop.tool import parse_config
from prm.config import EvalConfig, GenerateConfig, LabelConfig

TOOLS = {"label": LabelConfig, "generate": GenerateConfig, "eval": EvalConfig}
FILES = [(tool, path) for tool in TOOLS for path in sorted((REPO_ROOT / "configs" / "prm" / tool).glob("*.yaml"))]


def _survives(written, resolved, where):
    if isinstance(written, dict):
        for key, value in written.items():
            if value is None:  # the dump leaves nulls out
                assert resolved.get(key) is None, f"{where}.{key} is not null"
                continue
            assert key in resolved, f"{where}.{key} missing"
            _survives(value, resolved[key], f"{where}.{key}")
    else:
        assert written == resolved, f"{where}: wrote {written!r}, resolved {resolved!r}"


@pytest.mark.parametrize("tool,path", FILES, ids=[f"{t}/{p.name}" for t, p in FILES])
def test_tool_config_parses(tool, path):
    config, resolved = parse_config(TOOLS[tool], ["--config", str(path)])
    assert isinstance(config, TOOLS[tool])
    written = yaml.safe_load(path.read_text())
    _survives(written, yaml.safe_load(resolved), path.name)
    for key, value in written.items():
        if value is None:
            assert getattr(config, key) is None, f"{path.name}: {key} must stay null"


def test_every_tool_folder_has_a_default():
    assert {t for t, p in FILES if p.name == "default.yaml"} == set(TOOLS)


def test_debug_grpo_fast_dev_run(artifacts):
    from prm.train import run

    result = run(["--config", str(REPO_ROOT / "configs/prm/debug_grpo.yaml"), "--trainer.fast_dev_run", "true"])
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["model"]["mode"] == "grpo" and "reward/exact" in manifest["metrics"]
    assert (result.run_dir / "final" / "config.json").is_file()
