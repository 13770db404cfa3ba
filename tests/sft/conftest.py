"""Fixtures of the sft tests: a tiny saved prover and its generator (the small real corpus,
``debug_corpus``, is in tests/conftest.py: the classifiers' cross-validation folds it too)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_prover(tmp_path_factory):
    """A tiny Qwen3 (real Qwen vocabulary) saved in Hugging Face format: every load of the folder
    gives the same weights, so sampling from it is reproducible across runs and shards."""
    import torch

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    folder = tmp_path_factory.mktemp("tiny_prover")
    torch.manual_seed(0)
    spec = ModelSpec(name="qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    load_model(spec, tokenizer=tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_generator(tiny_prover):
    """The sampler's own generator over ``tiny_prover`` (loaded once; stops at EOS and at the chat
    end-of-turn token, so it serves raw and chat prompts)."""
    from leanloop.training.models import ModelSpec
    from sft.config import SampleConfig
    from leanloop.prover.prompt import PromptConfig
    from sft.sample import make_generator

    return make_generator(SampleConfig(model=ModelSpec(name=str(tiny_prover)), prompt=PromptConfig(style="chat")))
