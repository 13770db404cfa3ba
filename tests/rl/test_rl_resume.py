"""An rl run killed mid-run (SIGKILL) and rerun is its uninterrupted run: the same exported weights,
bit for bit, and the same logs (steps.jsonl, drift.jsonl, curriculum.json, the manifest's counts),
every step once. The rewards come from the evaluator alone (``protocol: evaluator``): under the
hybrid race which rollouts Lean decides depends on timing, so two uninterrupted hybrid runs can
differ already (rl/README.md)."""

from __future__ import annotations

import json

import pytest

# wall-clock readings: the only numbers two runs of the same seed may log differently
TIMINGS = ("time/", "reward/scoring_s", "reward/evaluator_s", "reward/cutoff_s")


def _rows(run, name):
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith(TIMINGS)}
        for line in (run / name).read_text().splitlines()
    ]


@pytest.mark.slow
def test_a_killed_rl_run_resumes_to_the_uninterrupted_run(kill_and_resume):
    runs = kill_and_resume(
        "rl",
        "configs/rl/debug.yaml",
        "--model.evaluation",
        "null",
        "--model.reward.protocol",
        "evaluator",
        kill=2,
        every=1,
        steps=4,
    )
    assert "step-000001" in runs.stderr  # killed after step 2 (index 1), before its checkpoint
    steps = _rows(runs.resumed, "steps.jsonl")
    assert [row["step"] for row in steps] == [0, 1, 2, 3]  # none lost to the restart, none twice
    assert steps == _rows(runs.straight, "steps.jsonl")  # the same draws, rewards and losses
    assert any(row["train/loss"] != 0.0 for row in steps)  # the policy learned something to compare
    drift = _rows(runs.resumed, "drift.jsonl")
    assert drift and drift == _rows(runs.straight, "drift.jsonl")
    assert (runs.resumed / "curriculum.json").read_text() == (runs.straight / "curriculum.json").read_text()
    assert runs.same_weights()  # torch.equal on every exported tensor
    counts = [json.loads((run / "manifest.json").read_text())["counts"] for run in (runs.resumed, runs.straight)]
    rollouts = counts[0]["rollouts"]
    assert rollouts == counts[1]["rollouts"]
    assert sum(v for k, v in rollouts.items() if k.startswith("source:")) == 16  # 4 steps x 2 problems x G=2
    assert counts[0]["curriculum"] == counts[1]["curriculum"]
    assert counts[0]["curriculum_exhausted_steps"] == counts[1]["curriculum_exhausted_steps"]
    report = (runs.resumed / "report.md").read_text()
    assert all(f"| {step} |" in report for step in (0, 1, 2, 3))
