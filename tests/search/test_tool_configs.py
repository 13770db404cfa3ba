"""Every non-training YAML of the search stage parses into its tool's typed config (the training
configs under configs/search/*.yaml are parsed by tests/leanloop/test_training_configs.py)."""

from __future__ import annotations

import pytest
import yaml

from leanloop.paths import REPO_ROOT
from leanloop.tool import parse_config
from search.build_data import SearchDataConfig
from search.evaluate import SearchEvalConfig
from search.expert_iteration import ExpertIterationConfig

TOOLS = {"eval": SearchEvalConfig, "expert_iteration": ExpertIterationConfig}
CONFIGS = [
    (TOOLS[p.parent.name], p)
    for folder in TOOLS
    for p in sorted((REPO_ROOT / "configs/search" / folder).glob("*.yaml"))
]
CONFIGS += [(SearchDataConfig, p) for p in sorted((REPO_ROOT / "configs/search/data").glob("*.yaml"))]


@pytest.mark.parametrize("cls,path", CONFIGS, ids=[str(p.relative_to(REPO_ROOT)) for _, p in CONFIGS])
def test_tool_config_parses(cls, path):
    config, resolved = parse_config(cls, ["--config", str(path)])
    written = yaml.safe_load(path.read_text())
    _same(written, config, path.name)
    assert len(CONFIGS) >= 5


def _same(written, parsed, where):
    """Every written value as written; a typed section (a dataclass) field by field, recursively."""
    if isinstance(written, dict):
        for key, value in written.items():
            _same(value, getattr(parsed, key), f"{where}: {key}")
    else:
        assert parsed == written, where


def test_unknown_key_is_rejected(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("budgets: [1]\nsimulation: 3\n")
    with pytest.raises(SystemExit):
        parse_config(SearchEvalConfig, ["--config", str(bad)])
