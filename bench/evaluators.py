"""``python -m bench.evaluators`` (``make bench-evaluators``): the history-aware evaluator against its
parts, measured the way a hybrid RL step meets it, on real recorded Lean verdicts.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.evidence import History, gather_evidence, shrunk_rate
from classifiers.history import REVEAL_FRACTION, reveal_siblings
from classifiers.stacker import Stacker
from leanloop.paths import shared_data_dir

RL_LEAN = "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
APOLLO = "candidates/apollo_deepseek_v2_split_prover_minif2f_test.jsonl.gz"
FOLDS = 5
COMPONENTS = ("learned", "problem_prior", "sibling_rate", "evidence", "neighbour", "stack")


@dataclass
class EvaluatorsBenchConfig:
    """``python -m bench.evaluators`` options."""

    history_rounds: int = 4
    """H: RL-Lean rounds 0..H-1 are the history."""
    valid_rounds: int = 2
    """V: the next V rounds are the validation block (stacker and thresholds); the rest are the test."""
    smoke: bool = False
    """RL-Lean only, its first 60 problems, 100 resamples (seconds; the numbers mean nothing)."""
    classifier: str | None = None
    """A classifier run (``artifacts://classifiers/<run>``): also score the APOLLO attempts with the
    history-aware evaluator it saved, ``corpus`` as the history, as ``leanloop classify --history``
    and rl's hybrid reward use it (its own model, stacker and thresholds; nothing refitted)."""
    corpus: str = "artifacts://data/default"
    """The data run whose Lean labels are the history of ``classifier``'s measurement."""
    json: str | None = None
    """Also write the numbers to this file."""


def rl_lean_rows(shared: Path) -> list[dict[str, Any]]:
    """Answered RL-Lean candidates: name, round, label, program, verification time."""
    from leanloop.lean.replies import parse_response
    from leanloop.traces.reference_pairs import iter_rl_lean

    rows = []
    for record in iter_rl_lean(shared / RL_LEAN):
        response = parse_response(record.reply, record.program)
        if response.status.value != "ok":
            continue  # timeouts and crashes: no label
        found = re.search(r"round(\d+)", record.extra["source"])
        rows.append(
            {
                "name": record.extra["name"],
                "round": int(found.group(1)),
                "program": record.program,
                "label": bool(record.extra["verdict_pass"]),
                "time_s": float(response.time_s),
            }
        )
    return rows


def apollo_rows(shared: Path) -> list[dict[str, Any]]:
    """APOLLO attempts with a Lean verdict ("No 'theorem' found" and timeouts are not verdicts)."""
    rows = []
    with gzip.open(shared / APOLLO, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            messages = str(row.get("messages") or "")
            if (
                row.get("verdict") is None
                or "No 'theorem' found" in messages
                or "timed out" in messages.lower()
                or row.get("status") == "timeout"
            ):
                continue
            rows.append(
                {"name": row["name"], "program": row["program"], "label": bool(row["verdict"]), "prover": row["prover"]}
            )
    return rows


def problem_fold(name: str, folds: int) -> int:
    import hashlib

    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % folds


def learned_scorer(train: list[dict[str, Any]], folds: int = FOLDS):
    """TF-IDF + logistic regression, cross-fitted by problem: a row is scored by the model fitted on the
    other folds' problems, so the learned score never saw its problem (as a classifier trained on a
    theorem-disjoint corpus meets a new problem) and carries what the program says, not which problem
    it is; the per-problem part is the evidence's job."""
    from classifiers.baselines import TfidfBaseline

    models = {}
    for fold in range(folds):
        rows = [r for r in train if problem_fold(r["name"], folds) != fold]
        models[fold] = TfidfBaseline().fit([r["program"] for r in rows], [r["label"] for r in rows])

    def score(rows: list[dict[str, Any]]) -> np.ndarray:
        out = np.zeros(len(rows))
        for fold, model in models.items():
            index = [i for i, r in enumerate(rows) if problem_fold(r["name"], folds) == fold]
            if index:
                out[index] = model.scores([rows[i]["program"] for i in index])
        return out

    return score


def block(
    rows: list[dict[str, Any]], history: History, scorer, known: list[bool | None], prior_mean: float
) -> dict[str, np.ndarray]:
    """Component scores of the unrevealed rows of one block (with their labels)."""
    groups = [r["name"] for r in rows]
    hidden = [i for i, k in enumerate(known) if k is None]
    evidence = gather_evidence(history, [r["program"] for r in rows], groups, known, hidden)
    learned = scorer([rows[i] for i in hidden])

    def rate(counts, prior: float) -> np.ndarray:
        return shrunk_rate([v for v, _ in counts], [t for _, t in counts], prior)

    return {
        "labels": np.asarray([rows[i]["label"] for i in hidden], dtype=int),
        "learned": np.asarray(learned),
        # Laplace for the single-source rates (an unseen problem scores 0.5), the fit split's rate for the evidence
        "problem_prior": rate([e.history for e in evidence], 0.5),
        "sibling_rate": rate([e.siblings for e in evidence], 0.5),
        "evidence": rate([e.counts for e in evidence], prior_mean),
        "neighbour": np.asarray([e.neighbour for e in evidence]),
        "_evidence": evidence,
        "_groups": [groups[i] for i in hidden],
    }


def evaluate(
    valid: dict[str, Any] | None,
    test: dict[str, Any],
    prior_mean: float,
    stacker: Stacker | None = None,
    resamples: int = 1000,
    thresholds: dict[str, float] | None = None,
) -> tuple[dict[str, Any], Stacker]:
    """Fit the stack (unless given) and every threshold on ``valid`` (or take ``thresholds``); metrics
    on ``test``, with the stack's AUROC margin over each part as a paired bootstrap interval grouped
    by problem; and the stacker."""
    from leanloop.metrics import paired_bootstrap, select_threshold, verdict_metrics

    if stacker is None:
        stacker = Stacker.fit(
            valid["learned"],
            valid["_evidence"],
            valid["labels"],
            prior_mean=prior_mean,
            fitted_on={"bench": "rl_lean validation block"},
        )
    for part in (valid, test):
        if part is not None:
            part["stack"] = stacker.predict(part["learned"], part["_evidence"])
    out: dict[str, Any] = {
        "rows": int(len(test["labels"])),
        "valid_rows": None if valid is None else int(len(valid["labels"])),
        "test_pass_rate": float(test["labels"].mean()),
        "stacker": {"coef": dict(zip(stacker.features, stacker.coef)), "intercept": stacker.intercept},
    }
    for name in COMPONENTS:
        threshold = (
            stacker.threshold
            if name == "stack"
            else thresholds[name]
            if thresholds
            else select_threshold(valid["labels"], valid[name]).threshold
        )
        metrics = verdict_metrics(test["labels"], test[name], threshold=threshold)
        out[name] = {
            "auroc": float(metrics["auroc"]),
            "accuracy": float(metrics["accuracy"]),
            "fpr": float(metrics["fpr"]),
            "threshold": float(threshold),
        }
    out["margins"] = {name: out["stack"]["auroc"] - out[name]["auroc"] for name in COMPONENTS if name != "stack"}
    out["margin_intervals"] = {}
    for name in out["margins"]:
        gap = paired_bootstrap(
            test["labels"], test["_groups"], test["stack"], test[name], metrics=("auroc",), n_resamples=resamples
        )["auroc"]
        out["margin_intervals"][name] = [float(gap.low), float(gap.high), float(gap.share_positive)]
    out["stack_beats_every_part"] = all(m > 0 for m in out["margins"].values())
    return out, stacker


def rl_lean_benchmark(
    rows: list[dict[str, Any]],
    history_rounds: int,
    valid_rounds: int,
    fraction: float = REVEAL_FRACTION,
    resamples: int = 1000,
) -> tuple[dict[str, Any], Stacker, dict[str, Any]]:
    """Results, the fitted stacker and the validation block's components."""
    last = max(r["round"] for r in rows)
    if history_rounds < 1 or valid_rounds < 1 or history_rounds + valid_rounds > last:
        raise ValueError(
            f"need history_rounds, valid_rounds >= 1 and history_rounds + valid_rounds <= {last} (got "
            f"{history_rounds} + {valid_rounds})"
        )
    earlier = [r for r in rows if r["round"] < history_rounds]
    valid_rows = [r for r in rows if history_rounds <= r["round"] < history_rounds + valid_rounds]
    test_rows = [r for r in rows if r["round"] >= history_rounds + valid_rounds]
    prior = float(np.mean([r["label"] for r in earlier]))
    parts = []
    for part, history_from in ((valid_rows, earlier), (test_rows, earlier + valid_rows)):
        history = History.from_rows(history_from)
        scorer = learned_scorer(history_from)
        known = reveal_siblings(
            [r["name"] for r in part], [r["label"] for r in part], fraction, times=[r["time_s"] for r in part]
        )
        parts.append(block(part, history, scorer, known, prior))
    result, stacker = evaluate(*parts, prior_mean=prior, resamples=resamples)
    result.update(
        {
            "history_rounds": f"0-{history_rounds - 1}",
            "valid_rounds": f"{history_rounds}-{history_rounds + valid_rounds - 1}",
            "test_rounds": f"{history_rounds + valid_rounds}-{last}",
            "reveal_fraction": fraction,
        }
    )
    return result, stacker, parts[0]


def apollo_benchmark(
    rl_rows: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    stacker: Stacker,
    valid: dict[str, Any],
    fraction: float = REVEAL_FRACTION,
    seed: int = 0,
) -> dict[str, Any]:
    scorer = learned_scorer(rl_rows)
    known = reveal_siblings([r["name"] for r in rows], [r["label"] for r in rows], fraction, seed=seed)
    test = block(rows, History.from_rows(rl_rows), scorer, known, stacker.prior_mean)
    result, _ = evaluate(valid, test, stacker.prior_mean, stacker)
    result.update(
        {
            "history": "RL-Lean rounds 0-8",
            "reveal": f"seeded {fraction:.0%} per problem (seed {seed})",
            "provers": sorted({r["prover"] for r in rows}),
        }
    )
    return result


SHIPPED_MODES = (("no siblings", 0.0), ("siblings", REVEAL_FRACTION))
"""The shipped evaluator on APOLLO: no verdict of the group known (``leanloop classify --history``
on a file of new attempts), and a seeded 43% known (a hybrid step's cutoff)."""


def shipped_benchmark(
    classifier: str, corpus: str, rows: list[dict[str, Any]], seed: int = 0, resamples: int = 1000
) -> dict[str, Any]:
    """A classifier run's saved history-aware evaluator (model, stacker, thresholds) on ``rows``, the
    data run ``corpus`` as history. Parts are thresholded where they need no fitting: the classifier's
    and the stacker's saved thresholds, 0.5 for the rates, 0 for the neighbour margin."""
    from classifiers.evaluator import load_history_evaluator
    from leanloop.artifacts import resolve_model

    evaluator = load_history_evaluator(resolve_model(classifier, "classifiers"), history=History.from_corpus(corpus))
    learned = evaluator.learned([r["program"] for r in rows])
    rows = [dict(r, learned=p.score) for r, p in zip(rows, learned)]
    thresholds = {
        "learned": evaluator.base.threshold,
        "problem_prior": 0.5,
        "sibling_rate": 0.5,
        "evidence": 0.5,
        "neighbour": 0.0,
    }
    out: dict[str, Any] = {"classifier": classifier, "history": corpus, "stacker": evaluator.describe()["stacker"]}
    for mode, fraction in SHIPPED_MODES:
        known = (
            reveal_siblings([r["name"] for r in rows], [r["label"] for r in rows], fraction, seed=seed)
            if fraction
            else [None] * len(rows)
        )
        test = block(
            rows, evaluator.history, lambda part: [r["learned"] for r in part], known, evaluator.stacker.prior_mean
        )
        out[mode], _ = evaluate(None, test, evaluator.stacker.prior_mean, evaluator.stacker, resamples, thresholds)
    return out


def table(title: str, result: dict[str, Any]) -> list[str]:
    lines = [
        f"{title}: {result['rows']} scored (unrevealed) candidates, pass rate {result['test_pass_rate']:.3f}",
        f"  {'component':<14} {'AUROC':>7} {'acc@thr':>8} {'FPR':>6} {'thr':>6}   stack AUROC margin [95%], "
        "share of resamples > 0",
    ]
    for name in COMPONENTS:
        m = result[name]
        margin = ""
        if name != "stack":
            low, high, share = result["margin_intervals"][name]
            margin = f"{result['margins'][name]:+.3f} [{low:+.3f}, {high:+.3f}], {share:.0%}"
        lines.append(
            f"  {name:<14} {m['auroc']:7.3f} {m['accuracy']:8.3f} {m['fpr']:6.3f} {m['threshold']:6.2f}   {margin}"
        )
    verdict = "beats every part" if result["stack_beats_every_part"] else "does NOT beat every part"
    lines.append(f"  stack {verdict} (AUROC margins above)")
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from leanloop.tool import check_output_file, parse_config

    config = parse_config(
        EvaluatorsBenchConfig, argv, prog="python -m bench.evaluators", description=__doc__.splitlines()[0]
    )[0]
    check_output_file(config.json)
    if config.classifier:  # named runs are checked before the work, not after it
        from leanloop.artifacts import resolve_model, resolve_run

        resolve_model(config.classifier, "classifiers")
        resolve_run(config.corpus, "data")
    began = time.perf_counter()
    shared = shared_data_dir()
    rows = rl_lean_rows(shared)
    if config.smoke:
        keep = sorted({r["name"] for r in rows})[:60]
        rows = [r for r in rows if r["name"] in keep]
    result, stacker, valid = rl_lean_benchmark(
        rows, config.history_rounds, config.valid_rounds, resamples=100 if config.smoke else 1000
    )
    out: dict[str, Any] = {"rl_lean": result}
    lines = table(
        f"RL-Lean rounds {result['test_rounds']} (history {result['history_rounds']}, stacker fitted "
        f"on {result['valid_rounds']})",
        result,
    )
    if not config.smoke:
        out["apollo"] = apollo_benchmark(rows, apollo_rows(shared), stacker, valid)
        lines += table("APOLLO (second prover; RL-Lean's stacker and thresholds, no refit)", out["apollo"])
    if config.classifier:
        attempts = apollo_rows(shared)
        if config.smoke:
            attempts = [r for r in attempts if r["name"] in keep]
        out["shipped"] = shipped_benchmark(
            config.classifier, config.corpus, attempts, resamples=100 if config.smoke else 1000
        )
        for mode, _ in SHIPPED_MODES:
            lines += table(
                f"APOLLO, {config.classifier}'s saved history-aware evaluator, {config.corpus} as "
                f"history, {mode} (saved or natural thresholds)",
                out["shipped"][mode],
            )
    print("\n".join(lines))
    print(f"stacker coefficients: {json.dumps(result['stacker'])}")
    print(f"bench.evaluators: {time.perf_counter() - began:.1f} s")
    if config.json:
        Path(config.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m bench.evaluators"))
