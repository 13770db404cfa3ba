"""Fixtures of the feedback-model tests: the real debug corpus and tiny saved models.

The corpus and the saved models are built once per test run and shared by the xdist workers (under
a file lock): each costs seconds of CPU, and every worker would otherwise build its own copy.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory) -> Path:
    """A folder all workers of this run see (xdist gives each worker its own basetemp below it)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "feedback_model_shared"
    root.mkdir(exist_ok=True)
    return root


@contextmanager
def built_once(folder: Path):
    """Yields True to the one worker that must build ``folder`` (the others wait for it, then get
    False); a ``.done`` marker says the build finished."""
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = folder / ".done"
            if done.is_file():
                yield False
                return
            folder.mkdir(parents=True, exist_ok=True)
            yield True
            done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def feedback_corpus(shared_root):
    """configs/data/debug.yaml built for real (replay backend over the recorded RL-Lean answers);
    returns the artifacts root holding data/debug."""
    root = shared_root / "artifacts"
    with built_once(root) as build_here:
        if build_here:
            from data.build import build, parse_config
            from leanloop.paths import REPO_ROOT

            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("LEANLOOP_ARTIFACTS", str(root))
                build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    return root


@pytest.fixture(scope="session")
def corpus_rows(feedback_corpus):
    from feedback_model.pairs import read_corpus

    return read_corpus(feedback_corpus / "data" / "debug")


@pytest.fixture(scope="session")
def qwen_tokenizer():
    from leanloop.training.models import ModelSpec, load_tokenizer

    return load_tokenizer(ModelSpec("qwen3-tiny"))


def tiny_qwen(seed: int):
    import torch

    from leanloop.training.models import ModelSpec, load_model

    torch.manual_seed(seed)
    return load_model(ModelSpec("qwen3-tiny")).eval()


@pytest.fixture(scope="session")
def make_tiny():
    """Build a random-init tiny Qwen3 from a seed."""
    return tiny_qwen


@pytest.fixture(scope="session")
def tiny_model():
    """A random-init tiny Qwen3 (real Qwen vocabulary), in memory."""
    return tiny_qwen(0)


@pytest.fixture(scope="session")
def saved_feedback_model(shared_root, tiny_model, qwen_tokenizer):
    """The tiny model saved as a feedback model's final/ folder (weights, tokenizer, feedback.json)."""
    from feedback_model.config import FeedbackModelCard, TraceFormat

    folder = shared_root / "feedback_final"
    with built_once(folder) as build_here:
        if build_here:
            tiny_model.save_pretrained(folder)
            qwen_tokenizer.save_pretrained(folder)
            FeedbackModelCard(TraceFormat(), max_length=1024, base="preset:qwen3-tiny").write(folder)
    return folder


def save_onetoken(folder, model, tokenizer, threshold: float = 0.5):
    """A one-token classifier's final/ folder as classifiers.module exports it."""
    from classifiers.evaluator import ClassifierSpec
    from classifiers.model_io import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN

    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    ClassifierSpec(
        kind="onetoken",
        max_length=256,
        head_fraction=0.25,
        threshold=threshold,
        threshold_source="test",
        suffix=ONETOKEN_SUFFIX,
        true_token=TRUE_TOKEN,
        false_token=FALSE_TOKEN,
    ).write(folder)
    return folder


@pytest.fixture(scope="session")
def saved_gate(shared_root, qwen_tokenizer):
    """A random-init tiny one-token classifier (seed 1) saved with classifier.json."""
    folder = shared_root / "gate_final"
    with built_once(folder) as build_here:
        if build_here:
            save_onetoken(folder, tiny_qwen(1), qwen_tokenizer)
    return folder
