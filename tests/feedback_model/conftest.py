"""Fixtures of the feedback-model tests: the real debug corpus and tiny saved models."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def feedback_corpus(tmp_path_factory):
    """configs/data/debug.yaml built for real (replay backend over the recorded RL-Lean answers);
    returns the artifacts root holding data/debug."""
    from data.build import build, parse_config
    from leanloop.paths import REPO_ROOT

    root = tmp_path_factory.mktemp("feedback_artifacts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root))
        build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    return root


@pytest.fixture(scope="session")
def corpus_rows(feedback_corpus):
    from feedback_model.data import read_corpus

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
def saved_feedback_model(tmp_path_factory, tiny_model, qwen_tokenizer):
    """The tiny model saved as a feedback model's final/ folder (weights, tokenizer, feedback.json)."""
    from feedback_model.config import FeedbackModelCard, TraceFormat

    folder = tmp_path_factory.mktemp("feedback_final")
    tiny_model.save_pretrained(folder)
    qwen_tokenizer.save_pretrained(folder)
    FeedbackModelCard(TraceFormat(), max_length=1024, base="preset:qwen3-tiny").write(folder)
    return folder


def save_onetoken(folder, model, tokenizer, threshold: float = 0.5):
    """A one-token classifier's final/ folder as classifiers.module exports it."""
    from classifiers.evaluator import ClassifierSpec
    from classifiers.scoring import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN

    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    ClassifierSpec(kind="onetoken", max_length=256, head_fraction=0.25, threshold=threshold,
                   threshold_source="test", suffix=ONETOKEN_SUFFIX, true_token=TRUE_TOKEN,
                   false_token=FALSE_TOKEN).write(folder)
    return folder


@pytest.fixture(scope="session")
def saved_gate(tmp_path_factory, qwen_tokenizer):
    """A random-init tiny one-token classifier (seed 1) saved with classifier.json."""
    return save_onetoken(tmp_path_factory.mktemp("gate_final"), tiny_qwen(1), qwen_tokenizer)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared 2-core machine the idle
    threads spin: run this directory's tests on one thread, then restore the setting."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
