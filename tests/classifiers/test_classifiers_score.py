"""Scoring as a run, sharded (``leanloop classify --run NAME --shard I/N``, ``make classifiers-score
ARRAY=N``): the merged scores are the one-process scores, row for row in input order, on real
RL-Lean programs with a tiny trained classifier; a missing or mismatched shard is refused in one
line."""

from __future__ import annotations

import json

from classifiers.score import main as score_main
from cluster.array import main as array_main, shard_states
from cluster.profile import PROFILES_DIR
from leanloop.cli import main as cli_main

# each run measures its own time per program
VOLATILE = ("time_s",)


def rows(path):
    return [{k: v for k, v in json.loads(line).items() if k not in VOLATILE} for line in path.read_text().splitlines()]


def test_sharded_scores_merge_into_the_one_process_scores(trained_runs, real_programs, artifacts, tmp_path, capsys):
    final = trained_runs["encoder"].run_dir / "final"
    jsonl = tmp_path / "programs.jsonl"
    with open(jsonl, "w", encoding="utf-8") as handle:
        for name, program, passed in real_programs[:40] + real_programs[:3]:  # three duplicates at the end
            handle.write(json.dumps({"name": name, "program": program, "label": passed}) + "\n")
    common = ["classify", "--model", str(final), str(jsonl), "--batch_size", "1"]
    assert cli_main([*common, "--run", "one"]) == 0
    one = artifacts / "classifiers_score" / "one" / "final" / "scores.jsonl"
    assert len(rows(one)) == 43 and [r["line"] for r in rows(one)] == list(range(1, 44))

    for index in range(4):
        assert cli_main([*common, "--run", "four", "--shard", f"{index}/4"]) == 0
    sizes = [
        len(rows(artifacts / "classifiers_score" / "four" / "shards" / f"{i}-of-4" / "final" / "scores.jsonl"))
        for i in range(4)
    ]
    assert sum(sizes) == 43 and all(sizes)
    merge = [
        "--model",
        str(final),
        "--inputs",
        json.dumps([str(jsonl)]),
        "--run",
        "four",
        "--batch_size",
        "1",
        "--merge_shards",
        "4",
    ]
    assert score_main(merge) == 0
    assert rows(artifacts / "classifiers_score" / "four" / "final" / "scores.jsonl") == rows(one)
    merged, single = (
        json.loads((artifacts / "classifiers_score" / run / "manifest.json").read_text()) for run in ("four", "one")
    )
    assert merged["counts"] == single["counts"] and merged["inputs"] == single["inputs"]

    # refused in one line: a shard missing, a shard scored with another threshold
    (artifacts / "classifiers_score" / "four" / "shards" / "2-of-4" / "manifest.json").unlink()
    capsys.readouterr()
    assert score_main([*merge, "--overwrite", "true"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "shard 2/4 is unfinished" in err
    assert cli_main([*common, "--run", "four", "--shard", "2/4", "--threshold", "0.9"]) == 0
    capsys.readouterr()
    assert score_main([*merge, "--overwrite", "true"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "another config" in err


def test_classify_array_with_the_local_profile(trained_runs, real_programs, artifacts, tmp_path, monkeypatch):
    final = trained_runs["encoder"].run_dir / "final"
    jsonl = tmp_path / "programs.jsonl"
    jsonl.write_text("".join(json.dumps({"name": n, "program": p}) + "\n" for n, p, _ in real_programs[:12]))
    config = tmp_path / "classify.yaml"
    config.write_text(json.dumps({"model": str(final), "inputs": [str(jsonl)], "batch_size": 1}))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert score_main(["--config", str(config), "--run", "one"]) == 0
    assert (
        array_main(
            [
                "--stage",
                "classifiers_score",
                "--config",
                str(config),
                "--run",
                "arr",
                "--array",
                "2",
                "--profile",
                str(PROFILES_DIR / "local.yaml"),
            ]
        )
        == 0
    )
    folder = artifacts / "classifiers_score" / "arr"
    assert rows(folder / "final" / "scores.jsonl") == rows(
        artifacts / "classifiers_score" / "one" / "final" / "scores.jsonl"
    )
    status = shard_states("classifiers_score", folder)
    assert status["summary"] == {"done": 2} and status["programs"] == 12


def test_the_shipped_scoring_config_parses_and_a_shard_needs_a_run(capsys):
    from classifiers.score import ScoreConfig
    from leanloop.paths import REPO_ROOT
    from leanloop.tool import parse_config

    config, _ = parse_config(ScoreConfig, ["--config", str(REPO_ROOT / "configs/classifiers/score/default.yaml")])
    assert config.model == "artifacts://classifiers/encoder_default/final" and config.shard is None
    assert config.inputs == ["artifacts://data/default/final/corpus.parquet"]
    assert cli_main(["classify", "--model", "x", "y.jsonl", "--shard", "0/2"]) == 2
    assert capsys.readouterr().err.strip() == "classify: --shard writes a run: add --run NAME"
    assert score_main(["--config", str(REPO_ROOT / "configs/classifiers/score/default.yaml"), "--shard", "2/2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--shard 2/2" in err
