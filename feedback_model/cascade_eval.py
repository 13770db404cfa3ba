"""``python -m feedback_model.cascade_eval --config configs/feedback_model/eval/default.yaml`` (``make cascade-eval``)

The seed's Table 3 on one theorem-disjoint split of the labelled corpus, for five evaluators scored on
the same programs: the one-token classifier (the gate alone), the feedback model greedy, the feedback
model with self-consistency, the cascade, and the cascade with self-consistency in stage two. Written
to ``artifacts/cascade_eval/<run>/``:

- ``report.md``: accuracy, F1 (valid class), MCC and AUROC (only where the score is graded: a greedy
  trace gives a hard verdict, so AUROC is not defined for it) with grouped-bootstrap 95% intervals,
  valid recall and false-positive rate, unscored programs, throughput (candidates/s) and the time
  accounting (gate / load-swap / traces / other); feedback-quality metrics (block F1, anchored block
  F1, token F1, error agreement) on a sample balanced by label; the budgeted compilation replay;
  plots (throughput, time breakdown, and the shared report's ROC / PR / reliability / histograms /
  feedback metrics / budget curve under ``details/``);
- ``predictions.jsonl`` (one row per program and evaluator), ``summary.json``, ``config.yaml``,
  ``manifest.json`` (inputs: corpus, gate run, feedback run).

Every evaluator runs for real; nothing is copied between configurations. A program an evaluator does
not judge (over the feedback model's input limit, or past a deadline) counts as a rejection (verdict
invalid, score 0) in the metrics and is listed with its reason, so all five are compared on the same
rows.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from feedback_model.config import CascadeEvalConfig
from feedback_model.pairs import read_corpus, reference_trace
from leanloop.artifacts import MANIFEST, Manifest
from leanloop.paths import artifacts_root

STAGE = "cascade_eval"
EVALUATORS = ("one-token", "feedback greedy", "feedback self-consistency", "cascade", "cascade + self-consistency")
GRADED = {"one-token", "feedback self-consistency", "cascade + self-consistency"}  # AUROC defined
FEEDBACK_TRACES = ("feedback greedy", "feedback self-consistency")
BUDGETS = (1, 2, 4, 8)


def parse_config(argv: list[str] | None = None) -> CascadeEvalConfig:
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(prog="python -m feedback_model.cascade_eval", description=__doc__.splitlines()[0])
    parser.add_argument("--config", action=ActionConfigFile, help="YAML config (repeatable, layered)")
    parser.add_class_arguments(CascadeEvalConfig, as_group=False)
    namespace = parser.parse_args(argv)
    values = {k: v for k, v in vars(parser.instantiate_classes(namespace)).items() if k != "config"}
    return CascadeEvalConfig(**values)


# -- which programs ------------------------------------------------------------------------------
def select_programs(rows: Sequence[dict[str, Any]], split: str, sample_programs: int | None,
                    seed: int, max_per_problem: int | None = None) -> list[dict[str, Any]]:
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


def balanced_sample(rows: Sequence[dict[str, Any]], per_label: int, seed: int) -> dict[str, str]:
    """id -> reference trace for up to ``per_label`` valid and as many invalid rows with a reference."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    with_reference = [(row, reference_trace(row)[0]) for row in rows]
    for label in (True, False):
        pool = [(row, trace) for row, trace in with_reference if row["label"] is label and trace]
        size = min(per_label, sum(1 for r, t in with_reference if r["label"] is (not label) and t), len(pool))
        for row, trace in rng.sample(pool, size):
            out[row["id"]] = trace
    return out


