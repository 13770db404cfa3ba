"""``python -m feedback_model.cascade_eval --config configs/feedback_model/eval/default.yaml``
(``make feedback-model-eval``)

The seed's Table 3 on one theorem-disjoint split of the labelled corpus: the gate, the feedback model
and the cascades scored on the same programs, reported in ``artifacts/feedback_model_eval/<run>/``.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from feedback_model.config import CascadeEvalConfig
from feedback_model.pairs import read_corpus, reference_trace
from feedback_model.cascade_report import EVALUATORS, FEEDBACK_TRACES, write_report
from leanloop.artifacts import Manifest
from leanloop.tool import parse_config as parse_tool_config, run_parsed_tool

STAGE = "feedback_model_eval"


def parse_config(argv: list[str] | None = None) -> CascadeEvalConfig:
    return parse_tool_config(
        CascadeEvalConfig, argv, prog="python -m feedback_model.cascade_eval", description=__doc__.splitlines()[0]
    )[0]


# -- which programs ------------------------------------------------------------------------------
def select_programs(
    rows: Sequence[dict[str, Any]],
    split: str,
    sample_programs: int | None,
    seed: int,
    max_per_problem: int | None = None,
) -> list[dict[str, Any]]:
    """Labelled rows of ``split``; with ``sample_programs``, problems drawn at random until that many
    programs are in, each with all its candidates (complete bootstrap groups and budget pools) or,
    with ``max_per_problem``, a seeded random subset of that many (more problems for the same cost)."""
    labelled = [r for r in rows if r["split"] == split and r["label"] is not None]
    if not labelled:
        raise ValueError(f"the corpus has no labelled programs in split {split!r}")
    if (sample_programs is None or sample_programs >= len(labelled)) and max_per_problem is None:
        return labelled
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for row in labelled:
        by_problem.setdefault(row["name"] or row["id"], []).append(row)
    problems = sorted(by_problem)
    rng = random.Random(seed)
    rng.shuffle(problems)
    chosen: list[dict[str, Any]] = []
    for problem in problems:
        if sample_programs is not None and len(chosen) >= sample_programs:
            break
        candidates = by_problem[problem]
        if max_per_problem is not None and len(candidates) > max_per_problem:
            keep = sorted(rng.sample(range(len(candidates)), max_per_problem))
            candidates = [candidates[i] for i in keep]
        chosen += candidates
    return chosen


def balanced_sample(rows: Sequence[dict[str, Any]], per_cell: int, seed: int) -> dict[str, str]:
    """id -> reference trace for up to ``per_cell`` rows with a reference in each prover x label cell
    (LLF App. D: 334 per prover x label, 2,004 in all, seed 42), drawn in a fixed cell order."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    with_reference = [(row, trace) for row in rows for trace in [reference_trace(row)[0]] if trace]
    for prover in sorted({row.get("prover") or "" for row, _ in with_reference}):
        for label in (True, False):
            pool = [
                (row, trace)
                for row, trace in with_reference
                if (row.get("prover") or "") == prover and row["label"] is label
            ]
            for row, trace in rng.sample(pool, min(per_cell, len(pool))):
                out[row["id"]] = trace
    return out


def run_batches(name: str, evaluator: Any, programs: list[str], batch: int | None) -> tuple[list[Any], float]:
    """All predictions and the scoring wall time, in batches of ``batch`` programs."""
    size = batch or len(programs)
    predictions: list[Any] = []
    began = time.perf_counter()
    for start in tqdm(range(0, len(programs), size), desc=name, unit="batch", leave=False):
        predictions += evaluator.score(programs[start : start + size])
    return predictions, time.perf_counter() - began


def timed_load(loader: Callable[[], Any]) -> tuple[Any, float]:
    began = time.perf_counter()
    evaluator = loader()
    return evaluator, time.perf_counter() - began


