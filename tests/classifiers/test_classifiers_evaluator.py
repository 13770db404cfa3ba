"""The batch scoring API (leanloop.evaluator.Evaluator): order, verdicts at the threshold, loading a
run's final/ folder, and the deadline contract (unscored items come back with verdict None)."""

from __future__ import annotations

import itertools

import pytest
import torch

from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
from leanloop.evaluator import Evaluator, Prediction, deadline_in, deadline_passed


@pytest.fixture(scope="module")
def encoder_parts():
    from transformers import AutoModelForSequenceClassification

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    spec = ModelSpec("modernbert-tiny")
    tokenizer = load_tokenizer(spec)
    torch.manual_seed(0)
    model = load_model(spec, AutoModelForSequenceClassification, tokenizer=tokenizer).eval()
    return ClassifierSpec("encoder", 96, 0.25, threshold=0.5), model, tokenizer


def test_scores_in_input_order_match_single_program_forwards(encoder_parts, real_programs):
    spec, model, tokenizer = encoder_parts
    evaluator = ClassifierEvaluator(spec, model, tokenizer, batch_size=5)
    assert isinstance(evaluator, Evaluator)
    programs = [p for _, p, _ in real_programs[:13]]
    predictions = evaluator.score(programs)
    assert len(predictions) == len(programs) and all(isinstance(p, Prediction) for p in predictions)
    for program, prediction in zip(programs, predictions):
        ids = torch.tensor([evaluator.inputs.encode(program)])
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.softmax(-1)[0, 1]
        assert prediction.score == pytest.approx(float(expected), abs=1e-5)
        assert prediction.verdict == (prediction.score >= 0.5)


def test_threshold_decides_verdicts(encoder_parts, real_programs):
    spec, model, tokenizer = encoder_parts
    programs = [p for _, p, _ in real_programs[:10]]
    scores = [p.score for p in ClassifierEvaluator(spec, model, tokenizer).score(programs)]
    cut = sorted(scores)[5]
    strict = ClassifierEvaluator(spec, model, tokenizer, threshold=cut).score(programs)
    assert [p.verdict for p in strict] == [s >= cut for s in scores]
    assert sum(p.verdict for p in strict) == 5


def test_deadline_already_passed_scores_nothing(encoder_parts, real_programs):
    spec, model, tokenizer = encoder_parts
    predictions = ClassifierEvaluator(spec, model, tokenizer).score(
        [p for _, p, _ in real_programs[:6]], deadline=deadline_in(-1.0)
    )
    assert all(p.verdict is None and p.score is None for p in predictions)


def test_deadline_mid_batch_leaves_the_rest_unscored(encoder_parts, real_programs, monkeypatch):
    """The deadline passes after the first batch: that batch is scored (shortest programs first),
    every other program comes back unscored, in input order."""
    import classifiers.evaluator as evaluator_module

    spec, model, tokenizer = encoder_parts
    evaluator = ClassifierEvaluator(spec, model, tokenizer, batch_size=3)
    programs = [p for _, p, _ in real_programs[:9]]
    checks = itertools.count()
    monkeypatch.setattr(evaluator_module, "deadline_passed", lambda deadline: next(checks) >= 1)
    predictions = evaluator.score(programs, deadline=123.0)
    scored = [i for i, p in enumerate(predictions) if p.score is not None]
    lengths = [len(evaluator.inputs.encode(p)) for p in programs]
    assert len(scored) == 3
    assert sorted(lengths[i] for i in scored) == sorted(lengths)[:3]
    assert all(predictions[i].verdict is None for i in range(9) if i not in scored)


def test_deadline_clock():
    assert deadline_passed(deadline_in(-0.5)) and not deadline_passed(deadline_in(60.0))
    assert not deadline_passed(None)


def test_load_from_final_folder(encoder_parts, real_programs, tmp_path):
    spec, model, tokenizer = encoder_parts
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    ClassifierSpec("encoder", 96, 0.25, threshold=0.37, threshold_source="test").write(tmp_path)
    loaded = ClassifierEvaluator.load(tmp_path)
    assert loaded.threshold == 0.37
    programs = [p for _, p, _ in real_programs[:4]]
    fresh = ClassifierEvaluator(spec, model, tokenizer).score(programs)
    again = loaded.score(programs)
    assert [p.score for p in again] == pytest.approx([p.score for p in fresh], abs=1e-6)


def test_folder_without_classifier_json_is_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match="classifier.json"):
        ClassifierEvaluator.load(tmp_path)


def test_mean_pooling_ignores_padding_and_is_kept_in_classifier_json(real_programs, tmp_path):
    """pooling: mean (the shipped MiniLM, one layer of it) = the classifier head over the mean of the
    program's own token states, whatever else pads its batch; saved and loaded with the weights."""
    from transformers import AutoModelForSequenceClassification

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    base = ModelSpec("minilm", overrides={"num_hidden_layers": 1})
    tokenizer = load_tokenizer(base)
    model = load_model(base, AutoModelForSequenceClassification, tokenizer=tokenizer).eval()
    spec = ClassifierSpec("encoder", 160, 0.25, threshold=0.5, pooling="mean")
    evaluator = ClassifierEvaluator(spec, model, tokenizer, batch_size=4)
    programs = sorted((p for _, p, _ in real_programs[:40]), key=len)[::5]
    assert len({len(evaluator.inputs.encode(p)) for p in programs}) > 1  # padded batches
    scores = [p.score for p in evaluator.score(programs)]
    for program, score in zip(programs, scores):
        ids = torch.tensor([evaluator.inputs.encode(program)])
        with torch.no_grad():
            pooled = model.base_model(input_ids=ids).last_hidden_state.mean(1)
            expected = model.classifier(pooled).softmax(-1)[0, 1]
        assert score == pytest.approx(float(expected), abs=1e-5)
    cls = ClassifierEvaluator(ClassifierSpec("encoder", 160, 0.25), model, tokenizer).score(programs)
    assert max(abs(a - b.score) for a, b in zip(scores, cls)) > 1e-3  # really a different head input

    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    spec.write(tmp_path)
    loaded = ClassifierEvaluator.load(tmp_path)
    assert loaded.inputs.pooling == "mean"
    assert [p.score for p in loaded.score(programs)] == pytest.approx(scores, abs=1e-6)


def test_pooling_is_checked_against_the_model(encoder_parts):
    from classifiers.model_io import prepare_pooling

    _, model, _ = encoder_parts  # ModernBERT pools by its own config
    prepare_pooling(model, "mean")
    assert model.config.classifier_pooling == "mean"
    prepare_pooling(model, "cls")
    assert model.config.classifier_pooling == "cls"
    with pytest.raises(ValueError, match="one of"):
        prepare_pooling(model, "max")