# -- running the evaluators ----------------------------------------------------------------------
def run_batches(name: str, evaluator: Any, programs: list[str], batch: int | None) -> tuple[list[Any], float]:
    """All predictions and the scoring wall time, in batches of ``batch`` programs."""
    size = batch or len(programs)
    predictions: list[Any] = []
    began = time.perf_counter()
    for start in tqdm(range(0, len(programs), size), desc=name, unit="batch", leave=False):
        predictions += evaluator.score(programs[start:start + size])
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
        "feedback self-consistency": lambda: SelfConsistencyEvaluator.load(config.feedback, generation,
                                                                            self_consistency=consistency),
    }
    for name, loader in standalone.items():
        evaluator, load_s = timed_load(loader)
        predictions, seconds = run_batches(name, evaluator, programs, config.batch_programs)
        results[name] = {"predictions": predictions, "seconds": seconds, "load_s": load_s,
                         "timing": {"gate_s": seconds if name == "one-token" else 0.0, "load_s": 0.0,
                                    "traces_s": 0.0 if name == "one-token" else seconds, "other_s": 0.0}}
        if name == "one-token":
            results[name]["threshold"] = float(evaluator.threshold)
            results[name]["threshold_source"] = evaluator.spec.threshold_source
        del evaluator
    for name, sc in (("cascade", None), ("cascade + self-consistency", consistency)):
        cascade = build_cascade(config.cascade, config.feedback, generation, sc)
        predictions, seconds = run_batches(name, cascade, programs, config.batch_programs)
        timing = cascade.total_timing.to_dict()
        results[name] = {"predictions": predictions, "seconds": seconds, "load_s": timing["load_s"],
                         "timing": {k: timing[k] for k in ("gate_s", "load_s", "traces_s", "other_s")},
                         "residency": cascade.residency, "gate_positive": timing["gate_positive"]}
        cascade.close()
    return results


