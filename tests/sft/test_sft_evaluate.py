"""pass@k through the Verifier on real prover attempts (RL-Lean completions, replayed Lean answers):
the estimate uses only verified attempts and the report counts the unverified ones honestly."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest

from leanloop.lean.backends import BackendConfig, ReplayBackendConfig
from leanloop.artifacts import Manifest
from leanloop.training.models import ModelSpec
from leanloop.lean.check import LeanConfig
from sft.config import EvaluateConfig, SampleConfig, StatementsConfig
from sft.evaluate import evaluate
from leanloop.prover.generation import Attempt, SamplingConfig
from leanloop.prover.passk import pass_at_k
from leanloop.prover.prompt import PromptConfig
from sft.sample import candidate_rows, merge, sample_dir
from leanloop.prover.shards import SampleJournal
from leanloop.prover.statements import read_statements

DSP = "shared://statements/minif2f_deepseek_prover_v1.5.jsonl"
K = 4
NOVEL = "\n  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), mul_self_nonneg (a * b - 7)]"


@pytest.fixture(scope="module")
def attempts(shared_data):
    """Per statement, K real completions (rounds 0..3 of RL-Lean) with their recorded verdicts; two
    statements with passes and fails, one with only fails; no system errors."""
    path = shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    by_name = defaultdict(list)
    for line in gzip.open(path, "rt", encoding="utf-8"):
        row = json.loads(line)
        by_name[row["name"]].append(row)
    clean = {
        n: rows[:K]
        for n, rows in by_name.items()
        if not any(r["compilation_result"].get("system_errors") for r in rows[:K])
    }
    mixed = [n for n, rows in clean.items() if 0 < sum(r["verdict_pass"] for r in rows) < K][:2]
    failing = [n for n, rows in clean.items() if not any(r["verdict_pass"] for r in rows)][:1]
    return {name: clean[name] for name in mixed + failing}


def _sample_run(attempts, novel_name, empty_name) -> tuple[SampleConfig, dict]:
    """Write the attempts as a sample run with the sampler's own row builder, journal and merge; one
    attempt becomes an unrecorded proof, another an empty completion."""
    statements = {s.name: s for s in read_statements(DSP).statements}
    chosen = [statements[name] for name in attempts]
    config = SampleConfig(
        model=ModelSpec(name="qwen3-tiny"),
        run="rl_lean",
        statements=StatementsConfig(path=DSP, names=list(attempts)),
        prompt=PromptConfig(),
        sampling=SamplingConfig(k=K),
    )
    prover = {"path": "Slim205/RL-Lean Expert_V2 rounds 0-3", "hash": None}
    journal = SampleJournal(sample_dir(config.run), K)
    verdicts = {}
    for statement in chosen:
        completions = [r["code"][len(statement.prompt) :] for r in attempts[statement.name]]
        verdict = [r["verdict_pass"] for r in attempts[statement.name]]
        if statement.name == novel_name:
            completions[-1], verdict[-1] = NOVEL, None  # nobody recorded Lean's answer for this
        if statement.name == empty_name:
            completions[0], verdict[0] = "", "no_program"
        verdicts[statement.name] = verdict
        rows = candidate_rows(
            statement,
            [Attempt(c, "stop", 0) for c in completions],
            prover=prover,
            source="rl_lean",
            sampling=config.sampling,
            keep_completion=True,
        )
        journal.append(statement.name, rows)
    merge(config, chosen, 0, sample_dir(config.run), prover)
    return config, verdicts


def _evaluate(profile: str, ks=(1, 2, K)) -> dict:
    out = evaluate(
        EvaluateConfig(
            samples=str(sample_dir("rl_lean")),
            run=profile,
            ks=list(ks),
            lean=LeanConfig(
                backend=BackendConfig(kind="replay", replay=ReplayBackendConfig(sources=["rl_lean"])), profile=profile
            ),
        )
    )
    return {
        "results": json.loads((out / "results.json").read_text()),
        "report": (out / "report.md").read_text(),
        "outcomes": [json.loads(line) for line in (out / "outcomes.jsonl").open()],
    }


def test_pass_at_k_counts_unverified_attempts_as_failures(attempts, artifacts):
    names = list(attempts)
    _, verdicts = _sample_run(attempts, novel_name=names[0], empty_name=names[1])

    # collection profile: replay reproduces the recorded verdicts; the unrecorded proof is unavailable
    collection = _evaluate("collection")
    categories = {(o["name"], o["attempt"]): o["category"] for o in collection["outcomes"]}
    for name, verdict in verdicts.items():
        for attempt, recorded in enumerate(verdict):
            expected = {True: "valid", False: "invalid", None: "unavailable", "no_program": "no_program"}[recorded]
            assert categories[(name, attempt)] == expected
    for k in (1, 2, K):
        counts = [
            (sum(v is not None for v in verdict), sum(v is True for v in verdict)) for verdict in verdicts.values()
        ]
        estimable = [(n, c) for n, c in counts if n >= k]
        row = collection["results"]["pass_at_k"][str(k)]
        # LLF Eq. 10: every statement, an unverified attempt (the unrecorded proof) is a failure
        failures = [pass_at_k(len(v), sum(x is True for x in v), k) for v in verdicts.values()]
        assert row["statements"] == len(verdicts)
        assert row["pass_at_k"] == pytest.approx(sum(failures) / len(failures))
        # diagnostics beside it: verified attempts only, and the all-pass upper bound
        assert row["statements_estimated"] == len(estimable)
        assert row["statements_left_out"] == len(counts) - len(estimable)
        assert row["verified_only_pass_at_k"] == pytest.approx(
            sum(pass_at_k(n, c, k) for n, c in estimable) / len(estimable)
        )
        high = [pass_at_k(len(v), sum(x is True or x is None for x in v), k) for v in verdicts.values()]
        assert row["upper_bound"] == pytest.approx(sum(high) / len(high))
    assert row["statements"] > row["statements_estimated"]  # at k = K the unrecorded proof no longer hides a statement
    assert "1 of 12 attempts have no Lean verdict" in collection["report"]
    assert "they count as failures in pass@k" in collection["report"]

    # rl profile: a clean recording has no reply for the harness trailer (statement + axioms check),
    # so recorded passes are unavailable too; recorded failures stay invalid. Nothing is guessed.
    rl = _evaluate("rl")
    assert not any(o["category"] == "valid" for o in rl["outcomes"])
    unverified = sum(v is True or v is None for verdict in verdicts.values() for v in verdict)
    assert f"{unverified} of 12 attempts have no Lean verdict" in rl["report"]
    for statement in rl["results"]["statements"]:
        verdict = verdicts[statement["name"]]
        assert statement["verified"] == sum(v is False or v == "no_program" for v in verdict)
        assert statement["correct"] == 0
    estimated = rl["results"]["pass_at_k"][str(K)]
    assert estimated["statements_estimated"] == sum(
        all(v is False or v == "no_program" for v in verdict) for verdict in verdicts.values()
    )


def test_evaluation_refuses_theorems_the_prover_trained_on(attempts, artifacts):
    _sample_run(attempts, novel_name=None, empty_name=None)
    trained = Manifest(stage="sft", run="leaky", counts={"train_theorems": [next(iter(attempts))]})
    trained.write(artifacts / "sft" / "leaky")
    with pytest.raises(ValueError, match="training set"):
        evaluate(EvaluateConfig(samples=str(sample_dir("rl_lean")), ks=[1], sft=str(artifacts / "sft" / "leaky")))
    with pytest.raises(ValueError, match=r"not in \[1, 4\]"):
        evaluate(EvaluateConfig(samples=str(sample_dir("rl_lean")), ks=[8]))

    # disjoint from the SFT data, but the base model's pretraining had no holdout: said in the report
    Manifest(stage="pretrain", run="open").write(artifacts / "pretrain" / "open")
    clean = Manifest(stage="sft", run="clean", counts={"train_theorems": ["some_other_theorem"]})
    clean.add_input("base_model", artifacts / "pretrain" / "open")
    clean.write(artifacts / "sft" / "clean")
    out = evaluate(
        EvaluateConfig(
            samples=str(sample_dir("rl_lean")),
            ks=[1],
            run="caveat",
            sft=str(artifacts / "sft" / "clean"),
            lean=LeanConfig(
                profile="rl", backend=BackendConfig(kind="replay", replay=ReplayBackendConfig(sources=["rl_lean"]))
            ),
        )
    )
    assert "pretrained without a holdout" in (out / "report.md").read_text()
