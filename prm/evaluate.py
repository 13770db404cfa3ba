"""``make prm-eval``: the step verifier on held-out theorems (and published step-label sets) ->
artifacts/prm_eval/<run>/{report.md, report.png, metrics.json, predictions.jsonl, manifest.json}.

    python -m prm.evaluate --config configs/prm/eval/default.yaml [--limit 50 ...]

Beside the verifier: the base rate (shares of correct steps and proofs), ``always_correct``,
``tfidf_steps`` (a TF-IDF step classifier trained on the train split, :mod:`prm.baselines`),
``first_error_at_random`` (the first wrong step drawn
uniformly from the n steps and "none"), and, when ``classifier`` names a classifiers run, the verdict
classifier applied to proof prefixes (step k is correct while the program of steps 1..k is judged
valid; Lean sets only, they have tactics). Metrics: :mod:`prm.metrics`.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from leanloop.artifacts import Manifest, describe_input, resolve_run
from leanloop.paths import resolve_shared
from leanloop.training.models import load_model, load_tokenizer
from leanloop.training.module import set_torch_threads
from leanloop.jsonl import write_jsonl
from leanloop.tool import run_parsed_tool, run_tool
from prm.config import EvalConfig
from prm.labelled_proofs import LABEL_STAGE, ProofRecord, read_split
from prm.external import read_external
from prm.labels_from_lean import propagate, training_prefix
from prm.metrics import best_of_n, choose_threshold, cumulative, labels_at, ranking, step_metrics
from prm.paired import assemble_program
from prm.predict import greedy_labels, model_layout, wrong_probabilities
from prm.verifier_io import EncodedProof, Layout, encode_proof

EVAL_STAGE = "prm_eval"
VERIFIER_READINGS = ("verifier", "verifier_hazard")
"""The verifier's two step scores: ``verifier`` its P(step k wrong) = 1 - prod_{j <= k} (1 - h_j), and
``verifier_hazard`` its own answer at each step, h_k = P(`` -`` at k | steps before k correct), read
first-error shaped (the running max)."""
RULES = {
    "tfidf_steps@exact": (("tfidf_steps",), "exact"),
    "tfidf_steps@f1": (("tfidf_steps",), "f1_incorrect"),
    "verifier@f1": (VERIFIER_READINGS, "f1_incorrect"),
    "verifier": (VERIFIER_READINGS, "exact"),
}
"""Decision rules chosen on validation: method -> (the scores it may threshold, the metric its score
and threshold are chosen for). ``verifier`` is the verifier's own rule (the exact score,
LeanPRM-Bench's metric)."""
# LeanPRM (seeds/002_bdfe106d82d4c31f.txt, "What we found"): "Choosing among 16 candidate IMO proofs
# with LeanPRM lands on a correct one 35.9% of the time, against 32.4% at random."
PAPER_BEST_OF_N = "LeanPRM: 35.9% verifier pick vs 32.4% random, 16 IMO candidates per problem"


def spread_over_theorems(records: list[ProofRecord]) -> list[ProofRecord]:
    """The proofs in rounds: every theorem's first proof, then every theorem's second, ...; so the
    first N cover as many theorems as N allows (LeanPRM-Bench spreads over its theorems)."""
    by_theorem: dict[str, list[ProofRecord]] = {}
    for record in records:
        by_theorem.setdefault(record.name, []).append(record)
    rounds = max((len(v) for v in by_theorem.values()), default=0)
    return [proofs[i] for i in range(rounds) for proofs in by_theorem.values() if i < len(proofs)]


def prepared_proofs(
    records: list[ProofRecord], config: EvalConfig
) -> tuple[list[ProofRecord], list[list[bool]], int, int]:
    """(kept proofs, their labelled prefixes cut to ``max_steps``, proofs skipped, proofs cut); with
    a ``limit``, chosen across theorems (:func:`spread_over_theorems`)."""
    labelled = [r for r in records if training_prefix(r.labels)]
    kept, truth, skipped, cut = [], [], len(records) - len(labelled), 0
    for record in spread_over_theorems(labelled):  # rounds over the theorems that have labels
        labels = training_prefix(record.labels)
        if len(labels) > config.max_steps:
            labels, cut = labels[: config.max_steps], cut + 1
        kept.append(record)
        truth.append(labels)
        if config.limit and len(kept) >= config.limit:
            break
    return kept, truth, skipped, cut


def base_rates(truth: list[list[bool]]) -> dict[str, float]:
    """Shares of correct steps and of all-correct proofs among the evaluated labels."""
    steps = [label for labels in truth for label in labels]
    return {
        "correct_steps": sum(steps) / max(len(steps), 1),
        "correct_proofs": sum(all(t) for t in truth) / max(len(truth), 1),
    }


