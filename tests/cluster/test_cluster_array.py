"""``make data ARRAY=N`` (``python -m cluster.array``): the corpus build of the embedded default as
a job array of shards plus a merge job, as local processes (configs/cluster/local.yaml) and on the
real one-node SLURM of conftest.py. The merged run is the one-process corpus byte for byte; an
interrupted shard is the only one submitted again and resumes from its journal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cluster.array import ArrayConfig, main as array_main, shard_states
from leanloop.tool import parse_stage_tool
from cluster.profile import PROFILES_DIR
from data.build import build, parse_config
from leanloop.paths import REPO_ROOT

DEFAULT = "configs/data/default.yaml"


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The default corpus built by one process (the reference every array must reproduce)."""
    root = tmp_path_factory.mktemp("one_process")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root))
        build(parse_config(["--config", str(REPO_ROOT / DEFAULT), "--run", "one"]), progress=False, quiet=True)
    return root / "data" / "one"


def interrupt(shard: Path) -> int:
    """Leave a shard as a killed task leaves it: half its journal, no corpus, no manifest."""
    lines = (shard / "journal.jsonl").read_text().splitlines(keepends=True)
    keep = len(lines) // 2
    (shard / "journal.jsonl").write_text("".join(lines[:keep]))
    (shard / "manifest.json").unlink()
    shutil.rmtree(shard / "final")
    return keep - 1  # the first line is the journal's fingerprint


def test_local_array_merges_into_the_one_process_corpus(one_process, artifacts, capsys, assert_same_data_run):
    args = [
        "--stage",
        "data",
        "--config",
        DEFAULT,
        "--run",
        "arr",
        "--array",
        "2",
        "--profile",
        str(PROFILES_DIR / "local.yaml"),
    ]
    assert array_main(args) == 0
    run = artifacts / "data" / "arr"
    assert_same_data_run(run, one_process)
    status = shard_states("data", run)
    assert status["summary"] == {"done": 2} and status["merged"]
    assert status["programs"] == json.loads((one_process / "manifest.json").read_text())["metrics"]["verified_now"]

    resumed = interrupt(run / "shards" / "1-of-2")
    (run / "manifest.json").unlink()
    capsys.readouterr()
    assert array_main(args) == 0
    assert "shards 1;" in capsys.readouterr().out  # only the interrupted shard ran again
    assert json.loads((run / "shards" / "1-of-2" / "manifest.json").read_text())["metrics"]["resumed"] == resumed
    assert_same_data_run(run, one_process)

    assert array_main(["--status", "true", "--run", "data/arr"]) == 0
    assert "2 shards, 2 done" in capsys.readouterr().out


def test_the_tools_options_and_the_stages(artifacts, capsys):
    """cluster.array's own options (its ArrayConfig, through leanloop.tool.parse_config) and the rest, the
    stage's --config files included, for every shard in the order given; a mistake is one line and exit 2."""
    own, configs, stage = parse_stage_tool(
        ArrayConfig,
        [
            "--stage",
            "data",
            "--config",
            DEFAULT,
            "--timeout",
            "9",
            "--config=b.yaml",
            "--array=2",
            "--backend.kind",
            "replay",
            "--wait",
            "no",
        ],
    )
    assert (own.stage, own.array, own.wait) == ("data", 2, "no")
    assert configs == [DEFAULT, "b.yaml"] and stage == ["--timeout", "9", "--backend.kind", "replay"]
    with pytest.raises(SystemExit) as exit_:
        array_main(["--stage", "data", "--config", DEFAULT, "--array", "2", "--wait", "maybe"])
    assert exit_.value.code == 2 and "Expected a typing.Literal" in capsys.readouterr().err
    assert array_main(["--stage", "data", "--config", DEFAULT]) == 2
    assert capsys.readouterr().err.strip() == (
        "array: name --stage, --config and --array N (make data ARRAY=N [CONFIG=...] [PROFILE=...])"
    )
    assert array_main(["--stage", "lean", "--config", DEFAULT, "--array", "2"]) == 2
    assert "does not run as a job array" in capsys.readouterr().err


@pytest.fixture
def jobs_env(slurm, artifacts, monkeypatch):
    """This checkout importable in the jobs, and submitit polling the test cluster every 2 s."""
    from submitit.slurm.slurm import SlurmInfoWatcher, SlurmJob

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(SlurmJob, "watcher", SlurmInfoWatcher(delay_s=2))
    return slurm


