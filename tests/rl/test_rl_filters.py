"""Statement filters: one record per statement, every check's result as the Verifier gave it."""

from __future__ import annotations

import asyncio

import pytest

from leanloop.lean.acceptance import AcceptancePolicy, parse_statement
from leanloop.lean.check import LeanConfig
from leanloop.lean.types import Category, VerifyRequest
from leanloop.lean.verifier import Verifier
from rl.filters import (
    FilterConfig,
    StatementFilters,
    decide,
    filter_programs,
    load_judge,
    risk_flags,
    split_binders,
    summarize,
)
from leanloop.prover.statements import read_statements


@pytest.fixture(scope="module")
def goedel():
    return read_statements("shared://statements/minif2f_goedel_prover_v2_repaired.jsonl").statements


def test_every_statement_gets_a_record_with_honest_unavailable_results(goedel, replay):
    chosen = goedel[:6]
    records = StatementFilters(LeanConfig(), FilterConfig(), backend=replay).run(chosen)
    assert [r["name"] for r in records] == [s.name for s in chosen]
    for statement, record in zip(chosen, records):
        assert set(record["checks"]) == {"compile", "hypotheses", "negation", "triviality"}
        for check, result in record["checks"].items():
            if result["category"] == "not_applicable":  # no hypotheses to refute
                assert check == "hypotheses" and parse_statement(statement.statement, statement.theorem).binders == ""
                continue
            # nobody recorded Lean's answer to these programs: unavailable, with the reason, never a guess
            assert result["category"] == Category.UNAVAILABLE.value and result["label"] is None
            assert any(r.startswith("no_recording") for r in result["reasons"]) and result["backend"] == "replay"
        assert record["judge"] == {"faithful": None, "status": "not_configured"}
        risky = record["flags"]["nat_subtraction"] or record["flags"]["nat_division"]
        assert record["decision"] == ("review" if risky else "keep")  # high-risk: out of training, to an expert
    summary = summarize(records)
    reviewed = sum(r["decision"] == "review" for r in records)
    assert summary["statements"] == 6 and summary["decision"] == {"keep": 6 - reviewed, "review": reviewed} and reviewed
    assert sum(summary["checks"]["compile"].values()) == 6


def test_filter_programs_state_what_they_check(goedel):
    statement = next(s for s in goedel if s.name == "mathd_algebra_478")
    programs = {p.check: p for p in filter_programs(statement, FilterConfig())}
    compile_ = programs["compile"].request.program
    assert (
        compile_.startswith(statement.header)
        and compile_.rstrip().endswith("sorry")
        and programs["compile"].profile == "statement"
    )
    hyps = programs["hypotheses"].request
    assert hyps.name == "mathd_algebra_478_hypotheses_false" and ": False := by" in hyps.statement
    assert "(h₂ : b = 30)" in hyps.statement and hyps.statement in hyps.program
    negation = programs["negation"].request
    assert negation.statement.startswith("theorem mathd_algebra_478_negation : ¬ (∀ (b h v : ℝ)")
    assert "v = 65) := by" in negation.statement
    trivial = programs["triviality"].request
    assert trivial.statement.endswith(": v = 65 := by") and "first |" in trivial.program
    # each is a well-formed request for its policy: the rl harness parses the derived statement
    from leanloop.lean.acceptance import AcceptancePolicy

    for check in ("hypotheses", "negation", "triviality"):
        prepared = AcceptancePolicy("rl", heartbeats=40_000).prepare(programs[check].request)
        assert prepared.check_name and "maxHeartbeats 40000" in prepared.program, check