def prediction_rows(name: str, rows: list[dict[str, Any]], predictions: list[Any],
                    references: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for row, prediction in zip(rows, predictions):
        scored = prediction.verdict is not None
        record = {
            "evaluator": name, "id": row["id"], "label": bool(row["label"]), "group": row["name"] or row["id"],
            "split": row["split"], "benchmark": row.get("source") or "", "run": "",
            # an unjudged program is not accepted: verdict invalid, score 0 (its reason is kept)
            "prediction": bool(prediction.verdict) if scored else False,
            "score": float(prediction.score) if scored else 0.0,
            "unscored": None if scored else getattr(prediction, "reason", "not scored"),
            "reason": getattr(prediction, "reason", None), "truncated": getattr(prediction, "truncated", False),
            "time_s": prediction.time_s,
        }
        if name in FEEDBACK_TRACES and row["id"] in references:
            record["reference_trace"] = references[row["id"]]
            record["trace"] = prediction.trace
        out.append(record)
    return out


# -- the report ----------------------------------------------------------------------------------
def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _with_interval(point: float, interval: Any) -> str:
    return f"{_fmt(point)} [{_fmt(interval.low)}, {_fmt(interval.high)}]"


def table3(records: list[dict[str, Any]], results: dict[str, dict[str, Any]], n_resamples: int,
           seed: int) -> tuple[list[str], dict[str, Any]]:
    from leanloop.metrics.bootstrap import grouped_bootstrap
    from leanloop.metrics.verdicts import verdict_metrics

    lines = ["| evaluator | n | accuracy | F1 (valid) | MCC | AUROC | valid recall | FPR | unscored | "
             "candidates/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    summary: dict[str, Any] = {}
    for name in EVALUATORS:
        mine = [r for r in records if r["evaluator"] == name]
        labels = [r["label"] for r in mine]
        scores = [r["score"] for r in mine]
        verdicts = [r["prediction"] for r in mine]
        groups = [r["group"] for r in mine]
        metrics = verdict_metrics(labels, scores, verdicts)
        intervals = grouped_bootstrap(labels, groups, scores, verdicts, n_resamples=n_resamples, seed=seed)
        graded = name in GRADED
        throughput = len(mine) / results[name]["seconds"] if results[name]["seconds"] > 0 else float("nan")
        unscored = sum(r["unscored"] is not None for r in mine)
        auroc_cell = _with_interval(metrics["auroc"], intervals["auroc"]) if graded else "– (hard verdict)"
        lines.append(f"| {name} | {len(mine)} | {_with_interval(metrics['accuracy'], intervals['accuracy'])} | "
                     f"{_with_interval(metrics['f1'], intervals['f1'])} | {_with_interval(metrics['mcc'], intervals['mcc'])} | "
                     f"{auroc_cell} | {_with_interval(metrics['recall_valid'], intervals['recall_valid'])} | "
                     f"{_with_interval(metrics['fpr'], intervals['fpr'])} | {unscored} | {throughput:.2f} |")
        summary[name] = {"metrics": {k: v for k, v in metrics.items() if k != "ppv_at"},
                         "intervals": {k: v.to_dict() for k, v in intervals.items()},
                         "auroc_defined": graded, "unscored": unscored, "candidates_per_s": throughput,
                         "scoring_s": results[name]["seconds"], "load_s": results[name]["load_s"],
                         "timing": results[name]["timing"]}
    return lines + [""], summary


def feedback_quality(records: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    from leanloop.metrics.feedback import FEEDBACK_METRICS, feedback_metrics

    lines = ["| evaluator | programs (valid / invalid) | " + " | ".join(FEEDBACK_METRICS) + " |",
             "|---|---|" + "---|" * len(FEEDBACK_METRICS)]
    out = {}
    for name in FEEDBACK_TRACES:
        mine = [r for r in records if r["evaluator"] == name and "reference_trace" in r]
        if not mine:
            continue
        result = feedback_metrics([r["reference_trace"] for r in mine], [r["trace"] for r in mine])
        valid = sum(r["label"] for r in mine)
        lines.append(f"| {name} | {len(mine)} ({valid} / {len(mine) - valid}) | "
                     + " | ".join(_fmt(result[m]) for m in FEEDBACK_METRICS) + " |")
        out[name] = {k: v for k, v in result.items() if k != "per_program"}
    return lines + [""], out


def budget_table(records: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    from leanloop.metrics.budget import budget_curve, build_pools

    largest = None
    curves = {}
    for name in EVALUATORS:
        mine = [r for r in records if r["evaluator"] == name]
        pools = build_pools([r["label"] for r in mine], [r["score"] for r in mine], [r["group"] for r in mine],
                            [r["prediction"] for r in mine], [r["benchmark"] for r in mine], [r["run"] for r in mine])
        curves[name] = budget_curve(pools)
        largest = curves[name]["k"][-1]
    budgets = [k for k in BUDGETS if k <= (largest or 1)]
    first = next(iter(curves.values()))
    lines = ["| evaluator | " + " | ".join(f"k = {k}" for k in budgets) + " |", "|---|" + "---|" * len(budgets)]
    lines += [f"| {name} | " + " | ".join(_fmt(curve["ranked"][k - 1]) for k in budgets) + " |"
              for name, curve in curves.items()]
    lines += ["| random order (exact) | " + " | ".join(_fmt(first["random"][k - 1]) for k in budgets) + " |",
              "| oracle | " + " | ".join(_fmt(first["oracle"][k - 1]) for k in budgets) + " |", ""]
    return lines, curves


def plots(out: Path, summary: dict[str, Any], curves: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = list(summary)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(names, [summary[n]["candidates_per_s"] for n in names], color="tab:blue")
    ax.set(xlabel="candidates / s (scoring wall time)", title="Throughput per configuration")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.5))
    left = np.zeros(len(names))
    for part, color in (("gate_s", "tab:green"), ("load_s", "tab:gray"), ("traces_s", "tab:orange"),
                        ("other_s", "tab:purple")):
        values = np.asarray([summary[n]["timing"][part] for n in names])
        ax.barh(names, values, left=left, color=color, label=part[:-2])
        left += values
    ax.set(xlabel="seconds", title="Time accounting (gate / load-swap / traces / other)")
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # outside: the bars fill the axes
    fig.tight_layout()
    fig.savefig(out / "time_breakdown.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    first = next(iter(curves.values()))
    ax.plot(first["k"], first["oracle"], ls="--", color="black", label="oracle")
    ax.plot(first["k"], first["random"], ls=":", color="grey", label="random order (exact)")
    for name, curve in curves.items():
        ax.plot(curve["k"], curve["ranked"], marker=".", label=name)
    ax.set(xlabel="compilations per problem (k)", ylabel="problems covered", ylim=(0, 1.02),
           title="Budgeted compilation replay")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "budget_coverage.png", dpi=110)
    plt.close(fig)
    return ["throughput.png", "time_breakdown.png", "budget_coverage.png"]


def truncation_note(records: list[dict[str, Any]]) -> str:
    """How many greedy traces the model ended itself: a feedback model that never ends its traces
    (one that has not learned to copy the program) rejects everything through the output limit."""
    judged = [r for r in records if r["evaluator"] == "feedback greedy" and r["unscored"] is None]
    cut = sum(bool(r["truncated"]) for r in judged)
    return (f"Greedy feedback traces cut at the output limit (invalid by the rule): {cut} of the {len(judged)} "
            "judged." + (" The model does not end its traces: every greedy verdict is a rejection."
                         if judged and cut == len(judged) else ""))


def unscored_kind(reason: str) -> str:
    """Why a program was not judged, in a word (a cascade's reason wraps its stage's)."""
    for kind in ("input_too_long", "deadline"):
        if kind in reason:
            return kind
    return reason.split(":")[0]


def write_report(out: Path, config: CascadeEvalConfig, rows: list[dict[str, Any]], records: list[dict[str, Any]],
                 results: dict[str, dict[str, Any]], references: dict[str, str]) -> dict[str, Any]:
    from leanloop.metrics.report import build_report

    predictions = out / "predictions.jsonl"
    with open(predictions, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    main_table, summary = table3(records, results, config.n_resamples, config.seed)
    quality_table, quality = feedback_quality(records)
    budget_lines, curves = budget_table(records)
    images = plots(out, summary, curves)
    build_report(predictions, out / "details", n_resamples=config.n_resamples)

    valid = sum(r["label"] for r in rows)
    unscored = Counter((r["evaluator"], unscored_kind(r["unscored"])) for r in records if r["unscored"])
    g = config.generation
    lines = [
        f"# Cascade evaluation `{config.run}` (the seed's Table 3)", "",
        f"Split `{config.split}` of `{config.corpus}`: {len(rows)} labelled programs of "
        f"{len({r['name'] for r in rows})} problems ({valid} valid, {len(rows) - valid} invalid)"
        + (f", problems drawn at random (seed {config.seed}) up to {config.sample_programs} programs"
           if config.sample_programs else "")
        + (f", at most {config.max_per_problem} candidates of each (a seeded random subset: the budget "
           "replay runs on these)" if config.max_per_problem else ", all candidates of each") + ".",
        f"Gate `{config.cascade.gate}` (threshold {results['one-token']['threshold']:.4g}: "
        f"{'set in the config' if config.cascade.threshold is not None else results['one-token']['threshold_source']}); "
        f"feedback model `{config.feedback}`; generation: greedy, max {g.max_input_tokens} input / {g.max_new_tokens} "
        f"output tokens, copy-drafting {g.draft_tokens} tokens ({g.backend}, {g.device}); self-consistency "
        f"{config.self_consistency.samples} samples at T = {config.self_consistency.temperature}, accept at >= "
        f"{config.self_consistency.min_valid}.",
        f"Intervals: grouped bootstrap over problems, {config.n_resamples} resamples, seed {config.seed}, 95% percentile. "
        "Unscored programs (over the input limit, or past a deadline) count as rejections.", "",
        "## Verdicts", "", *main_table,
        "AUROC needs a graded score: the greedy feedback model and the greedy cascade give hard verdicts.",
        truncation_note(records), "",
        "## Time accounting (seconds for the whole sample)", "",
        "| evaluator | residency | model load | gate | load / swap | traces | other | scoring total | gate positives |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in EVALUATORS:
        t = summary[name]["timing"]
        lines.append(f"| {name} | {results[name].get('residency', 'alone')} | {_fmt(results[name]['load_s'], 2)} | "
                     f"{_fmt(t['gate_s'], 2)} | {_fmt(t['load_s'], 2)} | {_fmt(t['traces_s'], 2)} | {_fmt(t['other_s'], 2)} | "
                     f"{_fmt(results[name]['seconds'], 2)} | {results[name].get('gate_positive', '–')} |")
    lines += ["", "Standalone evaluators load once before scoring (model load column, not in candidates/s); "
              "the cascades' load / swap is inside their scoring time, as in the seed's accounting.", ""]
    if unscored:
        lines += ["### Programs not judged", "", "| evaluator | reason | programs |", "|---|---|---|"]
        lines += [f"| {name} | {reason} | {count} |" for (name, reason), count in sorted(unscored.items())] + [""]
    lines += ["## Feedback quality (sample balanced by label)", "", *quality_table]
    lines += ["## Budgeted compilation replay (share of problems covered with k compilations)", "", *budget_lines]
    lines += ["## Plots", "", *[f"![{name[:-4]}]({name})" for name in images],
              "", "More plots and tables (ROC, PR, reliability, score histograms, feedback-metric distributions, "
              "paired differences): [details/report.md](details/report.md).", ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    body = {"evaluators": summary, "feedback_quality": quality, "budget": curves,
            "programs": len(rows), "valid": valid}
    (out / "summary.json").write_text(json.dumps(body, indent=2, default=float), encoding="utf-8")
    return body


def evaluate(config: CascadeEvalConfig) -> Path:
    import yaml

    from leanloop.artifacts import resolve_model, resolve_run

    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    out = artifacts_root() / STAGE / config.run
    resolved = yaml.safe_dump({k: v for k, v in asdict(config).items() if k != "overwrite"}, sort_keys=True)
    if (out / MANIFEST).is_file() and not config.overwrite:
        if (out / "config.yaml").is_file() and (out / "config.yaml").read_text() == resolved:
            print(f"[cascade-eval] {out} already finished with this config; skipping (--overwrite true to redo)")
            return out / "report.md"
        raise SystemExit(f"[cascade-eval] {out} holds a finished evaluation with a different config; "
                         "choose another --run or pass --overwrite true")
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    (out / "config.yaml").write_text(resolved)

    rows = select_programs(read_corpus(config.corpus, ("id", "program", "name", "split", "category", "label",
                                                       "messages", "reference_trace", "trace_kind", "source")),
                           config.split, config.sample_programs, config.seed, config.max_per_problem)
    references = balanced_sample(rows, config.feedback_per_label, config.seed)
    print(f"[cascade-eval] {len(rows)} programs of split {config.split}; feedback-quality sample {len(references)}",
          file=sys.stderr)
    results = evaluate_all(config, [r["program"] for r in rows])
    records = [record for name in EVALUATORS
               for record in prediction_rows(name, rows, results[name]["predictions"], references)]
    body = write_report(out, config, rows, records, results, references)

    manifest = Manifest(stage=STAGE, run=config.run, seed=config.seed,
                        counts={"programs": len(rows), "valid": body["valid"], "feedback_sample": len(references)},
                        metrics={name: {k: s["metrics"][k] for k in ("accuracy", "f1", "mcc", "auroc", "tpr", "fpr")}
                                 | {"candidates_per_s": s["candidates_per_s"]} for name, s in body["evaluators"].items()},
                        extra={"config_file": "config.yaml"})
    manifest.add_input("corpus", resolve_run(config.corpus, "data"))
    manifest.add_input("feedback_model", resolve_model(config.feedback, "feedback_model").parent)
    manifest.add_input("gate", resolve_model(config.cascade.gate, "classifiers").parent)
    manifest.write(out)
    print(f"[cascade-eval] report: {out / 'report.md'}")
    return out / "report.md"


def main(argv: list[str] | None = None) -> int:
    evaluate(parse_config(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
