"""make prm-eval: metrics, best-of-n, baselines and the report, on a prm-label run of recorded Lean
output and a ProcessBench-format file, with a tiny verifier run."""

from __future__ import annotations

import json

from leanloop.training.models import ModelSpec
from leanloop.paths import REPO_ROOT
from prm import evaluate, label
from prm.config import EvalConfig, ExternalSet, LabelConfig, RecordedConfig
from prm.labelled_proofs import read_split
from prm.labels_from_lean import training_prefix
from prm.metrics import best_of_n, choose_threshold, labels_at, ranking, step_metrics


def test_step_metrics_and_best_of_n():
    truth = [[True, False, False], [True, True]]
    m = step_metrics([[True, False, False], None], truth)
    assert m["exact"] == 0.5 and m["first_error"] == 0.5 and m["parsed"] == 0.5
    assert m["f1_incorrect"] == 1.0  # both wrong steps found, none invented (None reads as all-correct)
    m = step_metrics([[True, True, True], [True, False]], truth)
    assert m["exact"] == 0.0 and m["f1_incorrect"] == 0.0 and m["step_accuracy"] == 2 / 5
    # problem a: candidates 0 (wrong) and 1 (right); a perfect verifier picks the right one
    bon = best_of_n(["a", "a", "b"], [[True, False], [True, True], [True]], [False, True, True])
    assert bon == {"problems": 1.0, "candidates": 2.0, "verifier_pick": 1.0, "random_pick": 0.5}
    assert best_of_n(["a", "b"], [[True], [True]], [True, False]) is None
    # scored: the candidate with the lower P(some step wrong) is picked whatever its labels say
    assert best_of_n(["a", "a"], [[True], [True]], [False, True], wrong=[0.4, 0.3])["verifier_pick"] == 1.0
    assert best_of_n(["a", "a"], [[True], [True]], [False, True], wrong=[0.3, 0.4])["verifier_pick"] == 0.0


def test_threshold_on_p_wrong_is_chosen_for_exact():
    truth = [[True, False], [True, True], [False, False]]
    wrong = [[0.2, 0.6], [0.1, 0.3], [0.5, 0.7]]
    assert labels_at(wrong, 0.5) == [[True, False], [True, True], [False, False]]
    assert labels_at(wrong, 0.25) == [[True, False], [True, False], [False, False]]
    threshold, metrics = choose_threshold(wrong, truth)
    assert 0.3 < threshold <= 0.5 and metrics["exact"] == 1.0 and metrics["f1_incorrect"] == 1.0
    # a score that never ranks a wrong step above a correct one: flag nothing is best for exact here
    threshold, metrics = choose_threshold([[0.9, 0.9], [0.95, 0.95]], [[True, False], [True, True]])
    assert threshold > 0.95 and metrics["exact"] == 0.5 and metrics["f1_incorrect"] == 0.0
    ranked = ranking(wrong, truth)
    threshold, metrics = choose_threshold([[0.9, 0.9], [0.95, 0.95]], [[True, False], [True, True]], "f1_incorrect")
    assert (
        threshold == 0.9 and metrics["f1_incorrect"] == 0.4 and metrics["exact"] == 0.0
    )  # flag all: exact traded away
    assert ranked["average_precision"] == 1.0 and ranked["auroc"] == 1.0
    assert ranking([[0.5], [0.5]], [[True], [True]]) == {}  # one class: no curve


def test_tfidf_scores_each_step_and_reads_them_first_error_shaped():
    from prm.baselines import TfidfStepClassifier
    from prm.labelled_proofs import ProofRecord

    def proof(i, steps):
        return ProofRecord(
            f"p{i}",
            f"t{i}",
            "",
            "",
            "",
            [{"prose": p, "tactic": p, "label": ok} for p, ok in steps],
            all(ok for _, ok in steps),
            None,
            "",
            None,
            "",
            "",
            "",
        )

    train = [
        proof(
            i,
            [("norm_num [h]", True), ("nlinarith [sq_nonneg x]", False)]
            if i % 2
            else [("norm_num [h]", True), ("simp [h]", True)],
        )
        for i in range(40)
    ]
    tfidf = TfidfStepClassifier(0).fit(train, 8)
    held = [proof(99, [("nlinarith [sq_nonneg y]", False), ("simp [h]", False)])]
    truth = [[False, False]]
    own = tfidf.wrong_probabilities(held, truth, running_max=False)[0]
    assert own[0] > 0.5 > own[1]  # the nlinarith step is scored wrong, the simp step on its own is not
    assert tfidf.wrong_probabilities(held, truth)[0] == [own[0], own[0]]  # read first-error shaped: running max


