"""The feedback model labelling at scale (``make classifiers-score`` with ``feedback:``): greedy traces of a tiny
saved feedback model for real RL-Lean programs, in shards by the programs' keys and merged, are the
traces and verdicts one process writes, row for row in input order."""

from __future__ import annotations

import json

from classifiers.score import main as score_main

# each run measures its own time per program
VOLATILE = ("time_s",)


def rows(path):
    return [{k: v for k, v in json.loads(line).items() if k not in VOLATILE} for line in path.read_text().splitlines()]


def test_feedback_traces_in_shards_merge_into_the_one_process_traces(
    saved_feedback_model, real_programs, artifacts, tmp_path
):
    programs = tmp_path / "programs.jsonl"
    programs.write_text("".join(json.dumps({"name": n, "program": p}) + "\n" for n, p, _ in real_programs[:6]))
    config = tmp_path / "label.yaml"
    config.write_text(
        json.dumps(
            {
                "model": str(saved_feedback_model),
                "inputs": [str(programs)],
                "feedback": {"generation": {"max_new_tokens": 8, "max_input_tokens": 1024}},
            }
        )
    )
    assert score_main(["--config", str(config), "--run", "one"]) == 0
    one = rows(artifacts / "classifiers_score" / "one" / "final" / "scores.jsonl")
    assert [r["line"] for r in one] == list(range(1, 7))
    # every program judged by a generated trace (8 tokens: a truncated trace, so invalid by the output limit)
    assert all(isinstance(r["trace"], str) and r["reason"] for r in one)
    assert {r["verdict"] for r in one} == {False} and {r["reason"] for r in one} == {"output_limit"}

    for index in range(3):
        assert score_main(["--config", str(config), "--run", "three", "--shard", f"{index}/3"]) == 0
    sizes = [
        len(rows(artifacts / "classifiers_score" / "three" / "shards" / f"{i}-of-3" / "final" / "scores.jsonl"))
        for i in range(3)
    ]
    assert sum(sizes) == 6
    assert score_main(["--config", str(config), "--run", "three", "--merge_shards", "3"]) == 0
    assert rows(artifacts / "classifiers_score" / "three" / "final" / "scores.jsonl") == one
    merged, single = (
        json.loads((artifacts / "classifiers_score" / run / "manifest.json").read_text()) for run in ("three", "one")
    )
    assert merged["counts"] == single["counts"] and merged["inputs"] == single["inputs"]

    # without --run, `leanloop classify --feedback` prints the same rows (it once loaded a classifier instead)
    from leanloop.cli import main as leanloop_main

    out = tmp_path / "printed.jsonl"
    assert leanloop_main(["classify", "--config", str(config), "--out", str(out)]) == 0
    assert [{k: r[k] for k in ("line", "trace", "reason", "verdict")} for r in rows(out)] == [
        {k: r[k] for k in ("line", "trace", "reason", "verdict")} for r in one
    ]


def test_the_shipped_feedback_labelling_config_parses():
    from classifiers.score import ScoreConfig
    from leanloop.paths import REPO_ROOT
    from leanloop.tool import parse_config

    config, _ = parse_config(ScoreConfig, ["--config", str(REPO_ROOT / "configs/classifiers/score/feedback.yaml")])
    assert config.model == "artifacts://feedback_model/default" and set(config.feedback) == {"generation"}