def random_first_error(truth: list[list[bool]], seed: int) -> list[list[bool]]:
    rng = random.Random(seed)
    out = []
    for labels in truth:
        k = rng.randint(0, len(labels))  # len(labels): no wrong step
        out.append([l for l, _ in propagate(len(labels), None if k == len(labels) else k, "")])
    return out


def classifier_prefixes(
    records: list[ProofRecord], truth: list[list[bool]], final_dir: Path
) -> list[list[bool] | None]:
    from classifiers.evaluator import ClassifierEvaluator

    evaluator = ClassifierEvaluator.load(final_dir)
    programs, owners = [], []
    for i, (record, labels) in enumerate(zip(records, truth)):
        tactics = [s["tactic"] for s in record.steps[: len(labels)]]
        if not all(tactics):
            continue
        for k in range(1, len(tactics) + 1):
            programs.append(assemble_program(record.header, record.statement, tactics[:k]))
            owners.append(i)
    verdicts = [p.verdict for p in evaluator.score(programs)]
    predicted: list[list[bool] | None] = [
        None if not all(s["tactic"] for s in r.steps[: len(t)]) else [] for r, t in zip(records, truth)
    ]
    for owner, verdict in zip(owners, verdicts):
        predicted[owner].append(bool(verdict) and (not predicted[owner] or predicted[owner][-1]))
    return predicted


def encoded_proofs(
    kept: list[ProofRecord], truth: list[list[bool]], tokenizer: Any, layout: Layout
) -> list[EncodedProof]:
    """The proofs as the verifier reads them, every labelled step shown marked correct."""
    return [
        encode_proof(r.statement, [s["prose"] for s in r.steps[: len(t)]], None, tokenizer, layout)
        for r, t in zip(kept, truth)
    ]


def verifier_scores(
    kept: list[ProofRecord], truth: list[list[bool]], model: Any, tokenizer: Any, config: EvalConfig
) -> tuple[list[EncodedProof], dict[str, list[list[float]]]]:
    """The encoded proofs and the verifier's :data:`VERIFIER_READINGS` for every labelled step shown."""
    proofs = encoded_proofs(kept, truth, tokenizer, model_layout(config.model, config.layout))
    hazards = wrong_probabilities(model, tokenizer, proofs, config.batch_size, progress=True, cumulative=False)
    return proofs, {
        "verifier": [cumulative(h) for h in hazards],
        "verifier_hazard": [np.maximum.accumulate(np.asarray(h)).tolist() for h in hazards],
    }


def rule_predictions(scored: dict[str, list[list[float]]], rules: dict[str, Any]) -> dict[str, list[list[bool]]]:
    """Each decision rule's step labels: its chosen score at its chosen threshold."""
    return {
        method: labels_at(scored[rules["sources"][method]], t)
        for method, t in rules["thresholds"].items()
        if rules["sources"][method] in scored
    }


def decision_rules(
    records: list[ProofRecord], model: Any, tokenizer: Any, config: EvalConfig, tfidf: Any
) -> dict[str, Any]:
    """The score and threshold of each of :data:`RULES` with the best objective on the decision split
    (validation theorems, every labelled proof of them, the same ``max_steps``; ties go to the score
    listed first)."""
    kept, truth, _, _ = prepared_proofs(records, dataclasses.replace(config, limit=None))
    if not kept:
        raise ValueError(
            f"the decision split {config.decision_split!r} has no labelled proofs: set decision_split null"
        )
    scores = verifier_scores(kept, truth, model, tokenizer, config)[1]
    if tfidf is not None:
        scores["tfidf_steps"] = tfidf.wrong_probabilities(kept, truth)
    chosen = {}
    for method, (sources, objective) in RULES.items():
        options = [
            (source, *choose_threshold(scores[source], truth, objective)) for source in sources if source in scores
        ]
        if options:
            chosen[method] = max(options, key=lambda o: (o[2][objective], -sources.index(o[0])))
    return {
        "split": config.decision_split,
        "proofs": len(kept),
        "sources": {m: source for m, (source, _, _) in chosen.items()},
        "thresholds": {m: t for m, (_, t, _) in chosen.items()},
        "metrics": {m: metrics for m, (_, _, metrics) in chosen.items()},
    }


