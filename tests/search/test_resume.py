"""The search stage killed mid-run (SIGKILL) and rerun is its uninterrupted run: the actor-critic's
training (``search.train``) and the self-improvement loop (``search.expert_iteration``), whose rerun keeps the
rounds it finished and resumes the killed round's training from its checkpoint. Same weights (bit
for bit) and the same logs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from leanloop.paths import REPO_ROOT


@pytest.mark.slow
def test_a_killed_search_training_run_resumes_to_the_uninterrupted_model(kill_and_resume, search_data):
    runs = kill_and_resume(
        "search", "configs/search/debug.yaml", "--data.trees", str(search_data), kill=3, every=2, steps=6
    )
    assert "step-000002" in runs.stderr and "not resumable" not in runs.stderr
    resumed, straight = runs.logged()
    assert sorted(resumed) == list(range(6)) and resumed == straight  # every step logged once, the same losses
    assert runs.same_weights()


def _expert_iteration(run, once):
    """``python -m search.expert_iteration`` on the debug loop made 2 rounds of 4 steps, checkpointing every 2,
    killed (once) at step 3 of round 2."""
    train_args = [
        "--trainer.max_steps",
        "4",
        "--trainer.max_epochs",
        "-1",
        "--data.max_train_examples",
        "16",
        "--data.max_val_examples",
        "2",
        "--trainer.limit_val_batches",
        "1",
        "--trainer.val_check_interval",
        "4",
        "--trainer.log_every_n_steps",
        "1",
        "--checkpoint_every_n_steps",
        "2",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.callbacks+",
        "kill_at_step.KillAt",
        "--trainer.callbacks.step",
        "3",
        "--trainer.callbacks.once",
        str(once),
        "--trainer.callbacks.run",
        "round2",
    ]
    argv = [
        sys.executable,
        "-m",
        "search.expert_iteration",
        "--config",
        "configs/search/expert_iteration/debug.yaml",
        "--rounds",
        "2",
        "--run",
        run,
        "--train_args",
        json.dumps(train_args),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "tests/leanloop")]),
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=900)


@pytest.mark.slow
def test_a_killed_self_improvement_loop_resumes_to_the_uninterrupted_one(
    search_data, artifacts, tmp_path, kill_and_resume
):
    shutil.copytree(search_data, artifacts / "search_data" / "default")
    from search.train import run as train

    train(["--config", "configs/search/debug.yaml", "--trainer.fast_dev_run", "true"])  # round 0's model
    once = tmp_path / "killed"
    killed = _expert_iteration("resume", once)
    assert killed.returncode == -signal.SIGKILL and once.read_text() == "3", killed.stderr[-3000:]
    assert (artifacts / "search" / "resume-round1" / "manifest.json").is_file()
    assert (artifacts / "search" / "resume-round2" / "step-000002" / "lightning.ckpt").is_file()
    resumed = _expert_iteration("resume", once)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "round 1: finished before the restart" in resumed.stdout
    assert "resuming the unfinished run" in resumed.stderr and "resume-round2 from step-000002" in resumed.stderr
    straight = _expert_iteration("straight", once)
    assert straight.returncode == 0, straight.stderr[-3000:]
    ours, theirs = (
        artifacts / "search_expert_iteration" / "resume",
        artifacts / "search_expert_iteration" / "straight",
    )
    for name in ("replay_round1.jsonl", "replay_round2.jsonl"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes()

    def rounds(folder, run):
        text = json.dumps(json.loads((folder / "manifest.json").read_text())["metrics"])
        return json.loads(text.replace(f"search/{run}-round", "search/RUN-round"))

    assert rounds(ours, "resume") == rounds(theirs, "straight")
    for k in (1, 2):
        search = artifacts / "search"
        runs = kill_and_resume.compare(search / f"resume-round{k}", search / f"straight-round{k}")
        resumed_losses, straight_losses = runs.logged()
        assert sorted(resumed_losses) == list(range(4)) and resumed_losses == straight_losses
        assert runs.same_weights()


def test_only_a_loop_of_the_same_config_continues_and_only_rounds_whose_runs_finished(tmp_path, artifacts):
    from leanloop.jsonl import write_jsonl
    from search.expert_iteration import ROUNDS_FILE, ExpertIterationConfig, _comparable, finished_rounds

    config = ExpertIterationConfig(run="x")
    (tmp_path / "replay_round1.jsonl").write_text("")
    round1 = {"round": 1, "trained": "artifacts://search/x-round1"}
    write_jsonl(tmp_path / ROUNDS_FILE, [{"config": _comparable(config)}, {"started": 1}, round1, {"started": 2}])
    assert finished_rounds(config, tmp_path) == ([], True)  # round 1's training run is not there (finished)
    (artifacts / "search" / "x-round1").mkdir(parents=True)
    assert finished_rounds(config, tmp_path) == ([], True)  # there, but unfinished: no manifest
    assert finished_rounds(ExpertIterationConfig(run="x", rounds=3), tmp_path) == ([], False)  # another config
    object.__setattr__(config, "overwrite", True)
    assert finished_rounds(config, tmp_path) == ([], False)  # --overwrite true starts over
