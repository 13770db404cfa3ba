"""Fixtures of the classifiers tests: tiny classifiers trained once (fast_dev_run) on real programs."""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DEBUG_CONFIGS = {"encoder": "debug.yaml", "onetoken": "debug_onetoken.yaml"}


@dataclass
class TrainedRun:
    """A finished debug run as the tests read it back from disk."""

    run_dir: Path
    manifest: dict[str, Any]
    corpus: Any  # classifiers.examples.Corpus the run trained and was scored on


def _read_run(run_dir: Path) -> TrainedRun:
    import yaml

    from classifiers.examples import JsonlCorpus, load_jsonl_corpus

    data = yaml.safe_load((run_dir / "config.yaml").read_text())["data"]
    corpus = load_jsonl_corpus(JsonlCorpus(**data["jsonl"]), data["max_rows_per_split"])
    return TrainedRun(run_dir, json.loads((run_dir / "manifest.json").read_text()), corpus)


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """configs/classifiers/debug.yaml and debug_onetoken.yaml run with fast_dev_run in one isolated
    artifacts root: {"root": Path, "encoder": TrainedRun, "onetoken": TrainedRun}.

    Trained ONCE per test session: under pytest-xdist every worker has its own session, so the
    first worker trains in the workers' common temp folder (under a file lock) and the others
    read the finished runs from there instead of training the same thing again.
    """
    from classifiers.train import run
    from leanloop.paths import REPO_ROOT

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base
    root = shared / "classifier_artifacts"
    done = root / "trained.json"
    with open(shared / "classifier_artifacts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.is_file():
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("LEANLOOP_ARTIFACTS", str(root))
                dirs = {}
                for kind, config in DEBUG_CONFIGS.items():
                    result = run(["--config", str(REPO_ROOT / "configs/classifiers" / config),
                                  "--trainer.fast_dev_run", "true", "--log.csv", "false"])
                    dirs[kind] = str(result.run_dir)
            done.write_text(json.dumps(dirs))
    dirs = json.loads(done.read_text())
    return {"root": root, **{kind: _read_run(Path(path)) for kind, path in dirs.items()}}


@pytest.fixture(scope="session")
def real_programs(shared_data):
    """(name, program, recorded pass) of the first shipped RL-Lean candidates (real prover output)."""
    import gzip

    path = shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(400), handle)]
    return [(r["name"], r["code"], bool(r["verdict_pass"])) for r in rows]
