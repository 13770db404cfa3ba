"""Sweep files: typed parsing and validation, expansion, run names, resuming, the summary."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pytest
import yaml

from cluster.sweep import (
    SweepConfig,
    SweepError,
    check_finished,
    expand,
    format_value,
    load_sweep,
    run_name,
    run_sweep,
    short_keys,
)
from cluster.sweep import main as sweep_main
from cluster.sweep_report import SUMMARY_CSV, summarize
from leanloop.artifacts import Manifest, read_manifest
from leanloop.paths import REPO_ROOT

SWEEPS = REPO_ROOT / "configs" / "sweeps"
DEBUG = "configs/pretrain/debug.yaml"


def write_sweep(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def finish(stage_run, metrics: dict, config: dict | None = None) -> None:
    """A finished run as the stage CLI leaves it: resolved config.yaml, then manifest.json."""
    stage_run.run_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (stage_run.run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    Manifest(stage=stage_run.stage, run=stage_run.run, metrics=metrics).write(stage_run.run_dir)


def test_shipped_grid_expands_to_the_cartesian_product_in_file_order():
    sweep = load_sweep(SWEEPS / "pretrain_lr.yaml")
    raw = yaml.safe_load((SWEEPS / "pretrain_lr.yaml").read_text())
    runs = expand(sweep)
    keys = list(raw["grid"])
    expected = [dict(zip(keys, values)) for values in itertools.product(*raw["grid"].values())]
    assert [r.varied for r in runs] == expected
    for run in runs:
        # the fixed overrides reach every run, the varied values override nothing else
        assert run.stage_run.overrides == {**raw["overrides"], **run.varied}
        assert run.stage_run.configs == raw["config"]
        assert run.stage_run.module == "pretrain.train"
    assert len({r.name for r in runs}) == len(runs)


def test_shipped_ablation_list_keeps_names_and_order():
    sweep = load_sweep(SWEEPS / "pretrain_ablation.yaml")
    raw = yaml.safe_load((SWEEPS / "pretrain_ablation.yaml").read_text())
    runs = expand(sweep)
    assert [r.name for r in runs] == [f"{raw['name']}__{entry['name']}" for entry in raw["runs"]]
    assert [r.varied for r in runs] == [entry.get("overrides", {}) for entry in raw["runs"]]


def test_grid_of_two_options_and_names_are_deterministic(tmp_path):
    path = write_sweep(
        tmp_path,
        {
            "name": "lrwd",
            "stage": "pretrain",
            "config": [DEBUG],
            "grid": {"model.optim.lr": [1e-4, 3e-4], "model.optim.weight_decay": [0.0, 0.1, 0.01]},
        },
    )
    first = [r.name for r in expand(load_sweep(path))]
    second = [r.name for r in expand(load_sweep(path))]
    assert first == second and len(first) == 6 == len(set(first))
    assert first[0] == "lrwd__lr=0.0001__weight_decay=0.0"
    # the value in the name is exact, so 0.1 and 0.01 never collapse into one run
    assert "lrwd__lr=0.0003__weight_decay=0.01" in first and "lrwd__lr=0.0003__weight_decay=0.1" in first


def test_commands_are_the_stage_entry_point_with_typed_values(tmp_path):
    path = write_sweep(
        tmp_path,
        {
            "name": "cmd",
            "stage": "pretrain",
            "config": [DEBUG, "configs/strategy/ddp_cpu.yaml"],
            "overrides": {"log.wandb": False},
            "grid": {"data.corpus.text_dirs": [["a", "b"]]},
        },
    )
    (run,) = expand(load_sweep(path))
    argv = run.stage_run.argv()
    assert argv[1:3] == ["-m", "pretrain.train"]
    assert argv[3:7] == ["--config", DEBUG, "--config", "configs/strategy/ddp_cpu.yaml"]
    assert argv[argv.index("--run") + 1] == run.name
    assert argv[argv.index("--log.wandb") + 1] == "false"
    assert json.loads(argv[argv.index("--data.corpus.text_dirs") + 1]) == ["a", "b"]


def test_short_keys_grow_until_unique_and_long_names_are_hashed():
    assert short_keys(["model.optim.lr", "data.lr", "trainer.max_steps"]) == {
        "model.optim.lr": "optim.lr",
        "data.lr": "data.lr",
        "trainer.max_steps": "max_steps",
    }
    assert format_value("configs/x y.yaml") == "configs-x-y.yaml"
    assert [format_value(v) for v in (1, -1, -0.5, "-x/")] == ["1", "-1", "-0.5", "-x"]  # signs kept
    assert run_name("s", {"model.seed": -1}) == "s__seed=-1" != run_name("s", {"model.seed": 1})
    long_a = run_name("s", {"data.corpus.text_dirs": ["x" * 200, "a"]})
    long_b = run_name("s", {"data.corpus.text_dirs": ["x" * 200, "b"]})
    assert len(long_a) <= 120 and len(long_b) <= 120 and long_a != long_b


@pytest.mark.parametrize(
    "change, message",
    [
        ({"runs": [{"name": "a"}]}, "exactly one of 'grid'"),
        ({"grid": {}}, "'grid' is empty"),
        ({"grid": {"model.optim.lr": []}}, "non-empty list"),
        ({"grid": {"model.optim.lr": [1.0, 1.0]}}, "repeats a value"),
        ({"grid": {"model optim": [1]}}, "dotted option name"),
        ({"grid": {"run": ["x"]}}, "set by the cluster tools"),
        ({"stage": "nosuchstage"}, "no module 'nosuchstage.train'"),
        ({"config": ["configs/pretrain/missing.yaml"]}, "not found"),
        ({"overrides": {"model.optim.lr": 1.0}}, "both in 'grid' and in 'overrides'"),
        ({"mode": "avg"}, "mode"),
        ({"name": "bad/name"}, "letters, digits"),
        ({"profile": "configs/cluster/gpu1.yaml"}, "only applies to executor: submit"),
    ],
)
def test_bad_sweep_files_fail_with_a_message_naming_the_problem(tmp_path, change, message):
    body = {"name": "bad", "stage": "pretrain", "config": [DEBUG], "grid": {"model.optim.lr": [1e-3]}}
    body.update(change)
    with pytest.raises(SweepError, match="sweep file .*sweep.yaml") as error:
        load_sweep(write_sweep(tmp_path, body))
    assert message in str(error.value)


def test_list_entries_that_would_share_a_name_are_refused(tmp_path):
    path = write_sweep(
        tmp_path,
        {
            "name": "dup",
            "stage": "pretrain",
            "config": [DEBUG],
            "runs": [
                {"name": "same", "overrides": {"model.optim.lr": 1.0}},
                {"name": "same", "overrides": {"model.optim.lr": 2.0}},
            ],
        },
    )
    with pytest.raises(SweepError, match="share a name"):
        expand(load_sweep(path))


def test_finished_runs_are_skipped_and_only_the_rest_are_run(tmp_path, artifacts, capsys):
    path = write_sweep(
        tmp_path,
        {"name": "resume", "stage": "pretrain", "config": [DEBUG], "grid": {"model.optim.lr": [1e-4, 3e-4, 1e-3]}},
    )
    sweep = load_sweep(path)
    runs = expand(sweep)
    finish(runs[1].stage_run, {"val/loss": 2.0}, {"model": {"optim": {"lr": 3e-4}}})
    statuses = run_sweep(sweep, dry_run=True)
    assert [s.status for s in statuses] == ["pending", "existing", "pending"]
    printed = capsys.readouterr().out
    assert "1 already finished, 2 to run" in printed
    # the dry run lists exactly the commands of the unfinished runs
    assert f"--run {runs[0].name}" in printed and f"--run {runs[2].name}" in printed
    assert f"--run {runs[1].name}" not in printed


def test_a_fast_dev_run_leftover_is_replaced_not_reported(tmp_path, artifacts, capsys):
    path = write_sweep(
        tmp_path, {"name": "smoke", "stage": "pretrain", "config": [DEBUG], "runs": [{"name": "a"}, {"name": "b"}]}
    )
    sweep = load_sweep(path)
    a, b = expand(sweep)
    Manifest(stage="pretrain", run=a.name, extra={"fast_dev_run": True}).write(a.stage_run.run_dir)
    Manifest(stage="pretrain", run=b.name, extra={"fast_dev_run": False}).write(b.stage_run.run_dir)
    statuses = run_sweep(sweep, dry_run=True)
    assert [s.status for s in statuses] == ["pending", "existing"]
    assert f"--run {a.name} --overwrite true" in capsys.readouterr().out  # the stage would refuse otherwise


def test_a_finished_run_with_other_values_is_not_silently_reused(tmp_path, artifacts):
    path = write_sweep(
        tmp_path,
        {
            "name": "stale",
            "stage": "pretrain",
            "config": [DEBUG],
            "overrides": {"trainer.max_steps": 8},
            "runs": [{"name": "base"}],
        },
    )
    (run,) = expand(load_sweep(path))
    finish(run.stage_run, {"val/loss": 1.0}, {"trainer": {"max_steps": 4}})
    with pytest.raises(SweepError, match="max_steps=4 but the sweep asks for 8"):
        check_finished(run)
    finish(run.stage_run, {"val/loss": 1.0}, {"trainer": {"max_steps": 8}})
    check_finished(run)  # same values: reusable


def test_summary_reads_metrics_from_manifests_and_marks_the_best(tmp_path, artifacts):
    path = write_sweep(
        tmp_path,
        {
            "name": "summ",
            "stage": "pretrain",
            "config": [DEBUG],
            "grid": {"model.optim.lr": [1e-4, 3e-4, 1e-3]},
            "metric": "val/loss",
            "mode": "min",
        },
    )
    sweep: SweepConfig = load_sweep(path)
    runs = expand(sweep)
    losses = {runs[0].name: 3.5, runs[1].name: 2.25, runs[2].name: 2.75}
    for run in runs[:2]:
        finish(run.stage_run, {"val/loss": losses[run.name], "train/loss": losses[run.name] + 1})
    statuses = run_sweep(sweep, dry_run=True)
    partial = summarize(sweep, statuses)
    assert partial.manifest_path is None  # one run is missing: the sweep is not finished
    assert partial.best == runs[1].name

    finish(runs[2].stage_run, {"val/loss": losses[runs[2].name], "train/loss": 0.5})
    statuses = run_sweep(sweep, dry_run=True)
    summary = summarize(sweep, statuses)
    with open(summary.csv_path) as handle:
        rows = list(csv.DictReader(handle))
    assert summary.csv_path.name == SUMMARY_CSV
    assert [r["run"] for r in rows] == [r.name for r in runs]
    assert {r["run"]: float(r["val/loss"]) for r in rows} == losses
    assert [float(r["lr"]) for r in rows] == [1e-4, 3e-4, 1e-3]
    assert summary.best == min(losses, key=losses.get)
    assert f"{summary.best} *" in summary.table
    assert summary.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = read_manifest(summary.manifest_path.parent, stage="sweeps")
    assert set(manifest["inputs"]) == set(losses)  # each run's manifest, hashed
    assert manifest["metrics"]["best_value"] == losses[summary.best]
    assert manifest["best_run"] == summary.best

    # mode max picks the other end
    sweep.mode = "max"
    assert summarize(sweep, statuses).best == max(losses, key=losses.get)


def test_summary_only_command_prints_the_table_of_what_finished(tmp_path, artifacts, capsys):
    path = write_sweep(
        tmp_path, {"name": "cli", "stage": "pretrain", "config": [DEBUG], "grid": {"model.optim.lr": [1e-4, 3e-4]}}
    )
    first, second = expand(load_sweep(path))
    finish(first.stage_run, {"val/loss": 1.5})
    assert sweep_main(["--sweep", str(path), "--summary_only", "true"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("cli__")]
    assert lines[0].split()[:3] == [first.name, "*", "existing"] and "1.5" in lines[0].split()
    assert lines[1].split()[:2] == [second.name, "pending"]
    assert (artifacts / "sweeps" / "cli" / SUMMARY_CSV).is_file()


def test_submitting_a_sweep_refuses_the_runs_their_memory_plan_does_not_fit(tmp_path, artifacts, capsys):
    """Sweeps submit through the same memory check: runs that need more than the profile's
    gpu_memory_gb are not submitted, each says why with its number; nothing is started."""
    import re

    path = write_sweep(
        tmp_path,
        {
            "name": "toolong",
            "stage": "sft",
            "config": ["configs/sft/paper.yaml"],
            "grid": {"data.max_length": [131072, 262144]},
        },
    )
    statuses = run_sweep(load_sweep(path), executor="submit", profile="configs/cluster/gpu8.yaml", wait=False)
    assert [s.status for s in statuses] == ["failed", "failed"]
    # one by one (a local executor) each run names its own need; as a SLURM array the refusal names both
    needs = {float(n) for s in statuses for n in re.findall(r"needs (\d+\.\d) GB per GPU", s.detail)}
    assert len(needs) == 2 and min(needs) > 80
    assert not any(s.run.stage_run.run_dir.joinpath("manifest.json").exists() for s in statuses)