def evaluate_all(config: CascadeEvalConfig, programs: list[str]) -> dict[str, dict[str, Any]]:
    from feedback_model.cascade import build_cascade, load_gate
    from feedback_model.consistency import SelfConsistencyEvaluator
    from feedback_model.evaluator import FeedbackEvaluator
    from leanloop.artifacts import resolve_model

    gate_dir = resolve_model(config.cascade.gate, "classifiers")
    generation, consistency = config.generation, config.self_consistency
    device = generation.device if generation.backend == "transformers" else "cuda"
    results: dict[str, dict[str, Any]] = {}
    standalone = {
        "one-token": lambda: load_gate(gate_dir, config.cascade, device),
        "feedback greedy": lambda: FeedbackEvaluator.load(config.feedback, generation),
        "feedback self-consistency": lambda: SelfConsistencyEvaluator.load(
            config.feedback, generation, self_consistency=consistency
        ),
    }
    for name, loader in standalone.items():
        evaluator, load_s = timed_load(loader)
        predictions, seconds = run_batches(name, evaluator, programs, config.batch_programs)
        results[name] = {
            "predictions": predictions,
            "seconds": seconds,
            "load_s": load_s,
            "timing": {
                "gate_s": seconds if name == "one-token" else 0.0,
                "load_s": 0.0,
                "traces_s": 0.0 if name == "one-token" else seconds,
                "other_s": 0.0,
            },
        }
        if name == "one-token":
            results[name]["threshold"] = float(evaluator.threshold)
            results[name]["threshold_source"] = evaluator.spec.threshold_source
        del evaluator
    calibrated = replace(config.cascade, threshold=None)  # the gate's own threshold from validation
    for name, sc, gate in (
        ("cascade", None, config.cascade),
        ("cascade + self-consistency", consistency, config.cascade),
        ("cascade (calibrated gate)", None, calibrated),
    ):
        cascade = build_cascade(gate, config.feedback, generation, sc)
        # one call: the sequential cascade pays one load and one gate -> feedback transition (LLF Section 5)
        began = time.perf_counter()
        predictions = cascade.score(programs, batch_size=config.batch_programs)
        seconds = time.perf_counter() - began
        timing = cascade.total_timing.to_dict()
        results[name] = {
            "predictions": predictions,
            "seconds": seconds,
            "load_s": timing["load_s"],
            "timing": {k: timing[k] for k in ("gate_s", "load_s", "traces_s", "other_s")},
            "residency": cascade.residency,
            "gate_positive": timing["gate_positive"],
        }
        cascade.close()
    return results


