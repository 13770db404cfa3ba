"""Fixtures of the rl tests: real statements, real recorded RL-Lean programs and their replay
answers, a tiny policy / evaluator built from the real Qwen vocabulary."""

from __future__ import annotations

import gzip
import json

import pytest


@pytest.fixture(scope="session")
def dsp_statements():
    """miniF2F as DeepSeek-Prover ships it: the RL-Lean programs continue exactly these prompts."""
    from leanloop.prover.statements import read_statements

    return {s.name: s for s in read_statements("shared://statements/minif2f_deepseek_prover_v1.5.jsonl").statements}


@pytest.fixture(scope="session")
def rl_rows(shared_data):
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def replay():
    from leanloop.lean.replay import ReplayBackend

    backend = ReplayBackend(["rl_lean"])
    backend.index  # load once per session
    return backend


@pytest.fixture(scope="session")
def continuations(rl_rows, dsp_statements):
    """Real recorded programs as (statement, completion continuing its prompt, row)."""
    out = []
    for row in rl_rows:
        statement = dsp_statements.get(row["name"])
        if statement is not None and row["code"].startswith(statement.prompt):
            out.append((statement, row["code"][len(statement.prompt) :], row))
    return out


@pytest.fixture(scope="session")
def tiny_onetoken():
    """(model, tokenizer) of a tiny one-token classifier: real Qwen vocabulary, random weights."""
    import torch

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    torch.manual_seed(0)
    spec = ModelSpec("qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    return load_model(spec, tokenizer=tokenizer).eval(), tokenizer


@pytest.fixture
def classifier(tiny_onetoken):
    """A real ClassifierEvaluator over the tiny model; ``classifier(threshold)``. Threshold 0 accepts
    every program (the adversarial worst case for the harness), above 1 rejects every one."""
    from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
    from classifiers.model_io import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN

    model, tokenizer = tiny_onetoken

    def make(threshold: float = 0.5) -> ClassifierEvaluator:
        spec = ClassifierSpec(
            kind="onetoken",
            max_length=128,
            head_fraction=0.25,
            threshold=threshold,
            suffix=ONETOKEN_SUFFIX,
            true_token=TRUE_TOKEN,
            false_token=FALSE_TOKEN,
        )
        return ClassifierEvaluator(spec, model, tokenizer, batch_size=16)

    return make
