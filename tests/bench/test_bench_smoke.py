"""Every ``make bench-*`` benchmark runs in its smoke mode (tiny sizes, a few iterations) and
returns well-formed ratios, so a broken bench cannot land. The numbers themselves mean nothing at
these sizes; only ``make bench-*`` measures."""

from __future__ import annotations

import math

import pytest
import torch


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Benches write under the artifacts root and set torch's thread count: both stay inside the test."""
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    threads = torch.get_num_threads()
    yield tmp_path / "artifacts"
    torch.set_num_threads(threads)


def positive(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


def test_bench_autoformalizer_smoke(capsys):
    from leanloop.training.moe import meta_model
    from bench.autoformalizer import BENCH_ARCH, main

    meta_model(BENCH_ARCH)  # the full bench's model builds (its pad id lies inside its vocabulary)
    r = main(["--smoke", "true"])
    m = r["memory"]
    assert m["nf4_bytes"] < m["bf16_bytes"] and m["ratio"] == pytest.approx(m["bf16_bytes"] / m["nf4_bytes"])
    assert m["nf4_estimate_bytes"] == m["nf4_bytes"]  # the module-tree estimate is exact
    assert 3 < m["paper_ratio"] < 4.5  # 30B: ~61 GB bf16 -> ~16.7 GB NF4
    assert r["forward"]["max_abs_logit_diff"] < 1e-4  # unfusing keeps the arithmetic
    for impl in ("eager", "grouped_mm"):
        f = r["forward"][impl]
        assert positive(f["fused_s"], f["unfused_s"]) and f["unfused_over_fused"] == pytest.approx(
            f["unfused_s"] / f["fused_s"]
        )
    a = r["adapters"]
    assert positive(a["qlora"]["tokens_per_s"], a["qdora"]["tokens_per_s"], a["qdora_slowdown"])
    assert a["qdora"]["trainable"] > a["qlora"]["trainable"]  # DoRA's magnitude vectors
    assert "QDoRA" in capsys.readouterr().out


def test_bench_data_and_traces_smoke():
    from bench import data, traces

    r = data.main(["--smoke", "true"])
    assert r["programs"] == 200
    assert positive(*r["precheck_per_s"].values(), r["resumed_speedup"])
    assert set(r["precheck_target_ratio"]) == {"collection", "rl"}
    assert r["build"]["input_rows"] >= r["build"]["distinct"] > 0 and r["build"]["resumed_verified"] == 0
    t = traces.main(["--smoke", "true"])
    assert positive(*t.values())
    assert t["parsing_cost"] == pytest.approx(t["annotations_per_s"] / t["raw_annotations_per_s"])
    assert 0.5 < t["auroc"] <= 1 and 0 < t["coverage_at_1_ranked"] <= 1


def test_bench_train_and_classifiers_smoke():
    from bench import classifiers, train

    r = train.main(["--smoke", "true"])
    assert r["documents_limit"] == 200 and r["sample"]["examples"] == 4
    assert 0 <= r["corpus"]["packed"] <= r["corpus"]["padded"] < 1
    assert positive(r["speedup"], r["wall_speedup"])
    assert r["loss_abs_diff"] < 1e-4  # packing is exact
    c = classifiers.main(["--smoke", "true"])
    assert positive(c["encoder_batched"], c["onetoken_batched"], c["onetoken_over_encoder"])
    assert c["encoder_max_score_gap"] <= classifiers.SCORE_TOLERANCE
    assert c["onetoken_max_score_gap"] <= classifiers.SCORE_TOLERANCE


def test_bench_feedback_smoke(isolated):
    from bench import feedback
    from data.build import build, parse_config
    from leanloop.paths import REPO_ROOT

    build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False, quiet=True)
    r = feedback.main(["--smoke", "true", "--corpus", "artifacts://data/debug"])["cpu"]
    assert r["model"] == "random-init qwen3-tiny"  # no trained feedback model in the fresh root
    assert positive(r["speedup"]) and r["verdict_agreement"] == 1.0  # greedy: drafting changes nothing


def test_bench_rl_smoke(isolated):
    from bench import rl

    r = rl.main(["--smoke", "true"])
    scenarios = r["scheduler"]["scenarios"]
    assert scenarios and all(s[name]["scoring_s"] > 0 for s in scenarios for name in ("lean", "hybrid"))
    step = r["step"]
    assert positive(step["ratio_cpu_s"], step["ratio_wall_s"])
    gate = r["gate"]
    assert gate["judged"] == gate["projects"] > 0 and positive(gate["ratio_to_fast_path"])
    assert (isolated / "bench" / "rl.json").is_file()


def test_bench_evaluators_smoke():
    from bench.evaluators import COMPONENTS, main

    r = main(["--smoke", "true"])["rl_lean"]
    assert r["rows"] > 0 and set(r["margins"]) == set(COMPONENTS) - {"stack"}
    for name in COMPONENTS:
        assert 0 <= r[name]["auroc"] <= 1 and 0 <= r[name]["fpr"] <= 1
    assert r["stack_beats_every_part"] == all(m > 0 for m in r["margins"].values())


