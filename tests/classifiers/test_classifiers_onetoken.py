"""The one-token score is p(true) / (p(true) + p(false)) of ONE forward pass over program + suffix,
identical to a manual, unpadded forward and softmax, whatever else shares its (left-padded) batch."""

from __future__ import annotations

import pytest
import torch

from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
from classifiers.scoring import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN, onetoken_logits, onetoken_loss


@pytest.fixture(scope="module")
def tiny_qwen():
    from transformers import AutoModelForCausalLM

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    spec = ModelSpec("qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    torch.manual_seed(0)
    model = load_model(spec, AutoModelForCausalLM, tokenizer=tokenizer).eval()
    return model, tokenizer


def onetoken_spec(max_length: int = 192) -> ClassifierSpec:
    return ClassifierSpec("onetoken", max_length, 0.25, suffix=ONETOKEN_SUFFIX, true_token=TRUE_TOKEN,
                          false_token=FALSE_TOKEN)


def test_score_equals_manual_softmax_ratio(tiny_qwen, real_programs):
    model, tokenizer = tiny_qwen
    evaluator = ClassifierEvaluator(onetoken_spec(), model, tokenizer, batch_size=8)
    programs = [p for _, p, _ in real_programs[:12]]
    lengths = {len(evaluator.inputs.encode(p)) for p in programs}
    assert len(lengths) > 1  # rows of different lengths: the batch really is padded
    predictions = evaluator.score(programs)
    for program, prediction in zip(programs, predictions):
        ids = torch.tensor([evaluator.inputs.encode(program)])
        with torch.no_grad():  # one program alone, no padding; only the last position's logits
            probabilities = model(input_ids=ids, logits_to_keep=1).logits[0, -1].float().softmax(-1)
        p_true = probabilities[evaluator.inputs.true_id]
        p_false = probabilities[evaluator.inputs.false_id]
        assert prediction.score == pytest.approx(float(p_true / (p_true + p_false)), abs=1e-5)
        assert prediction.verdict == (prediction.score >= evaluator.threshold)
        assert prediction.trace is None and prediction.time_s > 0


def test_scoring_is_one_forward_without_generation(tiny_qwen, real_programs, monkeypatch):
    model, tokenizer = tiny_qwen
    evaluator = ClassifierEvaluator(onetoken_spec(), model, tokenizer, batch_size=4)
    calls = []
    original = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, *a, **k: calls.append(k) or original(self, *a, **k))
    monkeypatch.setattr(type(model), "generate", lambda *a, **k: pytest.fail("the one-token classifier must not generate"))
    evaluator.score([p for _, p, _ in real_programs[:8]])
    assert len(calls) == 2  # 8 programs, batches of 4: one forward per batch
    assert all(call["logits_to_keep"] == 1 for call in calls)


def test_loss_trains_the_verdict_token(tiny_qwen, real_programs):
    model, tokenizer = tiny_qwen
    evaluator = ClassifierEvaluator(onetoken_spec(), model, tokenizer)
    inputs = evaluator.inputs
    batch = inputs.collate([inputs.encode(p) for _, p, _ in real_programs[:3]])
    with torch.no_grad():
        logits = onetoken_logits(model, batch)
    targets = torch.tensor([inputs.true_id, inputs.false_id, inputs.true_id])
    expected = -torch.stack([logits[i].float().log_softmax(-1)[t] for i, t in enumerate(targets)]).mean()
    assert float(onetoken_loss(logits, targets)) == pytest.approx(float(expected), rel=1e-5)


def test_multi_token_verdict_word_is_refused(tiny_qwen):
    model, tokenizer = tiny_qwen
    spec = onetoken_spec()
    spec.true_token = " theorem_is_valid_indeed"
    with pytest.raises(ValueError, match="single-token"):
        ClassifierEvaluator(spec, model, tokenizer)