def test_risk_flags_read_the_statement(goedel):
    flagged = {s.name: risk_flags(s) for s in goedel}
    subtraction = [n for n, f in flagged.items() if f["nat_subtraction"]]
    division = [n for n, f in flagged.items() if f["nat_division"]]
    assert subtraction and division
    by_name = {s.name: s for s in goedel}
    for name in subtraction:
        text = by_name[name].statement
        assert ("ℕ" in text or "Nat" in text) and "-" in text
    assert not flagged["mathd_algebra_478"]["nat_subtraction"]  # reals
    groups = split_binders("(a b : ℝ) {n : ℕ} [Fintype α] (h₀ : f (x - 1) = 2)")
    assert [(g.names, g.type, g.kind) for g in groups] == [
        (["a", "b"], "ℝ", "("),
        (["n"], "ℕ", "{"),
        ([], "Fintype α", "["),
        (["h₀"], "f (x - 1) = 2", "("),
    ]
    # answer in a hypothesis: the goal is assumed
    from dataclasses import replace

    leaky = replace(
        by_name["mathd_algebra_478"], statement="theorem mathd_algebra_478 (v : ℝ) (h : 65 = v) : v = 65 := by"
    )
    assert risk_flags(leaky)["answer_in_hypothesis"]


def test_decisions_from_real_outcomes(rl_rows, replay):
    # a real recorded Lean error for a program under the statement profile: "does not compile"
    failing = next(r for r in rl_rows if not r["verdict_pass"] and not r["compilation_result"].get("system_errors"))
    outcome = asyncio.run(Verifier(replay, "statement").check_one(VerifyRequest(failing["code"], name=failing["name"])))
    assert outcome.category is Category.INVALID and outcome.first_error
    flags = {"nat_subtraction": True, "nat_division": False, "answer_in_hypothesis": False}
    record = {"checks": {"compile": {"category": outcome.category.value}}, "flags": flags}
    assert decide(record, FilterConfig()) == ("drop", ["compile_error"])
    keep = {"checks": {"compile": {"category": "unavailable"}}, "flags": flags}
    # RL environments guide: natural-number subtraction is a high-risk pattern -> "expert_review", out of training
    assert decide(keep, FilterConfig()) == ("review", ["flag:nat_subtraction"])
    assert decide(keep, FilterConfig(review_flags=[])) == ("keep", [])
    assert decide(keep, FilterConfig(drop_flags=["nat_subtraction"])) == ("drop", ["flag:nat_subtraction"])
    trivial = {"checks": {"triviality": {"category": "valid"}}, "flags": flags}
    assert decide(trivial, FilterConfig()) == ("review", ["flag:nat_subtraction"])
    assert decide(trivial, FilterConfig(review_flags=[])) == ("retire", ["trivial"])
    assert decide(trivial, FilterConfig(trivial="drop")) == ("drop", ["trivial"])
    vacuous = {"checks": {"hypotheses": {"category": "valid"}, "negation": {"category": "valid"}}, "flags": flags}
    assert decide(vacuous, FilterConfig())[1] == ["hypotheses_inconsistent", "negation_proved"]


def test_the_filters_take_the_lean_blocks_backend_and_concurrency_and_their_own_budget(replay):
    lean = LeanConfig(profile="rl", heartbeats=None, concurrency=3, timeout=99.0)
    filters = StatementFilters(lean, FilterConfig(heartbeats=1234, timeout=5.0), backend=replay)
    statement, rl = filters.verifiers["statement"], filters.verifiers["rl"]
    assert statement.backend is rl.backend is replay  # one pool for both profiles
    assert (statement.concurrency, statement.timeout, rl.concurrency, rl.timeout) == (3, 5.0, 3, 5.0)
    assert (statement.policy.name, rl.policy.name, rl.policy.profile.heartbeats) == ("statement", "rl", 1234)
    assert statement.policy.profile.heartbeats == AcceptancePolicy("statement").profile.heartbeats


def test_judge_hook(goedel, replay):
    filters = StatementFilters(LeanConfig(), FilterConfig(checks=["compile"]), backend=replay)
    filters.judge = lambda s: {"faithful": s.name != "mathd_algebra_478", "rationale": "test judge"}
    records = filters.run(goedel[:2])
    assert records[0]["judge"]["faithful"] is False and records[0]["decision"] == "drop"
    assert records[0]["decision_reasons"] == ["judge_unfaithful"] and records[1]["decision"] == "keep"
    assert load_judge("os.path:basename")("a/b") == "b"
    with pytest.raises(ValueError, match="module:function"):
        load_judge("os.path.basename")
    with pytest.raises(ValueError, match="unknown filter checks"):
        FilterConfig(checks=["vibes"])