def evaluate_set(
    name: str,
    records: list[ProofRecord],
    model: Any,
    tokenizer: Any,
    config: EvalConfig,
    classifier: Path | None,
    tfidf: Any = None,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One set's metrics per method, baselines first. ``tfidf``: the TF-IDF step classifier fitted on
    labelled proofs of the same kind (the Lean set's train split). ``rules``: the decision rules
    chosen on validation (:func:`decision_rules`); without them the verifier flags at P(wrong) >= 0.5."""
    kept, truth, skipped, cut = prepared_proofs(records, config)
    if not kept:
        return {
            "name": name,
            "skipped": skipped,
            "cut": cut,
            "methods": {},
            "best_of_n": {},
            "ranking": {},
            "rows": [],
            "base_rate": {},
            "theorems": 0,
        }
    proofs, scored = verifier_scores(kept, truth, model, tokenizer, config)
    predictions = {
        "always_correct": [[True] * len(t) for t in truth],
        "first_error_at_random": random_first_error(truth, config.seed),
    }
    if tfidf is not None:
        scored["tfidf_steps"] = tfidf.wrong_probabilities(kept, truth)
        predictions["tfidf_steps"] = labels_at(scored["tfidf_steps"], 0.5)
    if classifier is not None and any(s["tactic"] for r in kept for s in r.steps):
        predictions["classifier_prefixes"] = classifier_prefixes(kept, truth, classifier)
    predictions["verifier_greedy"] = greedy_labels(
        model, tokenizer, proofs, model_layout(config.model, config.layout), config.batch_size, progress=True
    )
    predictions.update(rule_predictions(scored, rules) if rules else {"verifier": labels_at(scored["verifier"], 0.5)})
    groups = [r.name for r in kept]
    correct = [r.proof_label for r in kept]
    proof_wrong = {m: [proof[-1] for proof in s] for m, s in scored.items()}
    if rules:
        proof_wrong.update({m: proof_wrong[s] for m, s in rules["sources"].items() if s in proof_wrong})
    methods = {m: step_metrics(p, truth) for m, p in predictions.items()}
    bon = {m: best_of_n(groups, p, correct, config.seed, proof_wrong.get(m)) for m, p in predictions.items()}
    rows = [
        {"proof_id": r.proof_id, "truth": t, "greedy": g, "p_wrong": w, "hazard": h, "predicted": p}
        for r, t, g, w, h, p in zip(
            kept,
            truth,
            predictions["verifier_greedy"],
            scored["verifier"],
            scored["verifier_hazard"],
            predictions["verifier"],
        )
    ]
    return {
        "name": name,
        "skipped": skipped,
        "cut": cut,
        "methods": methods,
        "best_of_n": bon,
        "rows": rows,
        "ranking": {m: ranking(s, truth) for m, s in scored.items()},
        "base_rate": base_rates(truth),
        "theorems": len({r.name for r in kept}),
        "theorems_in_set": len({r.name for r in records}),
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def decision_rule_lines(rules: dict[str, Any] | None) -> list[str]:
    if rules is None:
        return ["Decision rule: `verifier` flags step k wrong when its P(step k wrong) >= 0.5 (no decision split)."]
    t, m, s = rules["thresholds"], rules["metrics"], rules["sources"]
    lines = [
        f"Decision rules, chosen on the `{rules['split']}` split (all its {rules['proofs']} labelled proofs, held-out "
        "theorems of their own): a step is flagged wrong from the first step whose score is >= a threshold; the "
        "score and threshold are the ones with the best exact score there (`verifier`, `tfidf_steps@exact`) or the "
        "best F1 on wrong steps (`verifier@f1`, `tfidf_steps@f1`). The verifier's scores: `verifier`, its P(step k "
        "wrong) = 1 - prod over j <= k of its P(`+` at j) after correct steps; `verifier_hazard`, its own P(`-` at k) "
        "after correct steps. `tfidf_steps` flags at 0.5; `verifier_greedy` is the verifier's greedy answer.",
        "",
        "| rule | score | threshold | valid exact | valid F1 (incorrect) |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [
        f"| {method} | {s[method]} | {t[method]:.3f} | {_pct(m[method]['exact'])} | {m[method]['f1_incorrect']:.3f} |"
        for method in t
    ]
    return lines


def write_report(
    folder: Path,
    config: EvalConfig,
    results: list[dict],
    data_manifest: dict | None,
    rules: dict[str, Any] | None = None,
) -> None:
    from leanloop.plots import pyplot, save

    plt = pyplot()

    lines = [f"# prm-eval `{config.run}`", "", f"Verifier: `{config.model.name}`."]
    if data_manifest is not None:
        lines.append(
            f"Held-out theorems: the `{config.split}` split of `{config.dataset}` "
            f"({data_manifest.get('label_kind', 'step labels from Lean')}; reviewer: "
            f"{data_manifest.get('reviewer', '?')}"
            + (
                ": every Lean failure counts"
                if data_manifest.get("reviewer") == "none"
                else ": failures it did not judge mathematical keep no negative labels"
            )
            + ")."
        )
    lines += [
        "",
        "Exact = every step label right (LeanPRM-Bench's metric). First error = the predicted first "
        "wrong step (or none) is right. F1 (incorrect) treats wrong steps as positives. Unparsable verifier "
        "answers are wrong for exact / first error and read as all-correct per step. Baselines first, "
        "the verifier last; its decision rules (chosen on validation) are below the sets.",
        "",
    ]
    for result in results:
        lines += [f"## {result['name']}", ""]
        if not result["methods"]:
            lines += [f"No proof with labelled steps ({result['skipped']} skipped).", ""]
            continue
        any_metrics = next(iter(result["methods"].values()))
        rate = result["base_rate"]
        lines += [
            f"{int(any_metrics['proofs'])} proofs of {result['theorems']} theorems (of "
            f"{result['theorems_in_set']} in the set), {int(any_metrics['steps'])} steps "
            f"({result['skipped']} proofs without labels skipped; {result['cut']} longer than "
            f"{config.max_steps} labelled steps cut to their first {config.max_steps}).",
            "",
            f"Base rate: {_pct(rate['correct_steps'])} of the labelled steps are correct and "
            f"{_pct(rate['correct_proofs'])} of the proofs are correct at every step (`always_correct`'s exact "
            "score). A verifier adds something only above `always_correct` and `tfidf_steps` (a TF-IDF "
            "logistic regression on each step's text, trained on the train split's labelled steps).",
            "",
            "| method | exact | first error | step acc. | F1 (incorrect) | F1 (correct) | parsed |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for method, m in result["methods"].items():
            lines.append(
                f"| {method} | {_pct(m['exact'])} | {_pct(m['first_error'])} | {_pct(m['step_accuracy'])} | "
                f"{m['f1_incorrect']:.3f} | {m['f1_correct']:.3f} | {_pct(m['parsed'])} |"
            )
        lines += [
            "",
            "Ranking wrong steps first at every threshold (the precision-recall curve: `pr_curve.png`):",
            "",
            "| scored by | average precision (wrong steps) | AUROC |",
            "|---|---:|---:|",
            f"| random | {1 - rate['correct_steps']:.3f} | 0.500 |",
        ]
        lines += [
            f"| {m} | {x['average_precision']:.3f} | {x['auroc']:.3f} |" for m, x in result["ranking"].items() if x
        ]
        bon = {k: v for k, v in result["best_of_n"].items() if v}
        lines += [
            "",
            "Best-of-n: a scoring method picks the candidate with the lowest P(some step wrong), the others "
            "the one they label all-correct (then most correct steps).",
            "",
        ]
        if bon:
            b = next(iter(bon.values()))
            lines += [
                f"Best-of-n over {int(b['problems'])} problems ({int(b['candidates'])} candidates; paper: "
                f"{PAPER_BEST_OF_N}):",
                "",
                "| picked by | correct pick | random pick |",
                "|---|---:|---:|",
            ]
            lines += [f"| {k} | {_pct(v['verifier_pick'])} | {_pct(v['random_pick'])} |" for k, v in bon.items()]
        else:
            lines += ["Best-of-n: not computable here (no problem with >= 2 candidates of known correctness)."]
        lines += [""]
    lines += [*decision_rule_lines(rules), "", "![metrics](report.png)", "", "![precision-recall](pr_curve.png)", ""]
    (folder / "report.md").write_text("\n".join(lines), encoding="utf-8")
    shown = [r for r in results if r["methods"]]
    fig, axes = plt.subplots(1, max(1, len(shown)), figsize=(5.5 * max(1, len(shown)), 3.6), squeeze=False)
    for ax, result in zip(axes[0], shown):
        names = list(result["methods"])
        keys = ["exact", "first_error", "f1_incorrect"]
        width = 0.8 / len(names)
        for j, method in enumerate(names):
            ax.bar(
                [i + j * width for i in range(len(keys))],
                [result["methods"][method][k] for k in keys],
                width,
                label=method,
            )
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))], keys)
        ax.set_ylim(0, 1)
        ax.set_title(result["name"])
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, folder / "report.png", dpi=110)
    pr_figure(shown, folder / "pr_curve.png")


def pr_figure(results: list[dict], path: Path) -> None:
    """Precision-recall on wrong steps per set: each scoring method's curve, random's level line, and
    every labelling method's point."""
    from leanloop.plots import pyplot, save

    fig, axes = pyplot().subplots(1, max(1, len(results)), figsize=(5.5 * max(1, len(results)), 4.2), squeeze=False)
    for ax, result in zip(axes[0], results):
        rate = 1 - result["base_rate"]["correct_steps"]
        ax.axhline(rate, color="grey", linestyle=":", label=f"random ({rate:.2f})")
        for method, x in result["ranking"].items():
            if x:
                ax.plot(
                    x["curve"]["recall"], x["curve"]["precision"], label=f"{method} (AP {x['average_precision']:.2f})"
                )
        for method, m in result["methods"].items():
            if m["precision_incorrect"] is not None and m["recall_incorrect"] is not None:
                ax.plot(m["recall_incorrect"], m["precision_incorrect"], "o", markersize=5, label=f"{method} labels")
        ax.set(
            xlim=(0, 1), ylim=(0, 1.02), xlabel="recall (wrong steps)", ylabel="precision", title=result["name"][:60]
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path, dpi=110)


def work(config: EvalConfig, folder: Path) -> Manifest:
    set_torch_threads(config.threads)
    manifest = Manifest(stage=EVAL_STAGE, run=config.run, seed=config.seed)
    tokenizer = load_tokenizer(config.model)
    model = load_model(config.model, tokenizer=tokenizer).eval()
    if config.model.run_dir() is not None:
        manifest.inputs["verifier"] = describe_input(config.model.run_dir())
    config.layout = model_layout(config.model, config.layout)
    classifier = None
    if config.classifier:
        classifier = resolve_run(config.classifier, "classifiers") / "final"
        manifest.inputs["classifier"] = describe_input(classifier.parent)
    sets: list[tuple[str, list[ProofRecord], Any]] = []
    data_manifest, rules = None, None
    if config.dataset:
        from prm.baselines import TfidfStepClassifier

        data = resolve_run(config.dataset, LABEL_STAGE)
        data_manifest = json.loads((data / "manifest.json").read_text())
        manifest.inputs["dataset"] = describe_input(data)
        tfidf = TfidfStepClassifier(config.seed).fit(read_split(data, "train"), config.max_steps)
        if config.decision_split:
            rules = decision_rules(read_split(data, config.decision_split), model, tokenizer, config, tfidf)
        sets.append((f"Lean step labels, held-out theorems ({config.split})", read_split(data, config.split), tfidf))
    for external in config.external:
        manifest.add_input(f"external:{external.format}", resolve_shared(external.path))
        records = read_external(external.format, external.path)
        sets.append((f"{external.format}: {Path(external.path).name}", records[: external.limit or None], None))
    if not sets:
        raise ValueError("nothing to evaluate: set dataset and/or external")
    results = [
        evaluate_set(name, records, model, tokenizer, config, classifier, tfidf, rules) for name, records, tfidf in sets
    ]
    write_jsonl(folder / "predictions.jsonl", ({"set": r["name"], **row} for r in results for row in r["rows"]))
    summary = {
        r["name"]: {
            "methods": r["methods"],
            "best_of_n": r["best_of_n"],
            "skipped": r["skipped"],
            "cut": r["cut"],
            "base_rate": r["base_rate"],
            "theorems": r["theorems"],
            "ranking": {m: {k: v for k, v in x.items() if k != "curve"} for m, x in r["ranking"].items()},
            "decision_rule": rules,
        }
        for r in results
    }
    (folder / "metrics.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    write_report(folder, config, results, data_manifest, rules)
    manifest.metrics = {
        f"{r['name']}/{m}/{k}": v
        for r in results
        for m, vals in r["methods"].items()
        for k, v in vals.items()
        if k in ("exact", "first_error", "f1_incorrect")
    }
    print(f"[prm-eval] report: {folder / 'report.md'}")
    for r in results:
        if r["methods"]:
            print(
                f"[prm-eval] {r['name']}: "
                + ", ".join(f"{m} exact {_pct(v['exact'])}" for m, v in r["methods"].items())
            )
    return manifest


def run(config: EvalConfig, resolved_yaml: str = "") -> Path:
    """Evaluate from code (tests, drivers): the same run folder rules as the command line."""
    return run_parsed_tool(EVAL_STAGE, config, resolved_yaml, work, run=config.run).run_dir


def main(argv: list[str] | None = None) -> None:
    run_tool(EVAL_STAGE, EvalConfig, work, argv, prog="python -m prm.evaluate")


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m prm.evaluate"))
