"""feedback-model-eval's metric definitions against LLF (App. D and G): sampling, bootstrap groups, ranking."""

from __future__ import annotations

from collections import Counter

import pytest

from feedback_model.config import CascadeConfig, CascadeEvalConfig
from feedback_model.cascade_eval import balanced_sample
from feedback_model.cascade_report import EVALUATORS, bootstrap_group, budget_table


def _row(i: int, prover: str, label: bool) -> dict:
    return {
        "id": f"{prover}-{i}",
        "prover": prover,
        "label": label,
        "reference_trace": f"trace {i}",
        "category": "valid" if label else "invalid",
    }


def test_feedback_sample_is_drawn_per_prover_and_label():
    """LLF: 334 per prover x label (2,004 over 3 provers); a per-label count would let the largest
    prover fill the sample."""
    rows = (
        [_row(i, "big", i % 2 == 0) for i in range(40)]
        + [_row(i, "small", i % 2 == 0) for i in range(6)]
        + [_row(i, "odd", True) for i in range(2)]
    )
    sample = balanced_sample(rows, 4, seed=42)
    by_id = {r["id"]: r for r in rows}
    cells = Counter((by_id[i]["prover"], by_id[i]["label"]) for i in sample)
    assert cells == {("big", True): 4, ("big", False): 4, ("small", True): 3, ("small", False): 3, ("odd", True): 2}
    assert balanced_sample(rows, 4, seed=42) == sample  # seeded


def test_paper_defaults_of_cascade_eval():
    assert CascadeEvalConfig().seed == 42 and CascadeEvalConfig().n_resamples == 5000
    assert CascadeConfig().threshold == 0.5  # LLF's gate; the calibrated one is a separate row


def test_bootstrap_groups_are_benchmark_and_problem():
    a = {"benchmark": "minif2f", "group": "p1"}
    b = {"benchmark": "proofnet", "group": "p1"}
    assert bootstrap_group(a) != bootstrap_group(b) and bootstrap_group(a) == bootstrap_group(dict(a))


def test_cascade_ties_are_broken_by_the_one_token_score():
    """Two accepted candidates of one problem: the cascade's score is 1.0 for both, so only the gate's
    score tells that the valid one comes first (coverage 1 at k = 1, not the tie's 1/2)."""
    records = []
    for name in EVALUATORS:
        for cid, label, gate in (("x", True, 0.9), ("y", False, 0.6)):
            score = gate if name == "one-token" else 1.0
            records.append(
                {
                    "evaluator": name,
                    "id": cid,
                    "label": label,
                    "score": score,
                    "prediction": True,
                    "group": "p",
                    "benchmark": "b",
                    "run": "",
                }
            )
    _, curves = budget_table(records)
    assert curves["cascade"]["ranked"][0] == 1.0
    assert curves["cascade + self-consistency"]["ranked"][0] == 1.0
    assert curves["feedback greedy"]["ranked"][0] == pytest.approx(0.5)  # not a cascade: its own score


def test_gate_is_bf16_on_a_gpu_and_fp32_on_the_cpu():
    """LLF runs the gate in bf16 on GPU (it used to be loaded in fp32 everywhere)."""
    from feedback_model.cascade import gate_dtype

    assert gate_dtype(CascadeConfig(), "cuda") == "bfloat16" and gate_dtype(CascadeConfig(), "cuda:1") == "bfloat16"
    assert gate_dtype(CascadeConfig(), "cpu") == "float32"
    assert gate_dtype(CascadeConfig(gate_dtype="float32"), "cuda") == "float32"
