"""The report: one predictions file of real RL-Lean candidates in, Markdown tables and PNG plots out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from leanloop.metrics.bootstrap import grouped_bootstrap
from leanloop.metrics.feedback import feedback_metrics
from leanloop.metrics.report import build_report, read_predictions
from leanloop.metrics.verdicts import verdict_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def predictions(shared_data, tmp_path_factory):
    """Two real, trivial evaluators on the candidates of 60 problems: the earlier-rounds pass rate,
    and the copy-the-input feedback baseline (its trace is the program: always "valid"). Rounds 0-2
    are the validation split."""
    from bench.traces import rl_lean_predictions

    rows = rl_lean_predictions(shared_data)
    problems = sorted({row["group"] for row in rows})[:60]
    rows = [row for row in rows if row["group"] in problems]
    out = []
    for row in rows:
        split = "valid" if row["round"] <= 2 else "test"
        base = {k: row[k] for k in ("id", "group", "benchmark", "run", "label", "reference_trace")}
        out.append({**base, "split": split, "evaluator": "pass_rate", "score": row["score"]})
        out.append(
            {
                **base,
                "split": split,
                "evaluator": "copy_baseline",
                "score": 1.0,
                "prediction": True,
                "trace": row["trace"],
            }
        )
    path = tmp_path_factory.mktemp("report") / "predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path, rows


def test_report_tables_and_plots(predictions, tmp_path):
    path, rows = predictions
    report = build_report(path, tmp_path / "out", n_resamples=300)
    text = report.read_text()
    for heading in (
        "## Verdict metrics",
        "### Per class",
        "### Precision of accepted programs at valid fraction π",
        "## Thresholds chosen on validation rows",
        "## Paired differences between every two evaluators",
        "## Feedback metrics",
        "## Budgeted compilation replay",
        "## Plots",
    ):
        assert heading in text
    for name in (
        "roc.png",
        "pr.png",
        "reliability.png",
        "score_hist.png",
        "feedback_metrics.png",
        "budget_coverage.png",
    ):
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
        assert f"({name})" in text

    # The numbers are those of the metric functions on the test rows.
    answered = [r for r in rows if r["label"] is not None and r["round"] > 2]
    labels = [int(r["label"]) for r in answered]
    scores = [r["score"] for r in answered]
    expected = verdict_metrics(labels, scores)
    intervals = grouped_bootstrap(labels, [r["group"] for r in answered], scores, n_resamples=300)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    got = summary["evaluators"]["pass_rate"]
    for name in ("accuracy", "f1", "macro_f1", "mcc", "auroc"):
        assert got["metrics"][name] == pytest.approx(expected[name])
        assert got["intervals"][name]["low"] == pytest.approx(intervals[name].low)
        assert f"{expected[name]:.3f} [{intervals[name].low:.3f}, {intervals[name].high:.3f}]" in text
    copy = summary["evaluators"]["copy_baseline"]["metrics"]
    assert copy["recall_valid"] == 1.0 and copy["fpr"] == 1.0  # accepts everything
    feedback = feedback_metrics([r["reference_trace"] for r in answered], [r["trace"] for r in answered])
    assert summary["feedback"]["copy_baseline"]["block_f1"] == pytest.approx(feedback["block_f1"])
    assert summary["feedback"]["copy_baseline"]["n"] == len(answered)
    # Budget: the copy baseline ties every candidate, so its ranked coverage is the random one.
    budget = summary["budget"]["copy_baseline"]
    assert np.allclose(budget["ranked"], budget["random"])
    assert budget["oracle"][-1] >= budget["ranked"][0]


def test_unlabelled_rows_are_counted_not_scored(predictions):
    path, rows = predictions
    labelled, unlabelled = read_predictions(path)
    assert unlabelled == 2 * sum(1 for r in rows if r["label"] is None)
    assert len(labelled) == 2 * sum(1 for r in rows if r["label"] is not None)


def test_bad_predictions_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"label": true, "score": 0.5}\n')
    with pytest.raises(ValueError, match="missing group"):
        build_report(bad, tmp_path / "out")
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        read_predictions(bad)


def test_matched_targets_are_the_cascades_validation_rates_and_every_pair_is_compared(predictions, tmp_path):
    """LLF matches each evaluator's FPR / recall to the cascade's validation rates (not fixed 0.05 / 0.9)
    and gives paired intervals for every comparison, not only against the first evaluator."""
    from leanloop.metrics.report import matched_targets, split_by_evaluator

    path, rows = predictions
    records = [json.loads(line) for line in path.read_text().splitlines()]
    cascade = [
        {**r, "evaluator": "cascade", "prediction": r["score"] >= 0.5} for r in records if r["evaluator"] == "pass_rate"
    ]
    extended = tmp_path / "with_cascade.jsonl"
    extended.write_text("".join(json.dumps(r) + "\n" for r in records + cascade))
    labelled, _ = read_predictions(extended)
    fpr, recall = matched_targets(split_by_evaluator(labelled), "cascade", 0.5)
    val = [r for r in cascade if r["split"] == "valid" and r["label"] is not None]
    negatives = [r for r in val if not r["label"]]
    positives = [r for r in val if r["label"]]
    assert fpr == pytest.approx(sum(r["prediction"] for r in negatives) / len(negatives))
    assert recall == pytest.approx(sum(r["prediction"] for r in positives) / len(positives))
    assert (fpr, recall) != (0.05, 0.9)
    text = build_report(extended, tmp_path / "out", n_resamples=50).read_text()
    assert f"Matched targets: FPR {fpr:.3f}, recall {recall:.3f} (`cascade`'s validation rates)" in text
    for pair in ("copy_baseline − pass_rate", "cascade − pass_rate", "cascade − copy_baseline"):
        assert f"| {pair} |" in text


def test_baseline_verdict_compares_auroc_for_graded_scores_and_accuracy_for_hard_verdicts():
    from leanloop.metrics.report import baseline_verdict

    def entry(auroc, accuracy, graded=True):
        return {"metrics": {"auroc": auroc, "accuracy": accuracy}, "auroc_defined": graded}

    summary = {
        "majority": entry(0.5, 0.70),
        "tfidf": entry(0.80, 0.60),
        "encoder": entry(0.72, 0.75),
        "gate": entry(0.80, 0.50),
        "greedy": entry(float("nan"), 0.65, graded=False),
    }
    first, _, numbers, _ = baseline_verdict(summary, ["encoder", "gate", "greedy"], ["majority", "tfidf"], "test")
    assert first == (
        "**A BASELINE BEATS THE LEARNED MODEL** on test AUROC (accuracy for hard verdicts): "
        "`tfidf` (0.800) beats `encoder` (0.720); `tfidf` (0.800) matches `gate` (0.800); "
        "`majority` (accuracy 0.700) beats `greedy` (accuracy 0.650)."
    )
    assert (
        numbers
        == "Baselines (test split): `majority` AUROC 0.500, accuracy 0.700; `tfidf` AUROC 0.800, accuracy 0.600."
    )
    summary["encoder"] = entry(0.85, 0.75)
    assert baseline_verdict(summary, ["encoder"], ["majority", "tfidf"])[0] == (
        "No baseline beats the learned model on test AUROC (`encoder` 0.850; best baseline AUROC 0.800, accuracy 0.700)."
    )
    assert baseline_verdict(summary, ["encoder"], ["absent"]) == []
