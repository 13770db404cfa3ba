"""``python -m data.build`` follows leanloop.tool's rule: a finished run of the same config is skipped,
another config is refused unless ``--overwrite true``, and the manifest is written last."""

from __future__ import annotations

import json

import pytest

from data.build import main
from leanloop.paths import REPO_ROOT
from leanloop.tool import RunExistsError

DEBUG = str(REPO_ROOT / "configs/data/debug.yaml")


def test_rerun_skips_other_config_is_refused_overwrite_rebuilds(artifacts, capsys):
    assert main(["--config", DEBUG, "--run", "cli"]) == 0
    run = artifacts / "data" / "cli"
    corpus = run / "final" / "corpus.parquet"
    built = (corpus.stat().st_mtime_ns, json.loads((run / "manifest.json").read_text())["created"])
    capsys.readouterr()

    assert main(["--config", DEBUG, "--run", "cli"]) == 0
    assert "already finished with this config" in capsys.readouterr().err
    assert corpus.stat().st_mtime_ns == built[0]  # nothing rewritten

    with pytest.raises(RunExistsError, match="different config"):
        main(["--config", DEBUG, "--run", "cli", "--lean.timeout", "30"])
    assert (run / "manifest.json").is_file() and corpus.stat().st_mtime_ns == built[0]  # the old run stands

    assert main(["--config", DEBUG, "--run", "cli", "--lean.timeout", "30", "--overwrite", "true"]) == 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["lean"]["timeout"] == 30.0 and "timeout: 30.0" in (run / "config.yaml").read_text()
