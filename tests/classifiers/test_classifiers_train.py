"""fast_dev_run of both debug configs through the stage machinery: final/ loads as an Evaluator,
the manifest carries the validation threshold and test metrics, and the run's report puts the
classifier beside the two baselines on the same programs."""

from __future__ import annotations

import json

import pytest

from classifiers.run_report import BASELINES, MAJORITY, PRIOR, SIBLINGS, TFIDF, read_predictions
from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec


@pytest.mark.parametrize("kind", ["encoder", "onetoken"])
def test_fast_dev_run_exports_a_loadable_classifier(trained_runs, kind):
    result = trained_runs[kind]
    final = result.run_dir / "final"
    spec = ClassifierSpec.read(final)
    assert spec.kind == kind
    manifest = result.manifest
    assert manifest["fast_dev_run"] is True and manifest["model"]["base"].startswith("preset:")
    # the threshold recorded beside the weights is the one the test loop chose on validation
    assert spec.threshold == pytest.approx(manifest["metrics"]["threshold"])
    assert spec.threshold_source.startswith("validation split")
    assert "test/auroc" in manifest["metrics"]
    scored = manifest["counts"]["scored"]
    assert scored["valid"] > 0 and scored["test"] > 0

    evaluator = ClassifierEvaluator.load(final)
    corpus = result.corpus
    rows = read_predictions(result.run_dir / "predictions.jsonl")
    mine = [r for r in rows if r["evaluator"] == f"{kind}:{result.run_dir.name}"]
    programs = [corpus.splits[r["split"]].programs[int(r["id"].split(":")[1])] for r in mine]
    # the exported model reproduces the scores the test loop recorded
    again = evaluator.score(programs)
    assert [p.score for p in again] == pytest.approx([r["score"] for r in mine], abs=1e-4)
    assert [p.verdict for p in again] == [r["prediction"] for r in mine]


def test_run_report_has_both_baselines_on_the_same_rows(trained_runs):
    result = trained_runs["encoder"]
    rows = read_predictions(result.run_dir / "predictions.jsonl")
    by_evaluator: dict[str, set[str]] = {}
    for row in rows:
        by_evaluator.setdefault(row["evaluator"], set()).add(row["id"])
    stacked = (result.run_dir / "final" / "history_stacker.json").is_file()
    assert set(by_evaluator) == {*BASELINES, "encoder:debug"} | ({"history:debug"} if stacked else set())
    assert len({frozenset(ids) for ids in by_evaluator.values()}) == 1  # every evaluator judged the same programs
    train_labels = result.corpus.splits["train"].labels
    majority = float(sum(train_labels) > len(train_labels) / 2)
    assert {r["score"] for r in rows if r["evaluator"] == MAJORITY} == {majority}
    report = (result.run_dir / "report.md").read_text()
    # line one says whether a baseline beats the learned model; the baselines lead the report
    first = report.splitlines()[0]
    assert first.startswith("**A BASELINE BEATS THE LEARNED MODEL**") or first.startswith("No baseline beats")
    baselines = next(i for i, line in enumerate(report.splitlines()) if line.startswith("Baselines (test split)"))
    assert baselines < report.splitlines().index("## Headline (test split, theorem-disjoint)")
    assert all(f"`{b}` AUROC" in report.splitlines()[baselines] for b in (MAJORITY, PRIOR, TFIDF, SIBLINGS))
    assert "## Headline" in report and "TF-IDF" in report and "Paired differences" in report
    assert (result.run_dir / "roc.png").stat().st_size > 0


def test_combined_report_over_both_runs(trained_runs):
    from classifiers.combined_report import ReportConfig, main

    root = trained_runs["root"]
    runs = [str(trained_runs[kind].run_dir) for kind in ("encoder", "onetoken")]
    report = main(ReportConfig(runs=runs, out=str(root / "classifiers" / "debug_report"), n_resamples=50))
    text = report.read_text()
    assert "`encoder:debug`" in text and "`onetoken:debug_onetoken`" in text
    rows = read_predictions(report.parent / "predictions.jsonl")
    names = list(dict.fromkeys(r["evaluator"] for r in rows))
    assert names[0] == TFIDF and names.count(TFIDF) == 1  # baselines once, TF-IDF is the reference
    manifest = json.loads((report.parent / "manifest.json").read_text())
    assert set(manifest["inputs"]) == {"run:debug", "run:debug_onetoken"}


def test_data_stage_corpus_is_read_theorem_disjoint(tmp_path, monkeypatch):
    """The normal source: a data-stage run (built here from configs/data/debug.yaml, replay backend)."""
    from classifiers.examples import load_labelled
    from data.build import build, parse_config
    from leanloop.paths import REPO_ROOT

    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path))
    build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    corpus = load_labelled("artifacts://data/debug")
    manifest = json.loads((tmp_path / "data/debug/manifest.json").read_text())
    labelled = sum(len(split) for split in corpus.splits.values())
    categories = manifest["counts"]["category"]
    assert labelled == sum(categories.get(c, 0) for c in ("valid", "invalid", "precheck_rejected"))
    names = {split: set(data.names) for split, data in corpus.splits.items()}
    assert not names["train"] & names["test"] and not names["train"] & names["valid"]
    assert all(len(data) for data in corpus.splits.values())


def test_missing_corpus_run_is_explained(artifacts):
    from classifiers.examples import load_labelled

    with pytest.raises(FileNotFoundError, match="make data"):
        load_labelled("artifacts://data/never_built")
