"""Drift statistics and the evaluator refresh on real Lean-labelled programs."""

from __future__ import annotations

import pytest

from rl.drift import DriftConfig, DriftMonitor, Pair, agreement
from rl.refresh import EvaluatorRefresher, LabelBuffer, RefreshConfig


def test_agreement_statistics():
    pairs = [
        Pair(True, True, "x"),
        Pair(True, False, "x"),
        Pair(False, False, "x"),
        Pair(False, False, "x"),
        Pair(False, True, "x"),
    ]
    accuracy, fpr, fnr, n_valid, n_invalid = agreement(pairs)
    assert (accuracy, fpr, fnr, n_valid, n_invalid) == (pytest.approx(3 / 5), pytest.approx(1 / 3), 0.5, 2, 3)
    assert agreement([]) == (None, None, None, 0, 0)
    monitor = DriftMonitor(DriftConfig(every_n_steps=3, min_pairs=6, fpr_alarm=0.2))
    for p in pairs:
        monitor.observe(p.verdict, p.label, "audit")
    monitor.observe(None, True, "audit")  # no verdict: not a pair
    assert [monitor.due(s) for s in (0, 1, 3, 6)] == [False, False, True, True]
    restored = DriftMonitor(monitor.config)
    restored.load_state_dict(monitor.state_dict())  # a resumed run's monitor reports the pairs gathered before
    assert restored.report(3) == monitor.report(3, reset=False)
    monitor.history.clear()
    report = monitor.report(3)
    assert report.pairs == 5 and not report.alarm  # under min_pairs: no alarm on 5 pairs
    assert monitor.pairs == [] and monitor.history == [report]
    # LLF reports drift at fixed steps (25, 125, 250), each over every pair labelled since the last
    fixed = DriftMonitor(DriftConfig(steps=[25, 125, 250], every_n_steps=5))
    assert [s for s in range(1, 300) if fixed.due(s)] == [25, 125, 250]


def test_refresh_fits_lean_labels_and_remeasures_on_held_out_theorems(tiny_onetoken, rl_rows):
    import copy

    from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
    from classifiers.model_io import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN

    model, tokenizer = tiny_onetoken
    spec = ClassifierSpec(
        kind="onetoken",
        max_length=128,
        head_fraction=0.25,
        suffix=ONETOKEN_SUFFIX,
        true_token=TRUE_TOKEN,
        false_token=FALSE_TOKEN,
    )
    evaluator = ClassifierEvaluator(spec, copy.deepcopy(model), tokenizer, batch_size=16)  # refresh trains it
    buffer = LabelBuffer()
    clean = [r for r in rl_rows if not r["compilation_result"].get("system_errors")]
    for row in clean[:24]:
        buffer.add(row["code"], row["verdict_pass"], row["name"])
    buffer.add(clean[0]["code"], clean[0]["verdict_pass"], clean[0]["name"])  # a program counts once
    buffer.add(None, True, "x")
    buffer.add("theorem t : True := trivial", None, "x")  # no Lean label: never a training example
    assert len(buffer) == 24
    train, holdout = buffer.split(0.3)
    assert train and holdout and not {x.name for x in train} & {x.name for x in holdout}
    before = next(evaluator.model.parameters()).detach().clone()
    refresher = EvaluatorRefresher(
        evaluator,
        RefreshConfig(
            enabled=True, every_n_steps=2, steps=6, lr=3e-3, batch_size=len(train), min_labels=8, holdout_fraction=0.3
        ),
    )
    assert refresher.due(2) and not refresher.due(3)
    report = refresher.refresh(2, buffer)
    assert report.skipped is None and report.train == len(train) and report.holdout == len(holdout)
    assert len(report.losses) == 6 and report.losses[-1] < report.losses[0]
    assert report.before_accuracy is not None and report.after_accuracy is not None
    assert not evaluator.model.training
    assert not next(evaluator.model.parameters()).detach().equal(before)
    # a resumed run's refresher (restored from the checkpoint's state, on the evaluator as first loaded)
    # refreshes next exactly as the uninterrupted one does
    resumed = EvaluatorRefresher(
        ClassifierEvaluator(spec, copy.deepcopy(model), tokenizer, batch_size=16), refresher.config
    )
    resumed.load_state_dict(copy.deepcopy(refresher.state_dict()))  # as saved, not the live tensors
    labels = LabelBuffer()
    labels.load_state_dict(buffer.state_dict())
    assert [x.program for x in labels.items.values()] == [x.program for x in buffer.items.values()]
    import torch

    torch.manual_seed(0)  # dropout's draws (a run seeds each step: leanloop.training.resume.seed_batch)
    losses = resumed.refresh(4, labels).losses
    torch.manual_seed(0)
    assert losses == refresher.refresh(4, buffer).losses
    assert all(a.equal(b) for a, b in zip(resumed.evaluator.model.parameters(), evaluator.model.parameters()))
    small = LabelBuffer()
    small.add(clean[0]["code"], True, clean[0]["name"])
    assert "min_labels" in refresher.refresh(4, small).skipped


def test_refresh_needs_a_classifier():
    with pytest.raises(TypeError, match="classifier evaluators"):
        EvaluatorRefresher(object())