def baseline_results(
    corpus: Sequence[dict[str, Any]], rows: list[dict[str, Any]], config: CascadeEvalConfig
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Prediction records and results of the classifier reports' baselines
    (:class:`classifiers.evaluator.Baselines`) on the evaluated ``rows``: fitted on the corpus's
    labelled training split, each thresholded at its best MCC on the validation split (on the
    evaluated rows themselves when the validation split is what is evaluated, or lacks a class).
    None of them when the training split lacks a class: the results then say why."""
    from classifiers.evaluator import BASELINES, Baselines
    from leanloop.corpus import VALID, canonical_split
    from leanloop.metrics import select_threshold

    def labelled(split: str) -> list[dict[str, Any]]:
        return [r for r in corpus if canonical_split(r["split"]) == split and r["label"] is not None]

    def columns(part: Sequence[dict[str, Any]]) -> tuple[list[str], list[bool], list[str]]:
        return [r["program"] for r in part], [bool(r["label"]) for r in part], [r["name"] or r["id"] for r in part]

    train = labelled("train")
    if len({bool(r["label"]) for r in train}) < 2:
        return [], {
            "baselines_missing": f"the corpus's training split has {len(train)} labelled programs, not both classes"
        }
    began = time.perf_counter()
    baselines = Baselines(*columns(train))
    fit_s = time.perf_counter() - began
    began = time.perf_counter()
    scores = baselines.scores(*columns(rows), seed=config.seed)
    seconds = (time.perf_counter() - began) / len(BASELINES)  # one call scores them all: each gets a share
    validation = labelled(VALID)
    threshold_split = f"the `{VALID}` split ({len(validation)} programs)"
    if canonical_split(config.split) == VALID or len({bool(r["label"]) for r in validation}) < 2:
        validation, threshold_split = rows, "the evaluated programs themselves (no separate validation split)"
    fitted = baselines.scores(*columns(validation), seed=config.seed)
    labels = [int(r["label"]) for r in validation]
    records: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = {}
    for name in BASELINES:
        threshold = float(select_threshold(labels, fitted[name]).threshold)
        results[name] = {
            "seconds": seconds,
            "load_s": fit_s,
            "timing": {"gate_s": 0.0, "load_s": 0.0, "traces_s": 0.0, "other_s": seconds},
            "baseline": {
                "threshold": threshold,
                "threshold_split": threshold_split,
                "train_programs": len(train),
                "reveal_fraction": baselines.reveal_fraction,
            },
        }
        for row, score in zip(rows, scores[name].tolist()):
            records.append(
                {
                    "evaluator": name,
                    "id": row["id"],
                    "label": bool(row["label"]),
                    "group": row["name"] or row["id"],
                    "split": row["split"],
                    "benchmark": row.get("source") or "",
                    "run": "",
                    "prediction": score >= threshold,
                    "score": float(score),
                    "unscored": None,
                    "reason": None,
                    "truncated": False,
                    "time_s": None,
                    "cost": None,
                }
            )
    return records, results


def prediction_rows(
    name: str, rows: list[dict[str, Any]], predictions: list[Any], references: dict[str, str]
) -> list[dict[str, Any]]:
    out = []
    for row, prediction in zip(rows, predictions):
        scored = prediction.verdict is not None
        record = {
            "evaluator": name,
            "id": row["id"],
            "label": bool(row["label"]),
            "group": row["name"] or row["id"],
            "split": row["split"],
            "benchmark": row.get("source") or "",
            "run": "",
            # an unjudged program is not accepted: verdict invalid, score 0 (its reason is kept)
            "prediction": bool(prediction.verdict) if scored else False,
            "score": float(prediction.score) if scored else 0.0,
            "unscored": None if scored else getattr(prediction, "reason", "not scored"),
            "reason": getattr(prediction, "reason", None),
            "truncated": getattr(prediction, "truncated", False),
            "time_s": prediction.time_s,
            "cost": getattr(prediction, "cost", None),
        }
        if name in FEEDBACK_TRACES and row["id"] in references:
            record["reference_trace"] = references[row["id"]]
            record["trace"] = prediction.trace
        out.append(record)
    return out


# -- the report ----------------------------------------------------------------------------------
def evaluate(config: CascadeEvalConfig) -> Path:
    """Run the six evaluators and write the report (leanloop.tool's contract: a run finished with this
    config is skipped, another config refused unless ``overwrite``; the manifest is written last)."""
    import yaml

    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    resolved = yaml.safe_dump({k: v for k, v in asdict(config).items() if k != "overwrite"}, sort_keys=True)
    result = run_parsed_tool(STAGE, config, resolved, _evaluate, run=config.run, overwrite=config.overwrite)
    if not result.skipped:
        print(f"[feedback-model-eval] report: {result.run_dir / 'report.md'}")
    return result.run_dir / "report.md"


def _evaluate(config: CascadeEvalConfig, out: Path) -> Manifest:
    from leanloop.artifacts import resolve_model, resolve_run

    corpus = read_corpus(
        config.corpus,
        ("id", "program", "name", "split", "category", "label", "messages", "reference_trace", "trace_kind", "source"),
    )
    rows = select_programs(corpus, config.split, config.sample_programs, config.seed, config.max_per_problem)
    references = balanced_sample(rows, config.feedback_per_prover_label, config.seed)
    print(
        f"[feedback-model-eval] {len(rows)} programs of split {config.split}; feedback-quality sample {len(references)}",
        file=sys.stderr,
    )
    results = evaluate_all(config, [r["program"] for r in rows])
    records, trivial = baseline_results(corpus, rows, config)
    results.update(trivial)
    records += [
        record
        for name in EVALUATORS
        for record in prediction_rows(name, rows, results[name]["predictions"], references)
    ]
    body = write_report(out, config, rows, records, results, references)

    manifest = Manifest(
        stage=STAGE,
        run=config.run,
        seed=config.seed,
        counts={"programs": len(rows), "valid": body["valid"], "feedback_sample": len(references)},
        metrics={
            name: {k: s["metrics"][k] for k in ("accuracy", "f1", "mcc", "auroc", "tpr", "fpr")}
            | {"candidates_per_s": s["candidates_per_s"]}
            for name, s in body["evaluators"].items()
        },
        extra={"config_file": "config.yaml"},
    )
    manifest.add_input("corpus", resolve_run(config.corpus, "data"))
    manifest.add_input("feedback_model", resolve_model(config.feedback, "feedback_model").parent)
    manifest.add_input("gate", resolve_model(config.cascade.gate, "classifiers").parent)
    return manifest


def main(argv: list[str] | None = None) -> int:
    evaluate(parse_config(argv))
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m feedback_model.cascade_eval"))
