"""``make feedback-model-eval`` end to end on tiny saved models and the real debug corpus."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from classifiers.baselines import MAJORITY, PRIOR, TFIDF, TfidfBaseline
from classifiers.evaluator import BASELINES
from feedback_model.config import TraceFormat
from feedback_model.cascade_eval import EVALUATORS, evaluate, parse_config
from leanloop.metrics import auroc
from leanloop.metrics.report import baseline_verdict


def test_cascade_eval_report_is_consistent_across_the_six_evaluators(
    artifacts, feedback_corpus, saved_gate, saved_feedback_model, qwen_tokenizer
):
    (artifacts / "data").mkdir(parents=True)
    (artifacts / "data" / "debug").symlink_to(feedback_corpus / "data" / "debug")
    args = [
        "--run",
        "t",
        "--corpus",
        "artifacts://data/debug",
        "--split",
        "test",
        "--feedback",
        str(saved_feedback_model),
        "--cascade.gate",
        str(saved_gate),
        "--cascade.residency",
        "sequential",
        "--generation.max_input_tokens",
        "400",
        "--generation.max_new_tokens",
        "4",
        "--self_consistency.samples",
        "2",
        "--self_consistency.min_valid",
        "1",
        "--sample_programs",
        "4",
        "--feedback_per_prover_label",
        "2",
        "--n_resamples",
        "20",
        "--batch_programs",
        "null",
    ]
    report = evaluate(parse_config(args))
    out = report.parent
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    by_evaluator = defaultdict(dict)
    for record in records:
        by_evaluator[record["evaluator"]][record["id"]] = record
    assert list(by_evaluator) == [*BASELINES, *EVALUATORS]  # the baselines lead
    ids = list(by_evaluator["one-token"])
    assert len(ids) >= 4 and all(set(by_evaluator[name]) == set(ids) for name in by_evaluator)

    # whole problems: every test-split candidate of a sampled problem is in
    from feedback_model.pairs import read_corpus

    rows = read_corpus(feedback_corpus / "data" / "debug")
    sampled = {by_evaluator["one-token"][i]["group"] for i in ids}
    assert len(ids) == sum(1 for r in rows if r["split"] == "test" and r["label"] is not None and r["name"] in sampled)

    program_of = {r["id"]: r["program"] for r in rows}
    fmt = TraceFormat()
    for i in ids:
        gate, greedy = by_evaluator["one-token"][i], by_evaluator["feedback greedy"][i]
        cascade, cascade_sc = by_evaluator["cascade"][i], by_evaluator["cascade + self-consistency"][i]
        sc = by_evaluator["feedback self-consistency"][i]
        # the cascade accepts only what the gate and the feedback model (run alone) both accept
        assert cascade["prediction"] == (gate["prediction"] and greedy["prediction"])
        assert cascade_sc["prediction"] == (gate["prediction"] and sc["prediction"])
        if gate["prediction"]:  # stage two is the same deterministic judgement as alone
            assert (cascade["prediction"], cascade["score"]) == (greedy["prediction"], greedy["score"])
            assert cascade_sc["score"] == sc["score"]
        else:
            assert cascade["score"] == 0.0 and cascade["reason"].startswith("gate rejected")
        # over the input limit: not judged, counted as a rejection, reason kept
        length = len(qwen_tokenizer(fmt.prompt(program_of[i]), add_special_tokens=False)["input_ids"])
        assert (greedy["unscored"] is not None) == (length > 400)
        if length > 400:
            assert greedy["unscored"].startswith("input_too_long") and greedy["prediction"] is False

    # feedback quality on a sample of at most 2 per prover x label
    sample = [r for r in by_evaluator["feedback greedy"].values() if "reference_trace" in r]
    prover = {r["id"]: r.get("prover") or "" for r in rows}
    assert sample and max(Counter((prover[r["id"]], r["label"]) for r in sample).values()) <= 2

    text = report.read_text()
    for name in EVALUATORS:
        assert f"| {name} |" in text
        # programs not judged, by reason (a cascade's reason wraps its feedback model's)
        too_long = sum("input_too_long" in (r["unscored"] or "") for r in by_evaluator[name].values())
        if too_long:
            assert f"| {name} | input_too_long | {too_long} |" in text
    assert sum(bool(r["unscored"]) for r in by_evaluator["cascade"].values()) == sum(
        bool(by_evaluator["feedback greedy"][i]["unscored"]) for i in ids if by_evaluator["one-token"][i]["prediction"]
    )
    assert text.count("– (hard verdict)") == 3  # greedy feedback and the two greedy cascades
    # LLF's separate row: the cascade behind the gate's calibrated threshold accepts only what the
    # feedback model accepts, and the gate at 0.5 is the main row's
    calibrated = by_evaluator["cascade (calibrated gate)"]
    assert all(
        greedy_accepts
        for i in ids
        for greedy_accepts in [by_evaluator["feedback greedy"][i]["prediction"]]
        if calibrated[i]["prediction"]
    )
    assert "(threshold 0.5: set in the config)" in text
    judged = [r for r in by_evaluator["feedback greedy"].values() if r["unscored"] is None]
    cut = sum(r["truncated"] for r in judged)
    assert cut == len(judged) > 0  # 4 new tokens: no trace ends, and the report says so
    assert f"cut at the output limit (invalid by the rule): {cut} of the {len(judged)} judged" in text
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["budget"]) == set(EVALUATORS)
    # the classifier reports' baselines, fitted on the corpus's training split, lead the table
    train = [r for r in rows if r["split"] == "train" and r["label"] is not None]
    test_labels = [by_evaluator["one-token"][i]["label"] for i in ids]
    tfidf = TfidfBaseline().fit([r["program"] for r in train], [r["label"] for r in train])
    assert [by_evaluator[TFIDF][i]["score"] for i in ids] == pytest.approx(
        tfidf.scores([program_of[i] for i in ids]).tolist()
    )
    assert summary["evaluators"][TFIDF]["metrics"]["auroc"] == pytest.approx(
        auroc(test_labels, [by_evaluator[TFIDF][i]["score"] for i in ids])
    )
    majority = float(sum(r["label"] for r in train) > len(train) / 2)
    assert {by_evaluator[MAJORITY][i]["score"] for i in ids} == {majority}
    # a theorem-disjoint split: no test theorem has training labels, so its prior is the training rate
    train_rate = sum(r["label"] for r in train) / len(train)
    assert [by_evaluator[PRIOR][i]["score"] for i in ids] == pytest.approx([train_rate] * len(ids))
    assert summary["evaluators"][PRIOR]["metrics"]["auroc"] == pytest.approx(0.5)
    assert set(summary["baselines"]) == set(BASELINES)
    assert all(summary["baselines"][b]["threshold_split"].startswith("the `valid` split") for b in BASELINES)
    lines = text.splitlines()
    table = [line.split(" | ")[0][2:] for line in lines[lines.index("## Verdicts") :] if line.startswith("| ")][1:]
    assert table[: len(BASELINES) + len(EVALUATORS)] == [*BASELINES, *EVALUATORS]
    # line one: the classifier reports' rule (one function), AUROC for graded scores, accuracy for
    # hard verdicts
    first = lines[0]
    assert first == baseline_verdict(summary["evaluators"], EVALUATORS, BASELINES, "test")[0]
    metric = {name: summary["evaluators"][name]["metrics"] for name in summary["evaluators"]}
    gate_beaten = max(metric[b]["auroc"] for b in BASELINES) >= metric["one-token"]["auroc"]
    greedy_beaten = max(metric[b]["accuracy"] for b in BASELINES) >= metric["feedback greedy"]["accuracy"]
    assert any(f"{verb} `one-token` (" in first for verb in ("beats", "matches")) == gate_beaten
    assert any(f"{verb} `feedback greedy` (accuracy " in first for verb in ("beats", "matches")) == greedy_beaten
    assert first.startswith(
        "**A BASELINE BEATS THE LEARNED MODEL** on test AUROC (accuracy for hard verdicts): "
        if gate_beaten or greedy_beaten
        else "No baseline beats the learned model"
    )
    assert lines[3].startswith("Baselines (test split): `majority_class` AUROC 0.500")
    assert summary["evaluators"]["cascade"]["timing"]["load_s"] > 0  # sequential: swaps are paid and counted
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["inputs"]) == {"corpus", "feedback_model", "gate"}
    assert (out / "throughput.png").is_file() and (out / "details" / "report.md").is_file()
    assert evaluate(parse_config(args)) == report  # finished with this config: skipped, same report


def test_every_eval_config_parses():
    from leanloop.paths import REPO_ROOT

    configs = sorted((REPO_ROOT / "configs/feedback_model/eval").glob("*.yaml"))
    assert configs
    for path in configs:
        config = parse_config(["--config", str(path)])
        assert config.self_consistency.min_valid <= config.self_consistency.samples
        assert config.generation.max_input_tokens > 0 and config.cascade.gate.startswith("artifacts://")


def test_problems_are_sampled_whole_or_capped_per_problem(corpus_rows):
    from collections import Counter as Count

    from feedback_model.cascade_eval import select_programs

    test = [r for r in corpus_rows if r["split"] == "test" and r["label"] is not None]
    sizes = Count(r["name"] for r in test)
    whole = select_programs(corpus_rows, "test", 5, seed=3)
    assert all(Count(r["name"] for r in whole)[name] == sizes[name] for name in {r["name"] for r in whole})
    capped = select_programs(corpus_rows, "test", 5, seed=3, max_per_problem=1)
    per_problem = Count(r["name"] for r in capped)
    assert len(capped) == 5 and set(per_problem.values()) == {1}  # five problems, one candidate each
    assert capped == select_programs(corpus_rows, "test", 5, seed=3, max_per_problem=1)  # seeded
    assert len(select_programs(corpus_rows, "test", None, seed=0, max_per_problem=1)) == len(sizes)
