"""Fixtures of the classifiers tests: tiny classifiers trained once (fast_dev_run) on real programs."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """configs/classifiers/debug.yaml and debug_onetoken.yaml run with fast_dev_run in one isolated
    artifacts root: {"root": Path, "encoder": StageResult, "onetoken": StageResult}."""
    from classifiers.train import run
    from leanloop.paths import REPO_ROOT

    root = tmp_path_factory.mktemp("classifier_artifacts")
    results = {"root": root}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root))
        for kind, config in (("encoder", "debug.yaml"), ("onetoken", "debug_onetoken.yaml")):
            results[kind] = run(["--config", str(REPO_ROOT / "configs/classifiers" / config),
                                 "--trainer.fast_dev_run", "true", "--log.csv", "false"])
    return results


@pytest.fixture(scope="session")
def real_programs(shared_data):
    """(name, program, recorded pass) of the first shipped RL-Lean candidates (real prover output)."""
    import gzip
    import json

    path = shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(400), handle)]
    return [(r["name"], r["code"], bool(r["verdict_pass"])) for r in rows]
