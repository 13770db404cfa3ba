"""After fit: the classifier's validation/test scores beside the trivial baselines, as one predictions
file and one report (``leanloop.metrics.report``: tables with grouped bootstrap intervals, paired
differences, ROC / PR / reliability / score plots).

Rows of ``predictions.jsonl`` (the report's format): ``id`` (``<split>:<corpus row>``), ``evaluator``,
``split``, ``label``, ``score``, ``prediction`` (score >= the threshold chosen on the validation split),
``group`` (theorem name: the bootstrap's resampling unit). The TF-IDF baseline comes first, so the
report's paired differences read "classifier − TF-IDF".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from classifiers.baselines import BASELINES, MAJORITY, NEAREST, PRIOR, SIBLINGS, TFIDF, Baselines  # noqa: F401 (names)
from classifiers.config import EvaluationConfig
from classifiers.examples import Corpus
from leanloop.corpus import EVAL_SPLITS, VALID
from leanloop.jsonl import read_jsonl, write_jsonl
from leanloop.metrics.report import baseline_verdict

PREDICTIONS = "predictions.jsonl"


def _threshold(labels: Sequence[bool], scores: np.ndarray, config: EvaluationConfig) -> float:
    from leanloop.metrics import select_threshold

    return select_threshold(
        np.asarray(labels, dtype=int), scores, config.threshold_criterion, config.threshold_target
    ).threshold


def rows_for(name: str, corpus: Corpus, scores: dict[str, dict[int, float]], threshold: float) -> list[dict[str, Any]]:
    """Prediction rows of one evaluator from its scores per split (corpus row index -> score)."""
    rows = []
    for split in EVAL_SPLITS:
        data = corpus.splits[split]
        for index in sorted(scores.get(split, {})):
            score = float(scores[split][index])
            rows.append(
                {
                    "id": f"{split}:{index}",
                    "evaluator": name,
                    "split": split,
                    "label": data.labels[index],
                    "score": score,
                    "prediction": score >= threshold,
                    "group": data.names[index],
                    "threshold": threshold,
                }
            )
    return rows


def baseline_rows(
    corpus: Corpus, config: EvaluationConfig, rows: dict[str, Iterable[int]] | None = None
) -> list[dict[str, Any]]:
    """The trivial baselines (:class:`classifiers.baselines.Baselines`), fitted on train, each
    thresholded on its validation scores.

    ``rows``: the corpus rows to report per split (default all); pass the classifier's scored rows so
    that every evaluator judges the same programs (the report pairs them by id). The sibling rate's
    reveal is drawn over the whole split, the draw the history-aware evaluator's rows see.
    """
    train = corpus.splits["train"]
    baselines = Baselines(train.programs, train.labels, train.names, config.tfidf)
    scores: dict[str, dict[str, dict[int, float]]] = {name: {} for name in BASELINES}
    for split in EVAL_SPLITS:
        data = corpus.splits[split]
        index = sorted(rows[split]) if rows is not None else list(range(len(data)))
        values = baselines.scores(data.programs, data.labels, data.names)
        for name in BASELINES:
            scores[name][split] = {i: float(values[name][i]) for i in index}
    return [row for name in BASELINES for row in _thresholded(name, corpus, scores[name], config)]


def _thresholded(
    name: str, corpus: Corpus, scores: dict[str, dict[int, float]], config: EvaluationConfig
) -> list[dict[str, Any]]:
    """Rows of one evaluator at the threshold chosen on its validation scores (0.5 without any)."""
    threshold = 0.5
    if scores.get(VALID):
        order = sorted(scores[VALID])
        threshold = _threshold(
            [corpus.splits[VALID].labels[i] for i in order], np.asarray([scores[VALID][i] for i in order]), config
        )
    return rows_for(name, corpus, scores, threshold)


def stack_rows(name: str, corpus: Corpus, scores: dict[str, dict[int, float]], stacker: Any) -> list[dict[str, Any]]:
    """The history-aware evaluator (a saved :class:`classifiers.stacker.Stacker` over a classifier's
    scores), on the same simulated evidence as the sibling-rate baseline (:func:`baseline_rows`), at
    the stacker's threshold."""
    from classifiers.evidence import History
    from classifiers.history import split_evidence

    train = corpus.splits["train"]
    history = History.from_columns(train.names, train.labels, train.programs)
    stacked: dict[str, dict[int, float]] = {}
    for split in EVAL_SPLITS:
        data = corpus.splits[split]
        evidence = split_evidence(data.programs, data.names, data.labels, history)
        index = sorted(scores.get(split, {}))
        values = stacker.predict([scores[split][i] for i in index], [evidence[i] for i in index]) if index else []
        stacked[split] = dict(zip(index, map(float, values)))
    return rows_for(name, corpus, stacked, stacker.threshold)


