"""The cluster tools against a real SLURM (the one-node cluster of conftest.py): stage runs,
a sweep as a job array, cancel, time limit, requeue with resume, and a 2-task CPU probe.

Jobs are the probe (cluster.probe, a tiny regression model through the stage machinery) made to
train slowly where a test needs a job that is still running (slow_steps.SlowSteps), and one real
stage (pretrain's debug config) for ``make submit``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from cluster.command import StageRun
from cluster.profile import PROFILES_DIR, load_profile
from cluster.submit import SubmitError, submit
from cluster.sweep import expand, load_sweep, run_sweep
from leanloop.artifacts import Manifest, read_manifest
from leanloop.paths import REPO_ROOT

PROFILE = PROFILES_DIR / "slurm_cpu_test.yaml"
HERE = Path(__file__).resolve().parent


@pytest.fixture
def jobs_env(slurm, artifacts, monkeypatch):
    """What the jobs need: this checkout and slow_steps importable, and submitit asking the test
    cluster for states every few seconds (its default backs off to minutes for long jobs)."""
    from submitit.slurm.slurm import SlurmInfoWatcher, SlurmJob

    paths = [str(REPO_ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.setattr(SlurmJob, "watcher", SlurmInfoWatcher(delay_s=3))
    return slurm


def slow_probe(tmp_path: Path, seconds: float, max_steps: int, record: Path | None = None) -> str:
    """A probe config whose steps take ``seconds`` each."""
    config = tmp_path / f"slow_{seconds}_{max_steps}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "trainer": {
                    "max_steps": max_steps,
                    "max_epochs": -1,
                    "enable_progress_bar": False,
                    "callbacks": [
                        {
                            "class_path": "slow_steps.SlowSteps",
                            "init_args": {"seconds": seconds, "record": str(record) if record else None},
                        }
                    ],
                }
            }
        )
    )
    return str(config)


def probe_run(config: str, run: str, **overrides) -> StageRun:
    return StageRun(
        stage="probe", entry="cluster.probe", configs=[config], run=run, overrides={"log.wandb": "false", **overrides}
    )


def wait_until(condition, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout_s} s")
        time.sleep(0.5)


def final_state(cluster, job_id: str) -> str:
    """SLURM's state of a job once it has ended (submitit's result file can come while the job is
    still COMPLETING)."""
    wait_until(lambda: cluster.state(job_id) not in ("PENDING", "RUNNING", "COMPLETING"), f"end of job {job_id}", 30)
    return cluster.state(job_id)


def wait_within(submission, timeout_s: float):
    """``submission.wait()``, failing the test instead of hanging when it never returns."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(submission.wait).result(timeout=timeout_s)
    finally:
        pool.shutdown(wait=False)