def test_prm_eval_report(artifacts, tmp_path):
    from prm.train import run as train

    from classifiers.train import run as train_classifier

    train(["--config", str(REPO_ROOT / "configs/prm/debug.yaml"), "--trainer.fast_dev_run", "true"])
    train_classifier(
        ["--config", str(REPO_ROOT / "configs/classifiers/debug_onetoken.yaml"), "--trainer.fast_dev_run", "true"]
    )
    label.run(LabelConfig(run="small", recorded=RecordedConfig(limit=150)), progress=False)
    bench = tmp_path / "gsm8k.json"
    bench.write_text(
        json.dumps(
            [
                {
                    "id": f"gsm8k-{i}",
                    "generator": "g",
                    "problem": "p",
                    "steps": ["a", "b"],
                    "final_answer_correct": i % 2 == 0,
                    "label": -1 if i % 2 == 0 else 1,
                }
                for i in range(4)
            ]
        )
    )
    config = EvalConfig(
        model=ModelSpec(name="artifacts://prm/debug"),
        run="t",
        dataset="artifacts://prm_label/small",
        external=[ExternalSet("processbench", str(bench))],
        max_steps=4,
        limit=10,
        batch_size=8,
        threads=1,
        classifier="artifacts://classifiers/debug_onetoken",
    )
    folder = evaluate.run(config)
    metrics = json.loads((folder / "metrics.json").read_text())
    (lean_set, bench_set) = metrics
    from prm.evaluate import spread_over_theorems

    held_out = read_split(artifacts / "prm_label" / "small", "test")
    labelled = [r for r in held_out if training_prefix(r.labels)]
    prefixes = [training_prefix(r.labels) for r in spread_over_theorems(labelled)]
    truth = [t[:4] for t in prefixes[:10]]
    # the ten proofs are spread over the held-out theorems: as many distinct theorems as there can be
    names = [r.name for r in spread_over_theorems(labelled)][:10]
    assert (
        metrics[lean_set]["theorems"]
        == len(set(names))
        == min(10, len({r.name for r in held_out if training_prefix(r.labels)}))
    )
    rate = metrics[lean_set]["base_rate"]
    assert rate["correct_proofs"] == metrics[lean_set]["methods"]["always_correct"]["exact"]
    assert rate["correct_steps"] == sum(map(sum, truth)) / sum(map(len, truth))
    assert metrics[lean_set]["cut"] == sum(len(p) > 4 for p in prefixes[:10]) and metrics[bench_set]["cut"] == 0
    assert metrics[lean_set]["methods"]["always_correct"]["exact"] == sum(all(t) for t in truth) / len(truth)
    assert metrics[bench_set]["methods"]["always_correct"]["exact"] == 0.5
    assert list(metrics[lean_set]["methods"]) == [
        "always_correct",
        "first_error_at_random",
        "tfidf_steps",
        "classifier_prefixes",
        "verifier_greedy",
        "tfidf_steps@exact",
        "tfidf_steps@f1",
        "verifier@f1",
        "verifier",
    ]  # baselines first
    rule = metrics[lean_set]["decision_rule"]
    assert rule["split"] == "valid" and set(rule["thresholds"]) == {
        "verifier",
        "verifier@f1",
        "tfidf_steps@exact",
        "tfidf_steps@f1",
    }
    assert rule["metrics"]["verifier"]["exact"] >= rule["metrics"]["verifier@f1"]["exact"]
    assert rule["metrics"]["verifier@f1"]["f1_incorrect"] >= rule["metrics"]["verifier"]["f1_incorrect"]
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    score = {"verifier": "p_wrong", "verifier_hazard": "hazard"}[rule["sources"]["verifier"]]
    assert all(row["predicted"] == [p < rule["thresholds"]["verifier"] for p in row[score]] for row in rows)
    # first-error shaped scores
    assert all(row["p_wrong"] == sorted(row["p_wrong"]) and row["hazard"] == sorted(row["hazard"]) for row in rows)
    assert set(metrics[lean_set]["ranking"]) == {"verifier", "verifier_hazard", "tfidf_steps"}
    assert "tfidf_steps" not in metrics[bench_set]["methods"]  # trained on Lean steps: the Lean set only
    assert metrics[lean_set]["methods"]["classifier_prefixes"]["parsed"] == 1.0  # every Lean proof has tactics
    assert "classifier_prefixes" not in metrics[bench_set]["methods"]  # prose-only sets have no programs
    report = (folder / "report.md").read_text()
    assert "| tfidf_steps |" in report and "Base rate:" in report and "first error" in report
    assert "| verifier |" in report and "processbench: gsm8k.json" in report and "reviewer: rules" in report
    assert (
        "Decision rules, chosen on the `valid` split" in report
        and "| verifier@f1 |" in report
        and "| random |" in report
    )
    assert report.index("| always_correct |") < report.index("| verifier |")
    for plot in ("report.png", "pr_curve.png", "manifest.json"):
        assert (folder / plot).is_file()
    assert len(rows) == len(truth) + 4