def write_predictions(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    return write_jsonl(path, rows)


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    return list(read_jsonl(path))


LEADING = (TFIDF, MAJORITY, PRIOR, SIBLINGS, NEAREST)


def order_evaluators(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The baselines first, TF-IDF at their head (the reference of the paired differences), then the
    learned evaluators in order."""
    names = list(dict.fromkeys(r["evaluator"] for r in rows))
    rank = {
        name: i for i, name in enumerate([n for n in LEADING if n in names] + [n for n in names if n not in LEADING])
    }
    return sorted(rows, key=lambda r: rank[r["evaluator"]])  # stable: rows keep their order per evaluator


def auroc_gap(rows: list[dict[str, Any]], name: str, n_resamples: int) -> Any:
    """Paired grouped-bootstrap interval of AUROC(name) - AUROC(TF-IDF) on the test rows both judged."""
    from leanloop.metrics import paired_bootstrap

    tfidf = {r["id"]: r for r in rows if r["evaluator"] == TFIDF and r["split"] == "test"}
    mine = [r for r in rows if r["evaluator"] == name and r["split"] == "test" and r["id"] in tfidf]
    if not mine:
        return None
    labels = [int(r["label"]) for r in mine]
    return paired_bootstrap(
        labels,
        [r["group"] for r in mine],
        [r["score"] for r in mine],
        [tfidf[r["id"]]["score"] for r in mine],
        metrics=("auroc",),
        n_resamples=n_resamples,
    )["auroc"]


def headline(summary_path: Path, rows: list[dict[str, Any]], classifiers: Sequence[str], n_resamples: int) -> list[str]:
    """The lines that answer "does the classifier beat TF-IDF on the test split?"."""
    summary = json.loads(summary_path.read_text())["evaluators"]
    lines = baseline_verdict(summary, classifiers, BASELINES)[2:]  # the verdict itself is the report's first line
    if TFIDF not in summary:
        return lines
    base = summary[TFIDF]
    lines += ["## Headline (test split, theorem-disjoint)", ""]
    for name in classifiers:
        if name not in summary:
            continue
        ours, theirs = summary[name]["intervals"]["auroc"], base["intervals"]["auroc"]
        verdict = "beats" if ours["point"] > theirs["point"] else "does NOT beat"
        gap = auroc_gap(rows, name, n_resamples)
        gap_text = (
            f"; paired difference {gap.point:+.3f} [{gap.low:+.3f}, {gap.high:+.3f}], positive in "
            f"{gap.share_positive:.0%} of resamples"
            if gap is not None
            else ""
        )
        lines.append(
            f"- `{name}` AUROC {ours['point']:.3f} [{ours['low']:.3f}, {ours['high']:.3f}] {verdict} the TF-IDF "
            f"baseline's {theirs['point']:.3f} [{theirs['low']:.3f}, {theirs['high']:.3f}]{gap_text} "
            f"(accuracy {summary[name]['metrics']['accuracy']:.3f} vs {base['metrics']['accuracy']:.3f}; "
            f"MCC {summary[name]['metrics']['mcc']:.3f} vs {base['metrics']['mcc']:.3f})."
        )
    if MAJORITY in summary:
        lines.append(
            f"- majority class: accuracy {summary[MAJORITY]['metrics']['accuracy']:.3f} (AUROC 0.5 by construction)."
        )
    return lines + [
        "",
        "Verdicts use thresholds chosen on the validation split (0.01 grid, or the midpoints of the "
        "observed scores where they all lie in one grid cell); the paired-difference "
        "table below gives each evaluator minus TF-IDF on the same bootstrap resamples.",
        "",
    ]


def write_report(rows: list[dict[str, Any]], out_dir: str | Path, n_resamples: int, title: str | None = None) -> Path:
    """``predictions.jsonl`` + ``report.md`` + plots in ``out_dir``; returns the report's path."""
    from leanloop.metrics.report import build_report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = order_evaluators(rows)
    predictions = write_predictions(rows, out / PREDICTIONS)
    report = build_report(predictions, out, n_resamples=n_resamples)
    classifiers = [n for n in dict.fromkeys(r["evaluator"] for r in rows) if n not in BASELINES]
    summary = json.loads((out / "summary.json").read_text())["evaluators"]
    top = baseline_verdict(summary, classifiers, BASELINES)[:1]  # line one: does a baseline beat a learned model?
    top += [f"# {title}", ""] if title else [""]
    top += headline(out / "summary.json", rows, classifiers, n_resamples)
    body = report.read_text(encoding="utf-8")
    report.write_text("\n".join(top) + "\n" + body, encoding="utf-8")
    return report
