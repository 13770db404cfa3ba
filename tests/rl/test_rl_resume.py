"""An rl run killed mid-run and rerun continues its logs and counts: steps.jsonl holds every step
once, and the report and manifest count every rollout of the run (the uninterrupted run's)."""

from __future__ import annotations

import json


def _steps(run):
    return [json.loads(line)["step"] for line in (run / "steps.jsonl").read_text().splitlines()]


def test_a_killed_rl_run_continues_its_step_logs_and_counts(kill_and_resume):
    runs = kill_and_resume("rl", "configs/rl/debug.yaml", "--model.evaluation", "null", kill=3, every=2, steps=4)
    assert "step-000002" in runs.stderr
    assert _steps(runs.resumed) == _steps(runs.straight) == [0, 1, 2, 3]  # none lost, none twice
    drift = [json.loads(line)["step"] for line in (runs.resumed / "drift.jsonl").read_text().splitlines()]
    assert drift == sorted(set(drift)) and drift[0] < 2 <= drift[-1]  # rows from before and after the kill
    counts = [json.loads((run / "manifest.json").read_text())["counts"]["rollouts"] for run in (runs.resumed,
                                                                                                 runs.straight)]
    sources = [sum(v for k, v in c.items() if k.startswith("source:")) for c in counts]
    assert sources == [16, 16]  # 4 steps x 2 problems x G=2
    assert "| 3 |" in (runs.resumed / "report.md").read_text()
