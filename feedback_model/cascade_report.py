"""The cascade evaluation's report (``python -m feedback_model.cascade_eval``): Table 3 with grouped
bootstrap intervals, feedback quality, the budgeted compilation replay, and the plots, written from the
evaluation's prediction records (as :mod:`rl.report` is for the RL stage)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from feedback_model.config import CascadeEvalConfig

EVALUATORS = (
    "one-token",
    "feedback greedy",
    "feedback self-consistency",
    "cascade",
    "cascade + self-consistency",
    "cascade (calibrated gate)",
)
GRADED = {"one-token", "feedback self-consistency", "cascade + self-consistency"}  # AUROC defined
FEEDBACK_TRACES = ("feedback greedy", "feedback self-consistency")
CASCADES = ("cascade", "cascade + self-consistency", "cascade (calibrated gate)")
BUDGETS = (1, 2, 4, 8)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def mean_cost(records: list[dict[str, Any]]) -> dict[str, float] | None:
    """Mean per-candidate cost terms of a cascade's records and their sum, LLF Eq. 13's
    C_gate + q C_trace|gate+ + (C_load/swap + C_other) / N (``total_s``); None for an evaluator that
    records none."""
    costs = [r["cost"] for r in records if r.get("cost")]
    if not costs:
        return None
    means = {term: float(np.mean([c.get(term, 0.0) for c in costs])) for term in costs[0]}
    means["total_s"] = sum(means.values())
    return means


def bootstrap_group(record: dict[str, Any]) -> tuple[str, str]:
    """LLF's bootstrap unit: benchmark + problem (the same problem name in two benchmarks is two)."""
    return (record["benchmark"], record["group"])


def _with_interval(point: float, interval: Any) -> str:
    return f"{_fmt(point)} [{_fmt(interval.low)}, {_fmt(interval.high)}]"


