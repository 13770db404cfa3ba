"""``python -m bench.prm_rules`` (``make bench-prm-rules``): the step verifier's decision rules and a
verifier + TF-IDF stacker, each chosen on the validation split and read on the test split.

One verifier run (``--model``, default prm-eval's ``artifacts://prm/grpo``) scores the valid and test
proofs of the prm-label run as prm-eval selects them (its ``limit`` and ``max_steps``). From the
verifier's hazards h_k = P(step k wrong | steps before it correct) and TF-IDF's per-step P(wrong):

- ``verifier first-cross (cumulative)``: wrong from the first step whose 1 - prod_{j<=k}(1 - h_j) >= t;
- ``verifier first-cross (hazard)``: wrong from the first step whose own h_k >= t (prm-eval's ``verifier``
  rule chooses between these two on valid);
- ``verifier argmax``: when P(proof wrong) = 1 - prod_j (1 - h_j) >= t, wrong from the step of
  highest h_k (detection and location decided apart);
- ``tfidf first-cross`` (prm-eval's ``tfidf_steps@...``) and ``tfidf argmax`` the same way;
- ``stacker (verifier + tfidf)`` / ``stacker (tfidf only)``: a logistic regression on the logits of
  h_k and of TF-IDF's score, the step's position and whether it is the last, fitted on the valid
  split's steps up to each proof's first error (target: this step is the first error), read
  first-cross on its cumulative score; its thresholds are chosen on out-of-fold scores (5 folds by
  theorem), so the valid numbers are not the stacker's own fit.

Each rule's threshold is chosen on valid for exact and for F1 on wrong steps (:func:`prm.metrics.
choose_threshold`'s candidates and tie-breaks); the table gives the valid and test numbers and marks
the rule valid would pick for each metric. Beside them, as a diagnostic that is never a choice, the best
each rule's score reaches on test at any threshold (for the metric it was chosen for): a rule whose
ceiling is below a baseline cannot pass it whatever the decision split. Options: :class:`PRMRulesConfig` (``--json PATH``).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from leanloop.paths import REPO_ROOT
from prm.metrics import cumulative

FOLDS = 5


@dataclass
class PRMRulesConfig:
    """``python -m bench.prm_rules`` options."""

    model: str = "artifacts://prm/grpo"
    """The verifier (a prm run or a model name)."""
    dataset: str = "artifacts://prm_label/default"
    evaluation: str = str(REPO_ROOT / "configs/prm/eval/default.yaml")
    """prm-eval's config: its ``limit``, ``max_steps``, ``batch_size``, ``threads`` and ``seed`` are used."""
    smoke: bool = False
    """A random-init tiny Qwen3 on labels of the first 150 recorded programs (``prm_label/curve_smoke``), 8 proofs per split."""
    json: str | None = None


def first_cross(scores: Sequence[Sequence[float]], t: float) -> list[list[bool]]:
    """Correct until the first step scored >= t, wrong from it on."""
    return [np.logical_not(np.maximum.accumulate(np.asarray(s) >= t)).tolist() for s in scores]


