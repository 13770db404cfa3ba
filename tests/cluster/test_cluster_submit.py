"""Cluster profiles, the SLURM script submitit would submit, and a real stage run end to end
through submitit's local executor inside a resumable sweep."""

from __future__ import annotations

import csv
import json
import math
import os
import stat
import subprocess
import re
import sys
from pathlib import Path

import pytest
import yaml

from cluster.command import CommandError, StageCommand, StageRun, parse_cli_overrides
from cluster.profile import PROFILES_DIR, ProfileError, load_profile
from cluster.submit import SubmitError, distributed_overrides, main as submit_main, sbatch_preview
from cluster.sweep import expand, load_sweep, run_sweep
from cluster.sweep_report import summarize
from leanloop.artifacts import Manifest, read_manifest

DEBUG = "configs/pretrain/debug.yaml"


@pytest.fixture
def srun_on_path(tmp_path, monkeypatch):
    """submitit picks its SLURM executor when ``srun`` is on PATH. This one is never executed: it
    only lets submitit render the real batch script on a machine without SLURM."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\necho 'not a SLURM cluster' >&2\nexit 1\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_every_shipped_profile_loads_and_validates():
    profiles = sorted(PROFILES_DIR.glob("*.yaml"))
    assert {p.stem for p in profiles} >= {"local", "gpu1", "gpu8", "gpu8x2", "array8", "slurm_cpu_test"}
    for path in profiles:
        raw = yaml.safe_load(path.read_text())
        profile = load_profile(path)
        for key, value in raw.items():
            assert getattr(profile, key) == value, (path.name, key)


def test_shipped_profiles_use_the_current_nccl_variable_names():
    """torch 2.2 renamed the process group's NCCL variables to TORCH_NCCL_* (the old names are read
    with a deprecation warning and may go)."""
    renamed = {"NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG", "NCCL_ENABLE_TIMING"}
    envs = {path.name: load_profile(path).env for path in PROFILES_DIR.glob("*.yaml")}
    assert envs["gpu8x2.yaml"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert not {name: sorted(set(env) & renamed) for name, env in envs.items() if set(env) & renamed}


def test_multinode_profile_gives_one_task_per_gpu_and_matching_trainer_options():
    profile = load_profile(PROFILES_DIR / "gpu8x2.yaml")
    assert profile.tasks_per_node() == profile.gpus_per_node == 8
    assert profile.trainer_overrides() == {"trainer.accelerator": "gpu", "trainer.devices": 8, "trainer.num_nodes": 2}
    local = load_profile(PROFILES_DIR / "local.yaml")
    assert local.tasks_per_node() == 1 and local.trainer_overrides() == {}
    sharded = load_profile(PROFILES_DIR / "array8.yaml")
    assert (
        sharded.tasks_per_node(cpu_processes=2) == 1 and sharded.trainer_overrides() == {}
    )  # shards use GPUs themselves


def test_an_array_task_names_its_shard_on_the_command_line():
    command = StageCommand(argv=["python", "-m", "sft.sample", "--run", "r"], run_dir="r", shard_count=8)
    assert command.command() == ["python", "-m", "sft.sample", "--run", "r"]
    assert command.command(6)[-2:] == ["--shard", "6/8"]  # the one shard option of every sharded stage


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"nodes": 0}, "nodes must be at least 1"),
        ({"array": 4, "nodes": 2}, "use nodes: 1 with array"),
        ({"nodes": 2, "gpus_per_node": 4, "distributed": False}, "need distributed: true"),
        ({"executor": "kubernetes"}, "executor"),
    ],
)
def test_bad_profiles_fail_clearly(changes, message):
    with pytest.raises(ProfileError, match=message):
        load_profile(PROFILES_DIR / "local.yaml", **changes)


def test_missing_profile_lists_the_shipped_ones(tmp_path):
    with pytest.raises(ProfileError, match="gpu8x2.yaml"):
        load_profile(tmp_path / "nope.yaml")


def test_sbatch_script_for_two_nodes_matches_lightnings_slurm_environment(srun_on_path, artifacts):
    profile = load_profile(PROFILES_DIR / "gpu8x2.yaml", partition="gpu", account="proj")
    run = StageRun(stage="pretrain", configs=[DEBUG, "configs/strategy/zero3.yaml"], run="big")
    script = sbatch_preview(run, profile)
    for line in (
        "--nodes=2",
        "--ntasks-per-node=8",
        "--gpus-per-node=8",
        "--partition=gpu",
        "--account=proj",
        "--exclusive",
        "--mem=0GB",
        f"--time={profile.time_min}",
        "--job-name=pretrain-big",
    ):
        assert f"#SBATCH {line}\n" in script, line
    assert "source .venv/bin/activate" in script  # profile setup lines run before srun
    srun_line = next(line for line in script.splitlines() if line.startswith("srun "))
    assert str(artifacts / "pretrain" / "big" / "slurm") in srun_line  # logs beside the run
    argv = run.argv(distributed_overrides(run, profile))
    assert argv[argv.index("--trainer.devices") + 1] == "8"
    assert argv[argv.index("--trainer.num_nodes") + 1] == "2"


def test_overrides_that_contradict_the_allocation_are_refused():
    profile = load_profile(PROFILES_DIR / "gpu8.yaml")
    run = StageRun(stage="pretrain", configs=[DEBUG], run="x", overrides={"trainer.devices": "4"})
    with pytest.raises(SubmitError, match="contradicts the profile"):
        distributed_overrides(run, profile)
    same = StageRun(stage="pretrain", configs=[DEBUG], run="x", overrides={"trainer.devices": "8"})
    assert distributed_overrides(same, profile)["trainer.devices"] == 8


def test_cli_overrides_and_dry_run(artifacts, capsys):
    assert parse_cli_overrides(["--model.optim.lr", "1e-4", "--trainer.max_steps=10"]) == {
        "model.optim.lr": "1e-4",
        "trainer.max_steps": "10",
    }
    with pytest.raises(CommandError, match="has no value"):
        parse_cli_overrides(["--model.optim.lr"])
    with pytest.raises(CommandError, match="expected an option"):
        parse_cli_overrides(["lr", "1"])
    code = submit_main(
        [
            "--stage",
            "pretrain",
            "--config",
            DEBUG,
            "--dry_run",
            "true",
            "--model.optim.lr",
            "1e-4",
            "--profile.time_min",
            "5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    # the run name defaults to the config stem, exactly as the stage CLI would name it
    assert f"python -m pretrain.train --config {DEBUG} --run debug --model.optim.lr 1e-4" in out
    assert submit_main(["--stage", "nosuchstage", "--config", DEBUG, "--dry_run", "true"]) == 2
    assert "no module 'nosuchstage.train'" in capsys.readouterr().err


def test_submit_and_the_stage_name_a_layered_run_by_one_rule(artifacts, capsys):
    """Several config files: the stems joined by '+', each once, from one function
    (leanloop.artifacts.default_run_name) for the stage CLI and the cluster tools alike."""
    from leanloop.artifacts import default_run_name
    from pretrain.train import run

    configs = [DEBUG, "configs/strategy/ddp_cpu.yaml", DEBUG]
    stage = run([arg for config in configs for arg in ("--config", config)] + ["--dry_run", "true"])
    named = yaml.safe_load(stage.config)["run"]
    assert named == default_run_name(configs) == "debug+ddp_cpu"
    capsys.readouterr()
    assert (
        submit_main(["--stage", "pretrain", *[a for c in configs for a in ("--config", c)], "--dry_run", "true"]) == 0
    )
    assert f" --run {named}" in capsys.readouterr().out
    with pytest.raises(CommandError, match="name the run"):
        from cluster.command import default_run_name as cluster_run_name

        cluster_run_name([])


def test_sweep_submits_the_real_stage_through_submitit_and_skips_finished_runs(tmp_path, artifacts):
    sweep_file = tmp_path / "e2e.yaml"
    sweep_file.write_text(
        yaml.safe_dump(
            {
                "name": "e2e",
                "stage": "pretrain",
                "config": [DEBUG],
                "overrides": {"trainer.fast_dev_run": True},
                "runs": [{"name": "earlier"}, {"name": "fresh"}],
                "executor": "submit",
                "profile": str(PROFILES_DIR / "local.yaml"),
                "metric": "val/loss",
            }
        )
    )
    sweep = load_sweep(sweep_file)
    earlier, fresh = expand(sweep)
    Manifest(stage="pretrain", run=earlier.name, metrics={"val/loss": 99.0}).write(earlier.stage_run.run_dir)
    earlier_manifest = (earlier.stage_run.run_dir / "manifest.json").read_text()

    statuses = run_sweep(sweep)
    assert [s.status for s in statuses] == ["existing", "finished"], [s.detail for s in statuses]
    assert (earlier.stage_run.run_dir / "manifest.json").read_text() == earlier_manifest  # not rerun

    run_dir = fresh.stage_run.run_dir
    manifest = read_manifest(run_dir, stage="pretrain")
    assert manifest["run"] == fresh.name and manifest["fast_dev_run"] is True
    assert math.isfinite(manifest["metrics"]["val/loss"])
    assert (run_dir / "final" / "config.json").is_file()  # Hugging Face export of the real stage
    slurm = run_dir / "slurm"
    recorded = json.loads((slurm / "command.json").read_text())
    assert recorded["executor"] == "local" and recorded["argv"] == fresh.stage_run.argv()
    logs = "".join(p.read_text() for p in slurm.glob("*_log.out"))
    assert f"[pretrain] done: {run_dir}" in logs

    summary = summarize(sweep, statuses)
    with open(summary.csv_path) as handle:
        rows = {r["run"]: r for r in csv.DictReader(handle)}
    assert float(rows[earlier.name]["val/loss"]) == 99.0
    assert float(rows[fresh.name]["val/loss"]) == pytest.approx(manifest["metrics"]["val/loss"])
    assert summary.best == fresh.name
    assert Path(summary.manifest_path).is_file()  # both runs finished: the sweep has a manifest


def test_a_distributed_cpu_run_gets_one_slurm_task_per_trainer_device(srun_on_path, artifacts):
    """Lightning under SLURM checks devices against --ntasks-per-node: a CPU profile (no GPUs) takes
    the task count from the strategy's trainer.devices (2 in ddp_cpu), an override included."""
    profile = load_profile(PROFILES_DIR / "slurm_cpu_test.yaml")
    ddp = StageRun(stage="probe", entry="cluster.probe", configs=["configs/strategy/ddp_cpu.yaml"], run="ddp")
    assert ddp.cpu_processes() == 2
    assert "--ntasks-per-node=2" in sbatch_preview(ddp, profile)
    three = StageRun(
        stage="probe",
        entry="cluster.probe",
        configs=["configs/strategy/ddp_cpu.yaml"],
        run="x",
        overrides={"trainer.devices": "3"},
    )
    assert profile.submitit_parameters("x", three.cpu_processes())["tasks_per_node"] == 3
    single = StageRun(stage="pretrain", configs=[DEBUG], run="one")
    assert single.cpu_processes() == 1 and "--ntasks-per-node=1" in sbatch_preview(single, profile)
    # a profile with GPUs keeps one task per GPU whatever the trainer says
    assert load_profile(PROFILES_DIR / "gpu8.yaml").tasks_per_node(cpu_processes=2) == 8


