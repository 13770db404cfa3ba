"""`leanloop classify --model <run>/final PROGRAMS...`: .lean files and JSONL in, one JSON line per
program out, the same scores as the Evaluator API, clear errors on bad input."""

from __future__ import annotations

import json

import pytest

from classifiers.evaluator import ClassifierEvaluator
from leanloop.cli import main


def test_classify_lean_and_jsonl_inputs(trained_runs, real_programs, tmp_path, capsys):
    final = trained_runs["encoder"].run_dir / "final"
    lean = tmp_path / "one.lean"
    lean.write_text(real_programs[0][1], encoding="utf-8")
    jsonl = tmp_path / "many.jsonl"
    with open(jsonl, "w", encoding="utf-8") as handle:
        for name, program, _ in real_programs[1:6]:
            handle.write(json.dumps({"name": name, "program": program}) + "\n")
    assert main(["classify", "--model", str(final), str(lean), str(jsonl)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r.get("name") for r in rows] == [None] + [n for n, _, _ in real_programs[1:6]]
    assert rows[0]["input"] == str(lean) and rows[1]["line"] == 1
    expected = ClassifierEvaluator.load(final).score([p for _, p, _ in real_programs[:6]])
    assert [r["score"] for r in rows] == pytest.approx([p.score for p in expected], abs=1e-6)
    assert all(r["verdict"] == (r["score"] >= r["threshold"]) for r in rows)


def test_classify_writes_out_file_and_honours_threshold(trained_runs, real_programs, tmp_path):
    final = trained_runs["onetoken"].run_dir / "final"
    lean = tmp_path / "p.lean"
    lean.write_text(real_programs[3][1], encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    assert main(["classify", "--model", str(final), str(lean), "--threshold", "1.01", "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["threshold"] == 1.01 and row["verdict"] is False and 0.0 <= row["score"] <= 1.0


def test_classify_rejects_rows_without_a_program(trained_runs, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"code": "theorem x : True := trivial"}) + "\n")
    with pytest.raises(ValueError, match=f"{bad}:1 has no program in field 'program'"):
        main(["classify", "--model", str(trained_runs["encoder"].run_dir / "final"), str(bad)])


def test_classify_checks_its_model_first_and_reads_corpus_parquet(
    trained_runs, real_programs, artifacts, tmp_path, capsys
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from leanloop.tool import cli_entry

    corpus = tmp_path / "corpus.parquet"  # the columns make classifiers-score reads from a data run's final/
    pq.write_table(
        pa.table(
            {
                "id": [f"i{k}" for k in range(3)],
                "name": [n for n, _, _ in real_programs[:3]],
                "program": [p for _, p, _ in real_programs[:3]],
            }
        ),
        corpus,
    )
    assert cli_entry(main, ["classify", "--model", "artifacts://classifiers/nope", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "artifacts://classifiers/nope" in err[0] and "`make classifiers`" in err[0], err
    assert main(["classify", "--model", str(trained_runs["encoder"].run_dir / "final"), str(corpus)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["line"]) for r in rows] == [("i0", 1), ("i1", 2), ("i2", 3)]


def test_classify_with_history_and_known_siblings(trained_runs, real_programs, tmp_path, monkeypatch, capsys):
    """--history: the data run's Lean labels per problem; --known_label_field: judged rows inform the
    rest of their group. Scores are the saved stacker's, reproducible from its coefficients."""
    import shutil

    from classifiers.evidence import Evidence, History
    from classifiers.stacker import FEATURES, Stacker
    from data.build import build, parse_config
    from leanloop.paths import REPO_ROOT

    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    capsys.readouterr()  # the build's own log lines
    final = tmp_path / "final"
    shutil.copytree(trained_runs["encoder"].run_dir / "final", final)
    weights = {"score_logit": 1.0, "history_logit": 1.5, "sibling_logit": 1.0, "neighbour_margin": 2.0}
    stacker = Stacker(coef=[weights.get(f, 0.0) for f in FEATURES], intercept=-0.2, prior_mean=0.4, threshold=0.5)
    stacker.save(final)
    history = History.from_corpus("artifacts://data/debug")
    name = next(n for n, _, _ in real_programs if history.get(n)[1])  # a problem the data run labelled
    rows = [{"name": name, "program": p, "known": None} for n, p, _ in real_programs[:3]]
    rows.append({"name": name, "program": real_programs[3][1], "known": True})
    jsonl = tmp_path / "group.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["classify", "--model", str(final), str(jsonl), "--history", "artifacts://data/debug"]
    assert main(args + ["--known_label_field", "known"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    valid, total = history.get(name)
    assert [r["evidence"]["history"] for r in out] == [[valid, total]] * 4
    assert [r["evidence"]["siblings"] for r in out] == [[1, 1]] * 3 + [[0, 0]]  # never its own sibling
    learned = ClassifierEvaluator.load(final).score([r["program"] for r in rows])
    assert [r["learned_score"] for r in out] == pytest.approx([p.score for p in learned], abs=1e-6)
    evidence = [
        Evidence(tuple(r["evidence"]["history"]), tuple(r["evidence"]["siblings"]), r["evidence"]["neighbour"])
        for r in out
    ]
    expected = stacker.predict([p.score for p in learned], evidence)
    assert [r["score"] for r in out] == pytest.approx(expected.tolist(), abs=1e-6)
    assert all(r["verdict"] == (r["score"] >= 0.5) for r in out)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"name": name, "program": rows[0]["program"], "known": "maybe"}) + "\n")
    with pytest.raises(SystemExit, match="a known label is true/false"):
        main(["classify", "--model", str(final), str(bad), "--known_label_field", "known"])
    (final / "history_stacker.json").unlink()
    with pytest.raises(SystemExit, match="no history stacker"):
        main(args)


def test_classify_takes_the_model_as_a_run_reference_and_refuses_an_unfinished_run(
    trained_runs, real_programs, tmp_path, monkeypatch, capsys
):
    """``--model`` as its help says: ``artifacts://classifiers/<run>``, the bare run name, or the run's
    final/ folder; all score alike. A run whose manifest is gone (unfinished) is one line, exit 2."""
    import shutil

    from leanloop.tool import cli_entry

    run = trained_runs["encoder"].run_dir
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(run.parent.parent))
    lean = tmp_path / "p.lean"
    lean.write_text(real_programs[2][1], encoding="utf-8")
    scores = []
    for ref in (f"artifacts://classifiers/{run.name}", run.name, str(run / "final")):
        assert main(["classify", "--model", ref, str(lean)]) == 0
        scores.append(json.loads(capsys.readouterr().out)["score"])
    assert scores[0] == scores[1] == scores[2]
    unfinished = tmp_path / "artifacts" / "classifiers" / "unfinished"
    shutil.copytree(run, unfinished)
    (unfinished / "manifest.json").unlink()
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    assert cli_entry(main, ["classify", "--model", "artifacts://classifiers/unfinished", str(lean)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unfinished" in err[0]
    with pytest.raises(SystemExit, match="no history stacker"):
        main(
            [
                "classify",
                "--model",
                str(run / "final"),
                str(lean),
                "--history",
                "artifacts://data/x",
                "--feedback",
                "{}",
            ]
        )