def test_slurm_array_merges_into_the_one_process_corpus_and_reruns_only_a_killed_shard(
    one_process, jobs_env, artifacts, capsys, assert_same_data_run
):
    args = [
        "--stage",
        "data",
        "--config",
        DEFAULT,
        "--run",
        "slurm",
        "--array",
        "4",
        "--profile",
        str(PROFILES_DIR / "slurm_cpu_test.yaml"),
        "--wait",
        "yes",
    ]
    assert array_main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "as 4 shards to slurm: shards 0, 1, 2, 3" in out
    run = artifacts / "data" / "slurm"
    assert_same_data_run(run, one_process)
    record = json.loads((run / "array.json").read_text())
    # one job array (shared job id) and a merge job after it
    assert len({job.split("_")[0] for job in record["jobs"].values()}) == 1
    script = next((run / "slurm").glob("*_submission.sh")).read_text()
    assert "#SBATCH --requeue" in script and "#SBATCH --array=0-3" in script
    assert "afterany:" in "".join(path.read_text() for path in (run / "slurm").glob("*_submission.sh"))

    resumed = interrupt(run / "shards" / "2-of-4")
    (run / "manifest.json").unlink()
    assert array_main(args) == 0, capsys.readouterr().err
    assert "shards 2;" in capsys.readouterr().out
    assert json.loads((run / "shards" / "2-of-4" / "manifest.json").read_text())["metrics"]["resumed"] == resumed
    assert_same_data_run(run, one_process)
    assert shard_states("data", run)["summary"] == {"done": 4}


def test_failed_shards_are_reported_and_shown_failed(artifacts, capsys):
    """Both shards fail (a timeout that is not a number): the array says which, with their error line,
    the merge refuses, and ``make status`` shows the shards failed."""
    args = [
        "--stage",
        "data",
        "--config",
        DEFAULT,
        "--run",
        "bad",
        "--array",
        "2",
        "--profile",
        str(PROFILES_DIR / "local.yaml"),
        "--timeout",
        "soon",
    ]
    assert array_main(args) == 1
    err = capsys.readouterr().err
    assert "shard 0/2 (job" in err and "shard 1/2 (job" in err and "merge (job" in err
    assert "resubmit the same command" in err
    status = shard_states("data", artifacts / "data" / "bad")
    assert status["summary"] == {"failed": 2} and not status["merged"]


def test_slurm_sample_array_is_the_one_process_sample(jobs_env, artifacts, tmp_path, capsys):
    """``make sft-sample ARRAY=2`` on SLURM with a tiny real Qwen3 and fixed seeds: the merge job writes
    the candidates file one process writes."""
    import torch
    import yaml

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from sft.sample import main as sample_main, sample_dir

    prover = tmp_path / "tiny_prover"
    torch.manual_seed(0)
    tokenizer = load_tokenizer(ModelSpec(name="qwen3-tiny"))
    load_model(ModelSpec(name="qwen3-tiny"), tokenizer=tokenizer).save_pretrained(prover)
    tokenizer.save_pretrained(prover)
    config = tmp_path / "sample.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {"name": str(prover)},
                "statements": {"path": "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl", "limit": 4},
                "sampling": {"k": 2, "max_new_tokens": 4},
                "generation": {"threads": 1},
            }
        )
    )
    assert sample_main(["--config", str(config), "--run", "one"]) == 0
    assert (
        array_main(
            [
                "--stage",
                "sft_sample",
                "--config",
                str(config),
                "--run",
                "slurm",
                "--array",
                "2",
                "--profile",
                str(PROFILES_DIR / "slurm_cpu_test.yaml"),
                "--wait",
                "yes",
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert "as 2 shards to slurm" in capsys.readouterr().out
    merged = sample_dir("slurm") / "final" / "candidates.jsonl"
    assert merged.read_bytes() == (sample_dir("one") / "final" / "candidates.jsonl").read_bytes()
    assert shard_states("sft_sample", sample_dir("slurm"))["summary"] == {"done": 2}


def test_slurm_classify_array_is_the_one_process_scores(
    jobs_env, trained_runs, real_programs, artifacts, tmp_path, capsys
):
    """``make classifiers-score ARRAY=2`` on SLURM with a tiny trained classifier on real RL-Lean programs: the
    merge job writes the score file one process writes (``batch_size: 1``; ``time_s`` is each run's own)."""
    from classifiers.score import main as score_main

    def scores(run: str) -> list[dict]:
        path = artifacts / "classifiers_score" / run / "final" / "scores.jsonl"
        return [{k: v for k, v in json.loads(line).items() if k != "time_s"} for line in path.read_text().splitlines()]

    programs = tmp_path / "programs.jsonl"
    programs.write_text("".join(json.dumps({"name": n, "program": p}) + "\n" for n, p, _ in real_programs[:12]))
    config = tmp_path / "classify.yaml"
    config.write_text(
        json.dumps(
            {"model": str(trained_runs["encoder"].run_dir / "final"), "inputs": [str(programs)], "batch_size": 1}
        )
    )
    assert score_main(["--config", str(config), "--run", "one"]) == 0
    assert (
        array_main(
            [
                "--stage",
                "classifiers_score",
                "--config",
                str(config),
                "--run",
                "slurm",
                "--array",
                "2",
                "--profile",
                str(PROFILES_DIR / "slurm_cpu_test.yaml"),
                "--wait",
                "yes",
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert "as 2 shards to slurm: shards 0, 1" in capsys.readouterr().out
    assert scores("slurm") == scores("one") and len(scores("one")) == 12
    status = shard_states("classifiers_score", artifacts / "classifiers_score" / "slurm")
    assert status["summary"] == {"done": 2} and status["programs"] == 12 and status["merged"]