def argmax_rule(proof_wrong: Sequence[float], step: Sequence[Sequence[float]], t: float) -> list[list[bool]]:
    """All correct when the proof's P(wrong) < t, else wrong from the step scored highest."""
    return [
        [True] * len(s) if p < t else [i < int(np.argmax(s)) for i in range(len(s))] for p, s in zip(proof_wrong, step)
    ]


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def stack_design(split: dict[str, Any], lexical_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, first-error target, rows up to each proof's first error) per step."""
    x, y, keep = [], [], []
    for h, r, truth in zip(split["hazard"], split["tfidf"], split["truth"]):
        first = next((k for k, label in enumerate(truth) if not label), None)
        for k in range(len(h)):
            row = [_logit(r[k]), k / 8, float(k == len(h) - 1)]
            x.append(row if lexical_only else [_logit(h[k]), *row])
            y.append(first == k)
            keep.append(first is None or k <= first)
    return np.asarray(x), np.asarray(y), np.asarray(keep)


def _per_proof(split: dict[str, Any], flat: np.ndarray) -> list[list[float]]:
    out, at = [], 0
    for h in split["hazard"]:
        out.append(cumulative(flat[at : at + len(h)]))
        at += len(h)
    return out


def stacker(
    valid: dict[str, Any], test: dict[str, Any], lexical_only: bool, seed: int
) -> tuple[list, list, list[float]]:
    """(valid out-of-fold cumulative scores, test cumulative scores, coefficients) of the stacker."""
    from sklearn.linear_model import LogisticRegression

    xv, yv, keep = stack_design(valid, lexical_only)
    xt = stack_design(test, lexical_only)[0]
    fit = LogisticRegression(max_iter=1000, random_state=seed).fit(xv[keep], yv[keep])
    theorems = sorted(set(valid["names"]))
    fold_of = {name: i % FOLDS for i, name in enumerate(theorems)}
    fold = np.asarray([fold_of[name] for name, h in zip(valid["names"], valid["hazard"]) for _ in h])
    oof = np.zeros(len(xv))
    for f in range(FOLDS):
        train = (fold != f) & keep
        if len(set(yv[train].tolist())) < 2:
            oof[fold == f] = fit.predict_proba(xv[fold == f])[:, 1]
            continue
        oof[fold == f] = (
            LogisticRegression(max_iter=1000, random_state=seed)
            .fit(xv[train], yv[train])
            .predict_proba(xv[fold == f])[:, 1]
        )
    return _per_proof(valid, oof), _per_proof(test, fit.predict_proba(xt)[:, 1]), fit.coef_[0].tolist()


def score_splits(options: PRMRulesConfig) -> tuple[dict[str, dict[str, Any]], Any]:
    from leanloop.artifacts import resolve_run
    from leanloop.tool import parse_config
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from leanloop.training.module import set_torch_threads
    from prm.baselines import TfidfStepClassifier
    from prm.config import EvalConfig
    from prm.labelled_proofs import LABEL_STAGE, read_split
    from prm.evaluate import encoded_proofs, prepared_proofs
    from prm.predict import model_layout, wrong_probabilities

    config = parse_config(EvalConfig, ["--config", options.evaluation])[0]
    if options.smoke:
        config.limit = 8
    set_torch_threads(config.threads)
    data = resolve_run(options.dataset, LABEL_STAGE)
    spec = ModelSpec(name=options.model)
    tokenizer = load_tokenizer(spec)
    model = load_model(spec, tokenizer=tokenizer).eval()
    tfidf = TfidfStepClassifier(config.seed).fit(read_split(data, "train"), config.max_steps)
    splits = {}
    for split in ("valid", "test"):
        kept, truth, _, _ = prepared_proofs(read_split(data, split), config)
        proofs = encoded_proofs(kept, truth, tokenizer, model_layout(spec))
        hazard = wrong_probabilities(model, tokenizer, proofs, config.batch_size, cumulative=False)
        splits[split] = {
            "names": [r.name for r in kept],
            "truth": truth,
            "hazard": hazard,
            "tfidf": tfidf.wrong_probabilities(kept, truth, running_max=False),
        }
    return splits, config


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from leanloop.paths import repo_file
    from leanloop.tool import check_output_file, parse_config
    from prm.evaluate import random_first_error
    from prm.metrics import choose_threshold, ranking, step_metrics

    options = parse_config(PRMRulesConfig, argv, prog="python -m bench.prm_rules", description=__doc__.splitlines()[0])[
        0
    ]
    check_output_file(options.json)
    repo_file(options.evaluation, "--evaluation")
    if options.smoke:
        from prm import label
        from prm.config import LabelConfig, RecordedConfig

        label.run(LabelConfig(run="curve_smoke", recorded=RecordedConfig(limit=150)), progress=False)
        options.model, options.dataset = "qwen3-tiny", "artifacts://prm_label/curve_smoke"
    began = time.perf_counter()
    splits, config = score_splits(options)
    valid, test = splits["valid"], splits["test"]
    for s in splits.values():
        s["cumulative"] = [cumulative(h) for h in s["hazard"]]
    stacked = {}
    for name, lexical_only in (("stacker (verifier + tfidf)", False), ("stacker (tfidf only)", True)):
        valid[name], test[name], stacked[name] = stacker(valid, test, lexical_only, config.seed)
    # rule -> (labels at t on a split, threshold candidates on a split, the step scores it ranks by)
    rules: dict[str, tuple[Callable, Callable, str]] = {
        "verifier first-cross (cumulative)": (
            lambda s, t: first_cross(s["cumulative"], t),
            lambda s: s["cumulative"],
            "cumulative",
        ),
        "verifier first-cross (hazard)": (lambda s, t: first_cross(s["hazard"], t), lambda s: s["hazard"], "hazard"),
        "verifier argmax": (
            lambda s, t: argmax_rule([c[-1] for c in s["cumulative"]], s["hazard"], t),
            lambda s: [[c[-1]] for c in s["cumulative"]],
            "hazard",
        ),
        "tfidf first-cross": (lambda s, t: first_cross(s["tfidf"], t), lambda s: s["tfidf"], "tfidf"),
        "tfidf argmax": (
            lambda s, t: argmax_rule([max(p) for p in s["tfidf"]], s["tfidf"], t),
            lambda s: [[max(p)] for p in s["tfidf"]],
            "tfidf",
        ),
        **{name: (lambda s, t, n=name: first_cross(s[n], t), lambda s, n=name: s[n], name) for name in stacked},
    }
    rows = []
    for name, (labels, values, scores) in rules.items():
        for objective in ("exact", "f1_incorrect"):
            t = choose_threshold(values(valid), valid["truth"], objective, lambda t: labels(valid, t))[0]
            v, te = step_metrics(labels(valid, t), valid["truth"]), step_metrics(labels(test, t), test["truth"])
            # a diagnostic, never a choice: the best this score reaches on test at any threshold
            ceiling = choose_threshold(values(test), test["truth"], objective, lambda t: labels(test, t))[1][objective]
            rows.append(
                {
                    "rule": name,
                    "objective": objective,
                    "threshold": t,
                    "valid": v,
                    "test": te,
                    "test_ceiling": ceiling,
                    "test_ap": ranking([list(np.maximum.accumulate(p)) for p in test[scores]], test["truth"]).get(
                        "average_precision"
                    ),
                }
            )
    picked = {
        obj: max(
            (
                r
                for r in rows
                if r["objective"] == obj and not r["rule"].startswith("tfidf") and "tfidf only" not in r["rule"]
            ),
            key=lambda r: r["valid"][obj],
        )["rule"]
        for obj in ("exact", "f1_incorrect")
    }
    # prm-eval's trivial baselines on the same test proofs (TF-IDF's are the tfidf rows below)
    baselines = {
        "always_correct": step_metrics([[True] * len(t) for t in test["truth"]], test["truth"]),
        "first_error_at_random": step_metrics(random_first_error(test["truth"], config.seed), test["truth"]),
    }
    always = baselines["always_correct"]["exact"]
    print(f"test: {len(test['truth'])} proofs; valid {len(valid['truth'])} proofs")
    for name, m in baselines.items():
        print(f"test baseline {name}: exact {m['exact']:.3f}, F1 on wrong steps {m['f1_incorrect']:.3f}")
    print(
        f"{'rule':36s} {'chosen for':>10s} {'t':>6s} | valid exact  F1 | test exact  F1 | test AP | "
        "best on test at any t (diagnostic)"
    )
    for r in rows:
        mark = " <- valid's pick" if picked[r["objective"]] == r["rule"] else ""
        print(
            f"{r['rule']:36s} {r['objective'][:10]:>10s} {r['threshold']:6.3f} | {r['valid']['exact']:.3f} "
            f"{r['valid']['f1_incorrect']:.3f} | {r['test']['exact']:.3f} {r['test']['f1_incorrect']:.3f} | "
            f"{r['test_ap'] or 0:.3f} | {r['test_ceiling']:.3f}{mark}"
        )
    for name, coef in stacked.items():
        print(f"{name} coefficients: {[round(c, 3) for c in coef]}")
    out = {
        "model": options.model,
        "dataset": options.dataset,
        "always_correct": always,
        "baselines": baselines,
        "rows": rows,
        "valid_picks": picked,
        "stacker_coefficients": stacked,
        "wall_s": time.perf_counter() - began,
    }
    print(f"bench.prm_rules: {out['wall_s']:.0f} s")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m bench.prm_rules"))
