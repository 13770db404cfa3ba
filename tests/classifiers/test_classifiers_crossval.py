"""classifiers.crossval: theorem-grouped folds of a real data run, and the fold runs against TF-IDF."""

from __future__ import annotations

import json
import shutil

import pytest

from leanloop.paths import REPO_ROOT


@pytest.fixture
def corpus(artifacts, debug_corpus):
    """The real debug data run, copied into this test's own artifacts root (folds land beside it)."""
    shutil.copytree(debug_corpus, artifacts / "data" / "debug")
    return "artifacts://data/debug"


def test_folds_partition_train_and_validation_by_theorem(artifacts, corpus):
    from classifiers.examples import load_labelled
    from classifiers.crossval import fold_runs

    source = load_labelled(corpus).splits
    pooled = {(n, p) for s in ("train", "valid") for n, p in zip(source[s].names, source[s].programs)}
    folds = fold_runs(corpus, 3)
    assert folds == [f"artifacts://data/debug_cv3_fold{i}" for i in range(3)]
    held_theorems = []
    for path in folds:
        splits = load_labelled(path).splits  # load_labelled itself refuses a theorem in train and validation
        assert len(splits["test"]) == 0  # the test split is never read
        held = set(zip(splits["valid"].names, splits["valid"].programs))
        rest = set(zip(splits["train"].names, splits["train"].programs))
        assert held and rest and held | rest == pooled and not held & rest
        held_theorems.append({name for name, _ in held})
    assert sum(len(t) for t in held_theorems) == len(set().union(*held_theorems))  # each theorem held out once

    manifest = json.loads((artifacts / "data/debug_cv3_fold1/manifest.json").read_text())
    assert manifest["stage"] == "data" and manifest["cross_validation"]["fold"] == 1
    assert manifest["inputs"]["corpus"]["path"].endswith("data/debug")

    # built once: a second call reuses the folds; a changed source corpus rebuilds them
    written = (artifacts / "data/debug_cv3_fold0/final/corpus.parquet").stat().st_mtime_ns
    fold_runs(corpus, 3)
    assert (artifacts / "data/debug_cv3_fold0/final/corpus.parquet").stat().st_mtime_ns == written
    source_manifest = artifacts / "data/debug/manifest.json"
    source_manifest.write_text(source_manifest.read_text().replace('"stage"', '"note": "rebuilt",\n  "stage"', 1))
    fold_runs(corpus, 3)
    assert (artifacts / "data/debug_cv3_fold0/final/corpus.parquet").stat().st_mtime_ns != written


def test_fold_errors_are_clear(artifacts, corpus):
    from classifiers.crossval import CrossValError, config_corpus, fold_runs

    with pytest.raises(CrossValError, match="at least 2"):
        fold_runs(corpus, 1)
    with pytest.raises(CrossValError, match="fewer than 500 folds"):
        fold_runs(corpus, 500)
    with pytest.raises(CrossValError, match="data-stage run"):
        fold_runs("shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", 3)
    # debug.yaml reads a JSONL file, not a data run: nothing to fold unless --corpus names one
    with pytest.raises(CrossValError, match="no data.corpus"):
        config_corpus([str(REPO_ROOT / "configs/classifiers/debug.yaml")], {})
    layered = [
        str(REPO_ROOT / "configs/classifiers/encoder_default.yaml"),
        str(REPO_ROOT / "configs/classifiers/debug.yaml"),
    ]
    assert config_corpus(layered[:1], {}) == "artifacts://data/default"
    assert config_corpus(layered, {"data.corpus": "artifacts://data/x"}) == "artifacts://data/x"


def test_crossval_runs_every_fold_and_compares_with_tfidf(artifacts, corpus, capsys):
    from classifiers.baselines import TfidfBaseline
    from classifiers.examples import load_labelled
    from classifiers.crossval import main
    from leanloop.metrics import auroc

    argv = [
        "--config",
        str(REPO_ROOT / "configs/classifiers/debug.yaml"),
        "--corpus",
        corpus,
        "--folds",
        "2",
        "--overrides",
        '{"trainer.max_steps": 2, "log.csv": false}',
    ]
    assert main(argv) == 0
    folder = artifacts / "sweeps/cv2_debug"
    summary = json.loads((folder / "crossval.json").read_text())
    assert summary["finished"] == 2 and (folder / "crossval.png").is_file()
    pooled_labels, pooled_tfidf = [], []
    for fold in summary["folds"]:
        run_dir = artifacts / "classifiers" / fold["run"]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["inputs"]["corpus"]["path"].endswith(f"data/debug_cv2_fold{fold['fold']}")
        assert fold["classifier"] == pytest.approx(manifest["metrics"]["val/auroc"])
        assert not [k for k in manifest["metrics"] if k.startswith("test/")]  # test untouched
        splits = load_labelled(f"artifacts://data/debug_cv2_fold{fold['fold']}").splits
        baseline = TfidfBaseline().fit(splits["train"].programs, splits["train"].labels)
        assert fold["tfidf"] == pytest.approx(auroc(splits["valid"].labels, baseline.scores(splits["valid"].programs)))
        pooled_labels += list(splits["valid"].labels)
        pooled_tfidf += baseline.scores(splits["valid"].programs).tolist()
    table = (folder / "crossval.md").read_text()
    assert "| mean |" in table and f"in {summary['classifier_wins']} of 2 folds" in table
    # pooled: each held-out program once, scored by its own fold's model; TF-IDF's pooled scores are
    # the per-fold baselines' above
    pooled = summary["pooled"]
    held = [load_labelled(f"artifacts://data/debug_cv2_fold{i}").splits["valid"] for i in range(2)]
    assert pooled["rows"] == sum(len(h) for h in held) and pooled["theorems"] == len({n for h in held for n in h.names})
    assert pooled["tfidf"] == pytest.approx(auroc(pooled_labels, pooled_tfidf))
    assert pooled["low"] <= pooled["difference"] <= pooled["high"]
    assert pooled["difference"] == pytest.approx(pooled["classifier"] - pooled["tfidf"])
    assert "Pooled over the finished folds" in table

    # rerunning trains nothing: the finished folds are reused
    stamps = {
        f["run"]: (artifacts / "classifiers" / f["run"] / "manifest.json").stat().st_mtime_ns for f in summary["folds"]
    }
    capsys.readouterr()
    assert main(argv) == 0
    assert "2 already finished, 0 to run" in capsys.readouterr().out
    assert stamps == {run: (artifacts / "classifiers" / run / "manifest.json").stat().st_mtime_ns for run in stamps}
    # the same name with other overrides is another experiment: refused, nothing reused
    assert main([*argv[:-1], '{"trainer.max_steps": 3, "log.csv": false}']) == 2
    assert "already ran with other configs, overrides or folds" in capsys.readouterr().err
    # so is a rebuilt corpus: its folds are rebuilt, and the old fold runs must not stand in for them
    source_manifest = artifacts / "data/debug/manifest.json"
    source_manifest.write_text(source_manifest.read_text().replace('"stage"', '"note": "rebuilt",\n  "stage"', 1))
    assert main(argv) == 2
    assert "already ran with other configs, overrides or folds" in capsys.readouterr().err