def test_a_failed_job_reports_the_exception_and_where_the_full_log_is(artifacts, capsys):
    """Not the last line of submitit's message (a log path): the stage's own exception, read from
    the job's error log, then the log's path."""
    code = submit_main(
        [
            "--stage",
            "probe",
            "--entry",
            "cluster.probe",
            "--config",
            "configs/strategy/ddp_cpu.yaml",
            "--run",
            "broken",
            "--trainer.devices",
            "1",
            "--log.wandb",
            "false",
            "--ckpt_path",
            "/nonexistent/lightning.ckpt",
            "--wait",
            "yes",
        ]
    )
    assert code == 1
    error = capsys.readouterr().err
    job_line = next(line for line in error.splitlines() if line.strip().startswith("job "))
    reason, _, log = job_line.partition("; full log: ")
    # checked before any work: the stage's one line, not a traceback
    assert "--ckpt_path /nonexistent/lightning.ckpt: no such checkpoint file" in reason, job_line
    log_path = Path(log.split(" (output: ")[0])
    assert log_path.is_file() and "Traceback" in log_path.read_text()


def test_a_requeued_job_resumes_from_the_newest_complete_step_checkpoint(tmp_path, monkeypatch):
    """StageCommand adds --ckpt_path only when SLURM restarted the job (SLURM_RESTART_COUNT), from
    the highest step-NNNNNN folder holding a complete checkpoint (a file, or a ZeRO checkpoint folder
    once DeepSpeed wrote its 'latest'), and never over a finished run."""
    from cluster.command import StageCommand
    from leanloop.artifacts import last_checkpoint

    for step, complete in [(5, True), (100, False)]:  # step-000100 still being written
        (tmp_path / f"step-{step:06d}").mkdir()
        if complete:
            (tmp_path / f"step-{step:06d}" / "lightning.ckpt").write_bytes(b"x")
    (tmp_path / "step-notanumber").mkdir()
    assert last_checkpoint(tmp_path) == tmp_path / "step-000005" / "lightning.ckpt"
    zero = tmp_path / "step-000040" / "lightning.ckpt"  # Lightning's DeepSpeed layout: a folder
    (zero / "checkpoint").mkdir(parents=True)
    (zero / "checkpoint" / "mp_rank_00_model_states.pt").write_bytes(b"x")
    assert last_checkpoint(tmp_path) == tmp_path / "step-000005" / "lightning.ckpt"  # no 'latest' yet: cut off
    (zero / "checkpoint" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"x")
    (zero / "latest").write_text("checkpoint")  # DeepSpeed writes it last
    assert last_checkpoint(tmp_path) == zero

    command = StageCommand(argv=[sys.executable, "-c", "pass", "--run", "r"], run_dir=str(tmp_path))

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    seen = []
    real_run = subprocess.run
    monkeypatch.setattr(
        "cluster.command.subprocess.run", lambda argv, **kw: seen.append(list(argv)) or real_run(argv, **kw)
    )
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    command()
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    command()
    assert "--ckpt_path" not in seen[0]
    assert seen[1][-2:] == ["--ckpt_path", str(tmp_path / "step-000040" / "lightning.ckpt")]
    Manifest(stage="probe", run="r").write(tmp_path)
    command()
    assert "--ckpt_path" not in seen[2]  # a finished run is not resumed


