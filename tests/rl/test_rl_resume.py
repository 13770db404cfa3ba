"""An rl run killed mid-run and rerun continues its logs and counts: steps.jsonl and drift.jsonl
hold every step once, and the report and manifest count every rollout of the run."""

from __future__ import annotations

import json

import pytest


def _steps(run, name):
    return [json.loads(line)["step"] for line in (run / name).read_text().splitlines()]


@pytest.mark.slow
def test_a_killed_rl_run_continues_its_step_logs_and_counts(kill_and_resume):
    runs = kill_and_resume("rl", "configs/rl/debug.yaml", "--model.evaluation", "null", kill=2, every=1, steps=3,
                           straight=False)
    assert "step-000001" in runs.stderr
    assert _steps(runs.resumed, "steps.jsonl") == [0, 1, 2]  # none lost to the restart, none twice
    drift = _steps(runs.resumed, "drift.jsonl")
    assert drift and drift == sorted(set(drift))  # the killed run's rows after its checkpoint are not doubled
    rollouts = json.loads((runs.resumed / "manifest.json").read_text())["counts"]["rollouts"]
    assert sum(v for k, v in rollouts.items() if k.startswith("source:")) == 12  # 3 steps x 2 problems x G=2
    report = (runs.resumed / "report.md").read_text()
    assert all(f"| {step} |" in report for step in (0, 1, 2))
