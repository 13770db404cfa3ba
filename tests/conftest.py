"""Test-wide settings: offline, real shared data, and the ``lean`` marker."""

from __future__ import annotations

import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `pytest -n N` runs N workers: give each its share of the cores, or their torch thread pools
# oversubscribe the CPU and every worker slows down (subprocesses inherit OMP_NUM_THREADS).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    import torch

    torch.set_num_threads(_share)

import pytest  # noqa: E402

from leanloop.paths import shared_data_dir  # noqa: E402


def lean_toolchain_available() -> bool:
    return bool(os.environ.get("LEANLOOP_LEAN_PROJECT") or shutil.which("lake"))


def pytest_collection_modifyitems(config, items):
    if lean_toolchain_available():
        return
    skip = pytest.mark.skip(reason="no Lean toolchain (set LEANLOOP_LEAN_PROJECT or put lake on PATH)")
    for item in items:
        if item.get_closest_marker("lean"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_data():
    """The real recorded Lean data folder (../shared/data)."""
    return shared_data_dir()


@pytest.fixture
def artifacts(tmp_path, monkeypatch):
    """An isolated artifacts root for one test."""
    root = tmp_path / "artifacts"
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    return root


@pytest.fixture(scope="session")
def debug_corpus(tmp_path_factory):
    """configs/data/debug.yaml built for real (replay backend): 300 RL-Lean rows + 10 Kimina proofs."""
    from data.build import build, parse_config
    from leanloop.paths import REPO_ROOT

    root = tmp_path_factory.mktemp("corpus_artifacts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root))
        build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    return root / "data" / "debug"