def test_a_task_killed_by_the_time_limit_warning_itself_is_recognized(tmp_path):
    """On a busy node SLURM's warning signal (USR2, 90 s before the limit) can come before submitit
    has installed its handler; srun then logs the task's death by that signal (line seen on the
    test cluster), and the failure is the time limit, not a crash."""
    from cluster.submit import killed_by_warning_signal

    err = tmp_path / "5_0_log.err"
    err.write_text("srun: error: vm: task 0: User defined signal 2\n")
    assert killed_by_warning_signal(err)
    err.write_text("Traceback (most recent call last):\nValueError: boom\n")
    assert not killed_by_warning_signal(err)
    assert not killed_by_warning_signal(tmp_path / "missing.err")


def test_submit_refuses_a_run_its_memory_plan_does_not_fit(artifacts, capsys):
    """On a GPU profile submit plans the run first: the shipped sft paper config (ZeRO-3) fits 80 GB;
    the same config on plain DDP, or on 40 GB GPUs, is refused in one line with the number unless
    --force true."""
    paper = [
        "--stage",
        "sft",
        "--config",
        "configs/sft/paper.yaml",
        "--profile",
        "configs/cluster/gpu8.yaml",
        "--dry_run",
        "true",
    ]
    assert submit_main(paper) == 0
    assert "sft: peak" in capsys.readouterr().out
    assert submit_main([*paper, "--trainer.strategy", "ddp"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.match(r"submit: sft/paper needs \d+\.\d GB per GPU .* gpu_memory_gb 80", error)
    assert submit_main([*paper, "--profile.gpu_memory_gb", "40"]) == 2
    assert "gpu_memory_gb 40" in capsys.readouterr().err
    assert submit_main([*paper, "--trainer.strategy", "ddp", "--force", "true"]) == 0
    assert "DOES NOT FIT" in capsys.readouterr().out
