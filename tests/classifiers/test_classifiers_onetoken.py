"""The one-token score is p(true) / (p(true) + p(false)) of ONE forward pass over program + suffix,
identical to a manual, unpadded forward and softmax, whatever else shares its (left-padded) batch."""

from __future__ import annotations

import pytest
import torch

from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
from classifiers.model_io import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN, onetoken_logits, onetoken_loss


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
    return ClassifierSpec(
        "onetoken", max_length, 0.25, suffix=ONETOKEN_SUFFIX, true_token=TRUE_TOKEN, false_token=FALSE_TOKEN
    )


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
    monkeypatch.setattr(
        type(model), "generate", lambda *a, **k: pytest.fail("the one-token classifier must not generate")
    )
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


def test_packed_rows_give_each_program_its_own_verdict_logits(real_programs):
    """LLF packs the one-token training programs into 32,768-token rows: a program in a packed row
    must score exactly as alone (no attention across programs, positions from 0), at its own verdict
    position. Scaled down on the tiny Qwen3 with the real vocabulary."""
    import torch

    from classifiers.data import PackedBatches
    from classifiers.module import OneTokenClassifier
    from classifiers.config import InputConfig
    from classifiers.model_io import onetoken_logits

    module = OneTokenClassifier(inputs=InputConfig(max_length=96, pack_tokens=256))
    module.model.eval()
    programs = [p for _, p, _ in real_programs][:3]
    encoded = [module.encode(p) for p in programs]
    items = [{"input_ids": ids, "label": bool(i % 2), "index": i} for i, ids in enumerate(encoded)]
    packed = module.train_collate(items)
    assert packed["input_ids"].shape == (1, sum(len(e) for e in encoded)) and "attention_mask" not in packed
    with torch.no_grad():
        together = onetoken_logits(module.model, packed)
        alone = torch.cat([onetoken_logits(module.model, module.collate([item])) for item in items])
    assert together.shape == alone.shape == (3, alone.shape[-1])
    assert torch.allclose(together, alone, atol=1e-4)
    assert packed["labels"].tolist() == [0, 1, 0]
    packs = PackedBatches([len(e) for e in encoded] * 4, capacity=256, seed=1)
    drawn = [i for pack in packs for i in pack]
    assert sorted(drawn) == list(range(12)) and all(sum(len(encoded[i % 3]) for i in p) <= 256 for p in packs.packs)