def test_bench_evaluators_measures_a_classifier_runs_saved_evaluator_as_classify_loads_it(trained_runs, debug_corpus):
    from sklearn.metrics import roc_auc_score

    from bench.evaluators import COMPONENTS, SHIPPED_MODES, apollo_rows, main, rl_lean_rows
    from classifiers.evaluator import History, Stacker, load_history_evaluator
    from leanloop.paths import shared_data_dir

    run = trained_runs["encoder"].run_dir
    r = main(["--smoke", "true", "--classifier", str(run), "--corpus", str(debug_corpus)])["shipped"]
    saved = Stacker.load(run / "final")
    for mode, _ in SHIPPED_MODES:
        assert r[mode]["rows"] > 0 and set(r[mode]["margins"]) == set(COMPONENTS) - {"stack"}
        assert r[mode]["stack"]["threshold"] == saved.threshold  # nothing refitted
    # no group verdict known: the stack is the saved evaluator's own score of the same attempts
    problems = sorted({row["name"] for row in rl_lean_rows(shared_data_dir())})[:60]
    attempts = [a for a in apollo_rows(shared_data_dir()) if a["name"] in problems]
    evaluator = load_history_evaluator(run / "final", history=History.from_corpus(str(debug_corpus)))
    scores = [p.score for p in evaluator.score([a["program"] for a in attempts], groups=[a["name"] for a in attempts])]
    assert r["no siblings"]["stack"]["auroc"] == pytest.approx(roc_auc_score([a["label"] for a in attempts], scores))
    assert r["no siblings"]["sibling_rate"]["auroc"] == 0.5  # nothing revealed: the part is constant


def test_bench_classifier_curve_smoke():
    from bench.classifier_curve import crossing, main

    r = main(["--smoke", "true"])
    assert [p["requested"] for p in r["points"]] == [16, "all"]
    for point in r["points"]:
        assert 0 <= point["classifier_mean"] <= 1 and 0 <= point["tfidf_mean"] <= 1
        assert point["gap"] == pytest.approx(point["classifier_mean"] - point["tfidf_mean"])
    assert crossing([250, 500], [-0.1, 0.01]) == {"measured": True, "rows": 500}
    assert crossing([250, 500, 1000], [0.01, -0.05, -0.1])["rows"] is None  # ahead once, then falling behind
    extrapolated = crossing([250, 1000], [-0.2, -0.1])  # +0.1 per 4x rows: zero at 4,000
    assert not extrapolated["measured"] and extrapolated["rows"] == pytest.approx(4000)
    flat = crossing([250, 500, 1000, 1506], [-0.153, -0.211, -0.225, -0.131])  # the one-token curve's gaps
    assert flat["rows"] is None and flat["beyond"] > 100 * 1506 and flat["slope_per_log_row"] > 0


def test_bench_prm_curve_smoke(tmp_path):
    from bench.prm_curve import main

    r = main(["--smoke", "true", "--plot", str(tmp_path / "curve.png")])
    assert [p["requested"] for p in r["points"]] == [4, "all"] and r["points"][0]["proofs"] == 4
    for point in r["points"]:
        assert all(0 <= v <= 1 for v in point["mean"].values()) and len(point["mean"]) == 11
        assert {
            "always_correct",
            "first_error_at_random",
            "first_error_at_random/f1_incorrect",
            "verifier/average_precision",
            "verifier_hazard/average_precision",
        } <= set(point["mean"])
        assert point["gap"] == pytest.approx(point["mean"]["verifier@f1"] - point["mean"]["tfidf_steps"])
    assert r["points"][1]["proofs"] > 4 and (tmp_path / "curve.png").is_file()


def test_bench_prm_rules_smoke(tmp_path):
    from bench.prm_rules import argmax_rule, cumulative, first_cross, main

    assert first_cross([[0.1, 0.6, 0.2]], 0.5) == [[True, False, False]]  # wrong from the first crossing on
    assert argmax_rule([0.7, 0.3], [[0.2, 0.5, 0.1], [0.9, 0.1]], 0.5) == [[True, False, False], [True, True]]
    assert cumulative([0.5, 0.5]) == pytest.approx([0.5, 0.75])
    r = main(["--smoke", "true", "--json", str(tmp_path / "rules.json")])
    assert {row["rule"] for row in r["rows"]} >= {
        "verifier first-cross (cumulative)",
        "tfidf first-cross",
        "stacker (verifier + tfidf)",
    }
    assert all(0 <= row[s]["exact"] <= 1 for row in r["rows"] for s in ("valid", "test"))
    # the best on test at any threshold bounds what a threshold chosen on valid reaches there
    assert all(row["test_ceiling"] >= row["test"][row["objective"]] - 1e-12 for row in r["rows"])
    assert set(r["valid_picks"]) == {"exact", "f1_incorrect"} and (tmp_path / "rules.json").is_file()
    assert len(r["stacker_coefficients"]["stacker (verifier + tfidf)"]) == 4
    assert r["baselines"]["always_correct"]["f1_incorrect"] == 0.0  # it flags no step wrong
    assert 0 <= r["baselines"]["first_error_at_random"]["exact"] <= 1


def test_bench_classifier_curve_and_evaluators_refuse_bad_options_in_one_line(capsys, tmp_path):
    from bench import classifier_curve, evaluators
    from leanloop.tool import cli_entry

    assert cli_entry(classifier_curve.main, ["--sizes", "250,ten"], prog="bench.classifier_curve") == 2
    assert cli_entry(evaluators.main, ["--history_rounds", "8", "--valid_rounds", "2"], prog="bench.evaluators") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "sizes is a comma-separated list" in lines[0] and "history_rounds" in lines[1]
    # an output file that could not be written is refused before any work, not after it
    assert cli_entry(evaluators.main, ["--json", str(tmp_path / "missing" / "out.json")], prog="bench.evaluators") == 2
    assert cli_entry(classifier_curve.main, ["--json", str(tmp_path)], prog="bench.classifier_curve") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "does not exist" in lines[0] and "is a folder" in lines[1]
    with pytest.raises(SystemExit) as exit_:  # an unknown option: the parser's one line, exit 2
        classifier_curve.main(["--config_file", "x"])
    assert exit_.value.code == 2
