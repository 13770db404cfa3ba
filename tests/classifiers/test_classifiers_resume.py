"""A classifier run killed mid-epoch and rerun is the uninterrupted run: the length-grouped order
resumes where it stopped (it is a function of seed and epoch), so the weights and the logged losses
are the same."""

from __future__ import annotations


def test_a_killed_classifier_run_resumes_to_the_uninterrupted_model(kill_and_resume):
    runs = kill_and_resume("classifiers", "configs/classifiers/debug.yaml", "--trainer.limit_val_batches", "1",
                           kill=3, every=2, steps=6)
    assert "step-000002" in runs.stderr and "not resumable" not in runs.stderr
    resumed, straight = runs.logged()
    assert sorted(resumed) == sorted(straight) == list(range(6))  # every step logged once
    assert resumed == straight
    assert runs.same_weights()
