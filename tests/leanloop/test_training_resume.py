"""Every map-style training stage, killed mid-epoch (SIGKILL) and rerun, is its uninterrupted run:
the same logged losses and the same exported weights. Orders are functions of seed and epoch and
resume where they stopped (the classifiers' length-grouped batches included), and each step is
seeded by its place. pretrain's is tests/leanloop/test_artifact_contract.py's; rl's (curriculum, replay
buffer and logs continued) is tests/rl/test_rl_resume.py; search's (its training and its self-improvement
loop) is tests/search/test_resume.py."""

from __future__ import annotations

import pytest

# bit-identical, or to float rounding where a restored optimizer step rounds in the last bits
STAGES = [("classifiers", 0.0), ("sft", 1e-6), ("prm", 1e-6), ("autoformalizer", 1e-6), ("feedback_model", 1e-6)]


@pytest.mark.slow
@pytest.mark.parametrize("stage, tolerance", STAGES, ids=[s for s, _ in STAGES])
def test_a_killed_run_resumes_to_the_uninterrupted_model(stage, tolerance, kill_and_resume, request):
    # feedback_model's debug config reads the debug corpus (built once per session)
    inputs = ["--data.corpus", str(request.getfixturevalue("debug_corpus"))] if stage == "feedback_model" else []
    runs = kill_and_resume(stage, f"configs/{stage}/debug.yaml", "--trainer.limit_val_batches", "1", *inputs,
                           kill=3, every=2, steps=4)
    assert "step-000002" in runs.stderr and "not resumable" not in runs.stderr
    resumed, straight = runs.logged()
    assert sorted(resumed) == sorted(straight) == list(range(4))  # every step logged once
    assert resumed == straight
    assert runs.same_weights(tolerance)
