"""Every map-style training stage, killed mid-epoch (SIGKILL) and rerun, is its uninterrupted run:
the same logged losses and the same exported weights. Orders are functions of seed and epoch and
resume where they stopped (the classifiers' length-grouped batches included), and each step is
seeded by its place. pretrain's is tests/leanloop/test_artifact_contract.py's; rl's (curriculum, replay
buffer and logs continued) is tests/rl/test_rl_resume.py; search's (its training and its self-improvement
loop) is tests/search/test_resume.py. Under DDP (two CPU ranks over gloo) each rank trains on its own
share of the epoch, and a run killed on every rank resumes each rank's share where it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# bit-identical, or to float rounding where a restored optimizer step rounds in the last bits
STAGES = [("classifiers", 0.0), ("sft", 1e-6), ("prm", 1e-6), ("autoformalizer", 1e-6), ("feedback_model", 1e-6)]


@pytest.mark.slow
@pytest.mark.parametrize("stage, tolerance", STAGES, ids=[s for s, _ in STAGES])
def test_a_killed_run_resumes_to_the_uninterrupted_model(stage, tolerance, kill_and_resume, request):
    # feedback_model's debug config reads the debug corpus (built once per session)
    inputs = ["--data.corpus", str(request.getfixturevalue("debug_corpus"))] if stage == "feedback_model" else []
    runs = kill_and_resume(
        stage, f"configs/{stage}/debug.yaml", "--trainer.limit_val_batches", "1", *inputs, kill=3, every=2, steps=4
    )
    assert "step-000002" in runs.stderr and "not resumable" not in runs.stderr
    resumed, straight = runs.logged()
    assert sorted(resumed) == sorted(straight) == list(range(4))  # every step logged once
    assert resumed == straight
    assert runs.same_weights(tolerance)


def _batches(run: Path) -> tuple[dict[tuple[int, int], tuple[int, list[int]]], int]:
    """``(rank, step) -> (epoch, rows)`` from kill_at_step.RecordBatches, and the tokens of them
    all; a step a killed run trained after its checkpoint and its rerun trained again counts as
    the rerun's."""
    out, tokens = {}, {}
    for path in sorted(run.glob("batches-rank*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            out[row["rank"], row["step"]] = (row["epoch"], row["index"])
            tokens[row["rank"], row["step"]] = row["tokens"]
    return out, sum(tokens.values())


@pytest.mark.slow
def test_a_killed_two_rank_ddp_run_resumes_each_ranks_share_to_the_uninterrupted_model(kill_and_resume):
    # 32 training programs in batches of 4 over 2 ranks: 4 steps an epoch; killed (every rank) at
    # step 3, after the step-2 checkpoint, and run on into the second epoch
    runs = kill_and_resume(
        "classifiers",
        "configs/classifiers/debug.yaml",
        "--trainer.callbacks.group",
        "true",
        "--trainer.callbacks+=kill_at_step.RecordBatches",
        "--config",
        "configs/strategy/ddp_cpu.yaml",
        "--data.max_rows_per_split",
        "32",
        "--trainer.limit_val_batches",
        "1",
        kill=3,
        every=2,
        steps=6,
    )
    assert "step-000002" in runs.stderr and "not resumable" not in runs.stderr
    (straight, tokens), (resumed, resumed_tokens) = _batches(runs.straight), _batches(runs.resumed)
    assert sorted(straight) == [(rank, step) for rank in (0, 1) for step in range(1, 7)]
    first_epoch = [straight[rank, step] for rank in (0, 1) for step in range(1, 5)]
    assert {epoch for epoch, _ in first_epoch} == {0}
    rows = [i for _, batch in first_epoch for i in batch]
    assert sorted(rows) == list(range(32))  # the ranks' shares: disjoint, the whole epoch
    assert straight[0, 5][0] == 1 and set(straight[0, 5][1]) != set(straight[0, 1][1])  # a new order
    assert resumed == straight  # each rank went on with its own next batch
    logged_resumed, logged_straight = runs.logged()
    assert sorted(logged_resumed) == list(range(6)) and logged_resumed == logged_straight
    assert runs.same_weights(0.0)
    counted = [json.loads((run / "manifest.json").read_text())["counts"] for run in (runs.resumed, runs.straight)]
    assert counted[0]["trained_tokens"] == counted[1]["trained_tokens"] == tokens == resumed_tokens  # both ranks'
