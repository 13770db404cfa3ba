"""A autoformalizer run killed mid-epoch and rerun is the uninterrupted run: the same logged losses and the
same exported weights to float rounding (the training order resumes where it stopped, each step
seeded by its place)."""

from __future__ import annotations


def test_a_killed_autoformalizer_run_resumes_to_the_uninterrupted_model(kill_and_resume):
    runs = kill_and_resume("autoformalizer", "configs/autoformalizer/debug.yaml", "--trainer.limit_val_batches", "1", kill=3, every=2, steps=4)
    assert "step-000002" in runs.stderr
    resumed, straight = runs.logged()
    assert sorted(resumed) == sorted(straight) == list(range(4)) and resumed == straight
    assert runs.same_weights(tolerance=1e-6)  # restored optimizer steps round differently in the last bits