def make(*args: str) -> subprocess.CompletedProcess:
    """make with this interpreter's venv, never reinstalling it (its stamp counts as up to date)."""
    venv = sys.prefix
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "-o", f"{venv}/.installed", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_make_submit_runs_a_stage_on_slurm(jobs_env, artifacts):
    done = make(
        "submit",
        "STAGE=pretrain",
        "CONFIG=configs/pretrain/debug.yaml",
        "RUN=on_slurm",
        f"PROFILE={PROFILE.relative_to(REPO_ROOT)}",
        "ARGS=--wait yes --trainer.fast_dev_run true --log.wandb false",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted pretrain/on_slurm to slurm: job " in done.stdout
    job_id = done.stdout.split("to slurm: job ")[1].split()[0]
    run_dir = artifacts / "pretrain" / "on_slurm"
    manifest = read_manifest(run_dir, stage="pretrain")
    assert math.isfinite(manifest["metrics"]["val/loss"]) and manifest["fast_dev_run"] is True
    assert (run_dir / "final" / "config.json").is_file()
    assert json.loads((run_dir / "slurm" / "command.json").read_text())["executor"] == "slurm"
    assert final_state(jobs_env, job_id) == "COMPLETED"  # SLURM ran it, not a local fallback


def test_sweep_is_one_job_array_and_skips_finished_runs(jobs_env, artifacts, tmp_path):
    sweep_file = tmp_path / "lr.yaml"
    sweep_file.write_text(
        yaml.safe_dump(
            {
                "name": "slurm_lr",
                "stage": "probe",
                "entry": "cluster.probe",
                "config": [slow_probe(tmp_path, 0.0, 4)],
                "grid": {"model.lr": [0.01, 0.02, 0.03]},
                "overrides": {"log.wandb": False},
                "executor": "submit",
                "profile": str(PROFILE),
                "metric": "train/loss",
            }
        )
    )
    sweep = load_sweep(sweep_file)
    done_before, *todo = expand(sweep)
    Manifest(stage="probe", run=done_before.name, metrics={"train/loss": 9.0}).write(done_before.stage_run.run_dir)

    statuses = run_sweep(sweep)
    assert [s.status for s in statuses] == ["existing", "finished", "finished"], [s.detail for s in statuses]
    job_ids = [json.loads((r.stage_run.run_dir / "slurm" / "command.json").read_text())["job_ids"][0] for r in todo]
    array_ids = {job_id.split("_")[0] for job_id in job_ids}
    assert len(array_ids) == 1 and sorted(j.split("_")[1] for j in job_ids) == ["0", "1"], job_ids
    for run in todo:
        assert read_manifest(run.stage_run.run_dir, stage="probe")["counts"]["global_step"] == 4
    assert read_manifest(done_before.stage_run.run_dir)["metrics"] == {"train/loss": 9.0}  # not rerun

    jobs_before = sorted(jobs_env.run("squeue", "--states=all", "-h", "-o", "%i").split())  # squeue's order varies
    again = run_sweep(sweep)
    assert [s.status for s in again] == ["existing"] * 3
    assert sorted(jobs_env.run("squeue", "--states=all", "-h", "-o", "%i").split()) == jobs_before  # nothing submitted


def test_a_cancelled_job_is_reported_as_cancelled(jobs_env, artifacts, tmp_path):
    submission = submit(probe_run(slow_probe(tmp_path, 0.5, 10_000), "cancelled"), load_profile(PROFILE))
    job_id = submission.job_ids[0]
    wait_until(lambda: jobs_env.state(job_id) == "RUNNING", "running job")
    jobs_env.run("scancel", job_id)
    with pytest.raises(SubmitError, match=rf"job {job_id} was cancelled \(CANCELLED\)") as failure:
        wait_within(submission, 40)
    assert str(submission.jobs[0].paths.stdout) in str(failure.value)
    assert not (artifacts / "probe" / "cancelled" / "manifest.json").exists()


def test_a_job_at_its_time_limit_is_reported_as_killed_at_it(jobs_env, artifacts, tmp_path):
    """submitit asks SLURM for a warning signal 90 s before the limit (``--signal=USR2@90``): with a
    1-minute limit that comes at slurmctld's first check (<= 30 s), and submitit ends the job itself,
    which SLURM then records as FAILED. The report still says what happened: the time limit."""
    profile = load_profile(PROFILE, time_min=1)
    submission = submit(probe_run(slow_probe(tmp_path, 0.5, 10_000), "too_long"), profile)
    assert "--signal=USR2@90" in submission.jobs[0].paths.submission_file.read_text()
    with pytest.raises(SubmitError, match=r"was killed at its time limit \(1 min; .*\(TIMEOUT\) \(submitit stopped"):
        wait_within(submission, 90)
    assert final_state(jobs_env, submission.job_ids[0]) == "FAILED"
    assert not (artifacts / "probe" / "too_long" / "manifest.json").exists()


@pytest.mark.slow  # a 60-step run requeued mid-run and resumed (35 s): the kill-and-rerun tier
def test_a_requeued_job_resumes_from_its_last_step_checkpoint(jobs_env, artifacts, tmp_path):
    starts = tmp_path / "starts.txt"
    run = probe_run(slow_probe(tmp_path, 0.1, 60, record=starts), "preempted", checkpoint_every_n_steps="10")
    submission = submit(run, load_profile(PROFILE))
    wait_until(lambda: (run.run_dir / "step-000010" / "lightning.ckpt").is_file(), "first checkpoint")
    jobs_env.run("scontrol", "requeue", submission.job_ids[0])  # what preemption with requeue does

    manifest = wait_within(submission, 90)
    assert manifest["counts"]["global_step"] == 60
    first, resumed = (int(line) for line in starts.read_text().split())
    assert first == 0 and resumed >= 10 and resumed % 10 == 0  # not from 0: from a step-N folder
    resumed_from = yaml.safe_load((run.run_dir / "config.yaml").read_text())["ckpt_path"]
    assert resumed_from == str(run.run_dir / f"step-{resumed:06d}" / "lightning.ckpt")


def test_make_probe_trains_two_cpu_ranks_as_two_slurm_tasks(jobs_env, artifacts):
    done = make("probe", "STRATEGY=ddp_cpu", f"PROFILE={PROFILE.relative_to(REPO_ROOT)}", "ARGS=--wait yes")
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = artifacts / "probe" / "ddp_cpu"
    report = read_manifest(run_dir, stage="probe")["counts"]["probe"]
    assert report["world_size"] == 2 and report["samples_per_rank"] == [32, 32]
    assert report["max_param_spread"] == 0.0 and report["param_change"] > 0
    assert report["samples_seen_by_several_ranks"] == 0
    job_id = json.loads((run_dir / "slurm" / "command.json").read_text())["job_ids"][0]
    assert sorted(p.name for p in (run_dir / "slurm").glob(f"{job_id}_*_log.out")) == [
        f"{job_id}_0_log.out",
        f"{job_id}_1_log.out",
    ]  # two SLURM tasks, one per rank