def table3(
    records: list[dict[str, Any]], results: dict[str, dict[str, Any]], n_resamples: int, seed: int
) -> tuple[list[str], dict[str, Any]]:
    """The verdicts table: the baselines' rows first, then the six evaluators'."""
    from leanloop.metrics.bootstrap import grouped_bootstrap
    from leanloop.metrics.verdicts import verdict_metrics

    lines = [
        "| evaluator | n | accuracy | F1 (valid) | MCC | AUROC | valid recall | FPR | unscored | candidates/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    summary: dict[str, Any] = {}
    for name in dict.fromkeys(r["evaluator"] for r in records):
        mine = [r for r in records if r["evaluator"] == name]
        labels = [r["label"] for r in mine]
        scores = [r["score"] for r in mine]
        verdicts = [r["prediction"] for r in mine]
        groups = [bootstrap_group(r) for r in mine]
        metrics = verdict_metrics(labels, scores, verdicts)
        intervals = grouped_bootstrap(labels, groups, scores, verdicts, n_resamples=n_resamples, seed=seed)
        graded = name in GRADED or name not in EVALUATORS  # every baseline has a graded score
        throughput = len(mine) / results[name]["seconds"] if results[name]["seconds"] > 0 else float("nan")
        unscored = sum(r["unscored"] is not None for r in mine)
        auroc_cell = _with_interval(metrics["auroc"], intervals["auroc"]) if graded else "– (hard verdict)"
        lines.append(
            f"| {name} | {len(mine)} | {_with_interval(metrics['accuracy'], intervals['accuracy'])} | "
            f"{_with_interval(metrics['f1'], intervals['f1'])} | {_with_interval(metrics['mcc'], intervals['mcc'])} | "
            f"{auroc_cell} | {_with_interval(metrics['recall_valid'], intervals['recall_valid'])} | "
            f"{_with_interval(metrics['fpr'], intervals['fpr'])} | {unscored} | {throughput:.2f} |"
        )
        summary[name] = {
            "metrics": {k: v for k, v in metrics.items() if k != "ppv_at"},
            "intervals": {k: v.to_dict() for k, v in intervals.items()},
            "auroc_defined": graded,
            "unscored": unscored,
            "candidates_per_s": throughput,
            "scoring_s": results[name]["seconds"],
            "load_s": results[name]["load_s"],
            "timing": results[name]["timing"],
            "cost_per_candidate": mean_cost(mine),
        }
    return lines + [""], summary


def feedback_quality(records: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    from leanloop.metrics.feedback import FEEDBACK_METRICS, feedback_metrics

    lines = [
        "| evaluator | programs (valid / invalid) | " + " | ".join(FEEDBACK_METRICS) + " |",
        "|---|---|" + "---|" * len(FEEDBACK_METRICS),
    ]
    out = {}
    for name in FEEDBACK_TRACES:
        mine = [r for r in records if r["evaluator"] == name and "reference_trace" in r]
        if not mine:
            continue
        result = feedback_metrics([r["reference_trace"] for r in mine], [r["trace"] for r in mine])
        valid = sum(r["label"] for r in mine)
        lines.append(
            f"| {name} | {len(mine)} ({valid} / {len(mine) - valid}) | "
            + " | ".join(_fmt(result[m]) for m in FEEDBACK_METRICS)
            + " |"
        )
        out[name] = {k: v for k, v in result.items() if k != "per_program"}
    return lines + [""], out


def budget_table(records: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    from leanloop.metrics.budget import budget_curve, build_pools

    largest = None
    # LLF App. G ranks a cascade's candidates by its verdict, ties broken by the one-token score (the
    # cascade's own score is 0/1 and would leave every accepted candidate tied).
    gate_scores = {r["id"]: r["score"] for r in records if r["evaluator"] == "one-token"}
    curves = {}
    for name in EVALUATORS:
        mine = [r for r in records if r["evaluator"] == name]
        ranking = [gate_scores.get(r["id"], r["score"]) if name in CASCADES else r["score"] for r in mine]
        pools = build_pools(
            [r["label"] for r in mine],
            ranking,
            [r["group"] for r in mine],
            [r["prediction"] for r in mine],
            [r["benchmark"] for r in mine],
            [r["run"] for r in mine],
        )
        curves[name] = budget_curve(pools)
        largest = curves[name]["k"][-1]
    budgets = [k for k in BUDGETS if k <= (largest or 1)]
    first = next(iter(curves.values()))
    lines = ["| evaluator | " + " | ".join(f"k = {k}" for k in budgets) + " |", "|---|" + "---|" * len(budgets)]
    lines += [
        f"| {name} | " + " | ".join(_fmt(curve["ranked"][k - 1]) for k in budgets) + " |"
        for name, curve in curves.items()
    ]
    lines += [
        "| random order (exact) | " + " | ".join(_fmt(first["random"][k - 1]) for k in budgets) + " |",
        "| oracle | " + " | ".join(_fmt(first["oracle"][k - 1]) for k in budgets) + " |",
        "",
    ]
    return lines, curves


def plots(out: Path, summary: dict[str, Any], curves: dict[str, Any]) -> list[str]:
    from leanloop.plots import pyplot, save

    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    names = [name for name in summary if name in EVALUATORS]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(names, [summary[n]["candidates_per_s"] for n in names], color="tab:blue")
    ax.set(xlabel="candidates / s (scoring wall time)", title="Throughput per configuration")
    ax.invert_yaxis()
    fig.tight_layout()
    save(fig, out / "throughput.png", dpi=110)

    fig, ax = plt.subplots(figsize=(8, 3.5))
    left = np.zeros(len(names))
    for part, color in (
        ("gate_s", "tab:green"),
        ("load_s", "tab:gray"),
        ("traces_s", "tab:orange"),
        ("other_s", "tab:purple"),
    ):
        values = np.asarray([summary[n]["timing"][part] for n in names])
        ax.barh(names, values, left=left, color=color, label=part[:-2])
        left += values
    ax.set(xlabel="seconds", title="Time accounting (gate / load-swap / traces / other)")
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # outside: the bars fill the axes
    fig.tight_layout()
    save(fig, out / "time_breakdown.png", dpi=110)

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    first = next(iter(curves.values()))
    ax.plot(first["k"], first["oracle"], ls="--", color="black", label="oracle")
    ax.plot(first["k"], first["random"], ls=":", color="grey", label="random order (exact)")
    for name, curve in curves.items():
        ax.plot(curve["k"], curve["ranked"], marker=".", label=name)
    ax.set(
        xlabel="compilations per problem (k)",
        ylabel="problems covered",
        ylim=(0, 1.02),
        title="Budgeted compilation replay",
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    save(fig, out / "budget_coverage.png", dpi=110)
    return ["throughput.png", "time_breakdown.png", "budget_coverage.png"]


def truncation_note(records: list[dict[str, Any]]) -> str:
    """How many greedy traces the model ended itself: a feedback model that never ends its traces
    (one that has not learned to copy the program) rejects everything through the output limit."""
    judged = [r for r in records if r["evaluator"] == "feedback greedy" and r["unscored"] is None]
    cut = sum(bool(r["truncated"]) for r in judged)
    return (
        f"Greedy feedback traces cut at the output limit (invalid by the rule): {cut} of the {len(judged)} "
        "judged."
        + (
            " The model does not end its traces: every greedy verdict is a rejection."
            if judged and cut == len(judged)
            else ""
        )
    )


def unscored_kind(reason: str) -> str:
    """Why a program was not judged, in a word (a cascade's reason wraps its stage's)."""
    for kind in ("input_too_long", "deadline"):
        if kind in reason:
            return kind
    return reason.split(":")[0]


def write_report(
    out: Path,
    config: CascadeEvalConfig,
    rows: list[dict[str, Any]],
    records: list[dict[str, Any]],
    results: dict[str, dict[str, Any]],
    references: dict[str, str],
) -> dict[str, Any]:
    """``records``: the baselines' rows (``results[name]["baseline"]`` says how each was fitted)
    first, then the six evaluators'."""
    from classifiers.evaluator import BASELINES
    from leanloop.metrics.report import baseline_verdict, build_report

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
    trivial = {name: results[name]["baseline"] for name in BASELINES if name in results}
    verdict = baseline_verdict(summary, EVALUATORS, list(trivial), config.split)
    fitted = next(iter(trivial.values()), None)
    lines = [
        *verdict[:1],
        f"# Cascade evaluation `{config.run}` (the seed's Table 3)",
        "",
        *verdict[2:],
        (
            f"How the baselines (the verdicts table's first rows, as in the classifier reports) were made: fitted on the corpus's "
            f"training split ({fitted['train_programs']} labelled programs), each thresholded at its best MCC "
            f"on {fitted['threshold_split']}; the sibling rate reveals a seeded "
            f"{fitted['reveal_fraction']:.0%} of each problem's evaluated programs, as a hybrid step knows them at its cutoff."
            if fitted
            else f"No baselines: {results.get('baselines_missing', 'the corpus has no labelled training split')}."
        ),
        "",
        f"Split `{config.split}` of `{config.corpus}`: {len(rows)} labelled programs of "
        f"{len({r['name'] for r in rows})} problems ({valid} valid, {len(rows) - valid} invalid)"
        + (
            f", problems drawn at random (seed {config.seed}) up to {config.sample_programs} programs"
            if config.sample_programs
            else ""
        )
        + (
            f", at most {config.max_per_problem} candidates of each (a seeded random subset: the budget "
            "replay runs on these)"
            if config.max_per_problem
            else ", all candidates of each"
        )
        + ".",
        f"Gate `{config.cascade.gate}` (threshold {results['one-token']['threshold']:.4g}: "
        f"{'set in the config' if config.cascade.threshold is not None else results['one-token']['threshold_source']}); "
        f"feedback model `{config.feedback}`; generation: greedy, max {g.max_input_tokens} input / {g.max_new_tokens} "
        f"output tokens, copy-drafting {g.draft_tokens} tokens ({g.backend}, {g.device}); self-consistency "
        f"{config.self_consistency.samples} samples at T = {config.self_consistency.temperature}, accept at >= "
        f"{config.self_consistency.min_valid}.",
        f"Intervals: grouped bootstrap over problems, {config.n_resamples} resamples, seed {config.seed}, 95% percentile. "
        "Unscored programs (over the input limit, or past a deadline) count as rejections.",
        "",
        "## Verdicts",
        "",
        *main_table,
        "AUROC needs a graded score: the greedy feedback model and the greedy cascade give hard verdicts.",
        truncation_note(records),
        "",
        "## Time accounting (seconds for the whole sample)",
        "",
        "| evaluator | residency | model load | gate | load / swap | traces | other | scoring total | gate positives |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in EVALUATORS:
        t = summary[name]["timing"]
        lines.append(
            f"| {name} | {results[name].get('residency', 'alone')} | {_fmt(results[name]['load_s'], 2)} | "
            f"{_fmt(t['gate_s'], 2)} | {_fmt(t['load_s'], 2)} | {_fmt(t['traces_s'], 2)} | {_fmt(t['other_s'], 2)} | "
            f"{_fmt(results[name]['seconds'], 2)} | {results[name].get('gate_positive', '–')} |"
        )
    lines += [
        "",
        "Standalone evaluators load once before scoring (model load column, not in candidates/s); "
        "the cascades' load / swap is inside their scoring time, as in the seed's accounting.",
        "",
    ]
    if unscored:
        lines += ["### Programs not judged", "", "| evaluator | reason | programs |", "|---|---|---|"]
        lines += [f"| {name} | {reason} | {count} |" for (name, reason), count in sorted(unscored.items())] + [""]
    lines += ["## Feedback quality (sample balanced by label)", "", *quality_table]
    lines += ["## Budgeted compilation replay (share of problems covered with k compilations)", "", *budget_lines]
    lines += [
        "## Plots",
        "",
        *[f"![{name[:-4]}]({name})" for name in images],
        "",
        "More plots and tables (ROC, PR, reliability, score histograms, feedback-metric distributions, "
        "paired differences): [details/report.md](details/report.md).",
        "",
    ]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    body = {
        "evaluators": summary,
        "baselines": trivial,
        "feedback_quality": quality,
        "budget": curves,
        "programs": len(rows),
        "valid": valid,
    }
    (out / "summary.json").write_text(json.dumps(body, indent=2, default=float), encoding="utf-8")
    return body
