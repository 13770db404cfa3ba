"""The judge audit of the RL fast path: accepted rewards re-checked asynchronously by the judge
(the stand-in comparator answering comparator's recorded test projects), disagreements removed
from the replay buffer and the curriculum's solved count, the agreement rate in the report."""

from __future__ import annotations

import json
import random

import pytest

from leanloop.lean.judge import ComparatorJudge, JudgeConfig
from leanloop.lean.standins.comparator import prepare_comparator_dir
from leanloop.lean.types import VerifyRequest
from rl.audit import JudgeAudit, JudgeAuditConfig, JudgeItem, revoke_rejected
from rl.curriculum import ALWAYS_SOLVED, Curriculum, CurriculumConfig, ReplayBuffer, StoredProof
from rl.report import judge_section


def _item(shared_data, project: str, name: str, edit: str = "") -> JudgeItem:
    folder = shared_data / "comparator" / "projects" / project
    solution = (folder / "Solution.lean").read_text(encoding="utf-8") + edit
    statement = (folder / "Challenge.lean").read_text(encoding="utf-8").replace("sorry", "").rstrip()
    request = VerifyRequest(program=solution, name="comm", statement=statement, header="")
    return JudgeItem(step=3, name=name, completion=solution, request=request, source="lean")


@pytest.fixture()
def audit(tmp_path, shared_data):
    tools = prepare_comparator_dir(tmp_path / "tools", shared_data / "comparator")
    judge = ComparatorJudge(JudgeConfig(comparator=str(tools / "comparator"), lake_path=str(tools / "lake")))
    audit = JudgeAudit(judge, JudgeAuditConfig(enabled=True))
    yield audit
    audit.close()


def test_a_disagreement_is_revoked_and_the_agreement_rate_reported(audit, shared_data):
    items = [
        _item(shared_data, "simple_match", "honest"),
        _item(shared_data, "simple_axiom_issue", "gamed"),
        _item(shared_data, "simple_match", "unrecorded", edit="\n-- not recorded\n"),
    ]
    replay = ReplayBuffer()
    curriculum = Curriculum(["honest", "gamed", "unrecorded"], CurriculumConfig(retire_after=2))
    for item in items:
        assert replay.add(item.name, StoredProof(item.completion, [1, 2], "lean", 3))
        curriculum.record(item.name, 2, 2, 3)  # the fast path paid both rollouts: retired as always solved
    assert curriculum.states["gamed"].status == ALWAYS_SOLVED
    for item in items:
        item.credited = True  # credited at the step (a run without the held-back credit)
    # an evaluator-paid reward is re-checked too under the default sources
    evaluator_paid = _item(shared_data, "simple_match", "evaluator")
    evaluator_paid.source = "evaluator"
    assert audit.config.sources == ["lean", "evaluator"]
    assert audit.submit([*items, evaluator_paid]) == 4
    results = audit.collect(wait=True, timeout=60)
    verdicts = {r.item.name: r.agreed for r in results}
    assert verdicts == {"honest": True, "gamed": False, "unrecorded": None, "evaluator": True}
    results = [r for r in results if r.item.name != "evaluator"]
    assert revoke_rejected(results, replay, curriculum, step=4) == 1
    assert replay.get("gamed", random.Random(0)) is None and replay.get("honest", random.Random(0)) is not None
    gamed = curriculum.states["gamed"]
    assert gamed.status != ALWAYS_SOLVED and gamed.successes == 1  # its judged-wrong success taken back
    summary = audit.summary()
    assert summary == {
        "mode": "async",
        "submitted": 4,
        "agreed": 2,
        "disagreed": 1,
        "undecided": 1,
        "timeouts": 0,
        "pending": 0,
        "agreement_rate": 2 / 3,
        "gate_withheld": 0,
        "gate_s": 0.0,
    }
    assert audit.metrics()["judge/agreement_rate"] == 2 / 3
    text = "\n".join(judge_section(summary, 1.0))
    assert "agreement rate **0.667**" in text and "ALARM" in text and "undecided" in text
    row = json.loads(json.dumps(results[1].to_dict()))
    assert row["judge"] == "invalid" and row["agreed"] is False and row["completion"]


def test_share_selects_a_reproducible_fraction(audit, shared_data):
    audit.config.share = 0.3
    programs = [f"theorem t{i} : True := trivial" for i in range(400)]
    picked = [p for p in programs if audit.selected(p)]
    assert 80 < len(picked) < 160 and picked == [p for p in programs if audit.selected(p)]
    with pytest.raises(ValueError):
        JudgeAuditConfig(share=1.5)


def test_gate_judges_every_reward_it_pays_whatever_the_share(audit, shared_data):
    """``share`` and ``sources`` thin the async audit only: a gate that judged a share would pay the
    rest unjudged."""
    items = [_item(shared_data, "simple_match", f"t{i}", edit=f"\n-- {i}\n") for i in range(40)]
    items[0].source = "evaluator"
    audit.config.share, audit.config.sources = 0.2, ["lean"]
    assert 0 < len(audit.wanted(items)) < 40
    audit.config.mode = "gate"
    assert audit.wanted(items) == items


def test_quoted_pass_at_k_counts_the_judges_verdict(audit, shared_data):
    """rl.passk_eval with a judge: attempts the fast path accepted are re-checked and the judge's
    verdict is counted; a judge without an answer leaves the attempt unverified."""
    from types import SimpleNamespace

    from leanloop.lean.types import Category, Outcome
    from rl.passk_eval import EvaluationConfig, SamplingProtocol, evaluate_policy
    from rl.reward_harness import RewardHarness
    from leanloop.grpo.rollout import RolloutGenerationConfig
    from leanloop.prover.statements import Statement

    challenge = (shared_data / "comparator/projects/simple_match/Challenge.lean").read_text(encoding="utf-8")
    statement = Statement(
        name="comm", theorem="comm", header="", context="", statement=challenge.replace("sorry", "").rstrip()
    )
    texts = ["\n  grind\n", "\n  omega\n"]  # the recorded Solution's proof, and one nobody recorded

    class Rollout:
        config = RolloutGenerationConfig()

        def generate(self, model, prompts, attempts):
            return SimpleNamespace(texts=[t for _ in prompts for t in texts])

    class FastPathAcceptsAll:  # ASSUMED: the REPL fast path accepted both attempts
        async def check(self, requests):
            return [Outcome(Category.VALID, backend="fast path (assumed)") for _ in requests]

    result = evaluate_policy(
        None,
        Rollout(),
        lambda p: p.prompt,
        [statement],
        RewardHarness("rl", "continuation"),
        FastPathAcceptsAll(),
        None,
        EvaluationConfig(protocols=[SamplingProtocol(attempts=2, ks=[1, 2])]),
        judge=audit.judge,
    )
    assert result["judge"] == {"agreed": 1, "undecided": 1}
    assert result["categories"] == {"valid": 1, "unavailable": 1} and result["verified"] == 1


def test_shared_repls_are_refused_unless_explicitly_allowed():
    """The rl reward checks run one REPL process per candidate: a local backend gets
    fresh_process unless its config sets it; kimina or fresh_process: false share REPLs between
    candidates and are refused without reward_checks.allow_shared_repl (then flagged)."""
    from dataclasses import replace

    from leanloop.lean.backends import BackendConfig
    from rl.module import isolated_backend

    config, shared = isolated_backend(BackendConfig(kind="local"))
    assert config.local.fresh_process is True and not shared
    for risky in (
        BackendConfig(kind="kimina"),
        replace(BackendConfig(kind="local"), local=replace(BackendConfig().local, fresh_process=False)),
    ):
        with pytest.raises(ValueError, match="allow_shared_repl"):
            isolated_backend(risky)
        assert isolated_backend(risky, allow_shared_repl=True)[1] is True
    assert isolated_backend(BackendConfig(kind="replay")) == (BackendConfig(kind="replay"), False)


class SlowJudge(ComparatorJudge):
    """The stand-in judge, but the step's deadline passes before it answers (a candidate that
    spins in the judge's build)."""

    async def check_one(self, request):
        import asyncio

        await asyncio.sleep(30)
        return await super().check_one(request)


def test_undecided_earns_no_credit_and_agreement_hands_it_over(audit, shared_data):
    """async: the replay entry and the curriculum success wait for the judge; an undecided proof
    never gets them, an agreed one gets them when the verdict arrives."""
    from rl.audit import credit_agreed

    honest, unrecorded = (
        _item(shared_data, "simple_match", "honest"),
        _item(shared_data, "simple_match", "unrecorded", edit="\n-- not recorded\n"),
    )
    replay = ReplayBuffer()
    curriculum = Curriculum(["honest", "unrecorded"], CurriculumConfig(retire_after=2))
    for item in (honest, unrecorded):
        item.proof = StoredProof(item.completion, [1, 2], "lean", 3)
        curriculum.record(item.name, 2, 0, 3)  # attempts counted, the held-back success not
    assert curriculum.states["honest"].status == "never_solved"
    audit.submit([honest, unrecorded])
    results = audit.collect(wait=True, timeout=60)
    assert credit_agreed(results, replay, curriculum, step=4) == 1
    assert replay.get("honest", random.Random(0)) is not None and replay.get("unrecorded", random.Random(0)) is None
    assert curriculum.states["honest"].successes == 1 and curriculum.states["honest"].status == "active"
    assert curriculum.states["unrecorded"].successes == 0
    assert revoke_rejected(results, replay, curriculum, step=4) == 0  # nothing undecided was ever credited


def test_a_judge_timeout_on_a_paid_candidate_is_a_disagreement(tmp_path, shared_data):
    from rl.audit import JudgeResult
    from leanloop.lean.types import Category, Outcome

    item = _item(shared_data, "simple_match", "spins")
    assert JudgeResult(item, Outcome(Category.TIMEOUT)).agreed is False
    assert JudgeResult(item, Outcome(Category.UNAVAILABLE)).agreed is None
    evaluator_paid = _item(shared_data, "simple_match", "spins")
    evaluator_paid.source = "evaluator"
    # whatever paid it: a candidate that fools the evaluator can spin until the judge gives up
    assert JudgeResult(evaluator_paid, Outcome(Category.TIMEOUT)).agreed is False
    tools = prepare_comparator_dir(tmp_path / "tools", shared_data / "comparator")
    slow = SlowJudge(JudgeConfig(comparator=str(tools / "comparator"), lake_path=str(tools / "lake")))
    gate = JudgeAudit(slow, JudgeAuditConfig(enabled=True, mode="gate", gate_deadline_s=0.5))
    try:
        (result,) = gate.gate([item])
        assert result.timed_out and result.agreed is False
        assert gate.summary()["disagreed"] == 1 and gate.summary()["timeouts"] == 1
        assert gate.summary()["gate_withheld"] == 1
    finally:
        gate.close()


def test_gate_pays_only_what_the_judge_confirms(tmp_path, shared_data):
    tools = prepare_comparator_dir(tmp_path / "tools", shared_data / "comparator")
    judge = ComparatorJudge(JudgeConfig(comparator=str(tools / "comparator"), lake_path=str(tools / "lake")))
    gate = JudgeAudit(judge, JudgeAuditConfig(enabled=True, mode="gate", gate_deadline_s=60))
    items = [
        _item(shared_data, "simple_match", "honest"),
        _item(shared_data, "simple_axiom_issue", "gamed"),
        _item(shared_data, "simple_match", "unrecorded", edit="\n-- not recorded\n"),
    ]
    try:
        verdicts = [r.agreed for r in gate.gate(items)]
    finally:
        gate.close()
    assert verdicts == [True, False, None]
    assert gate.summary()["gate_withheld"] == 2 and gate.summary()["mode"] == "gate"
    with pytest.raises(ValueError):
        JudgeAuditConfig(mode="later")


def test_the_step_hook_withholds_gated_rewards_and_holds_back_async_credit(tmp_path, shared_data):
    """GRPOModule's hooks: under gate a rejected or undecided 1.0 becomes 0 before the update; under
    async the judged rollouts are the ones whose replay entry and curriculum credit wait."""
    from functools import partial
    from types import SimpleNamespace

    from leanloop.prover.statements import Statement
    from rl.reward_harness import Candidate, Stage
    from rl.module import GRPOModule
    from rl.reward import RolloutReward, Source

    tools = prepare_comparator_dir(tmp_path / "tools", shared_data / "comparator")
    judge = ComparatorJudge(JudgeConfig(comparator=str(tools / "comparator"), lake_path=str(tools / "lake")))
    items = [
        _item(shared_data, "simple_match", "honest"),
        _item(shared_data, "simple_axiom_issue", "gamed"),
        _item(shared_data, "simple_match", "unrecorded", edit="\n-- not recorded\n"),
    ]
    candidates = [
        Candidate(
            Statement(name=i.name, theorem="comm", header="", context="", statement=""),
            i.completion,
            Stage.READY,
            i.request.program,
            request=i.request,
        )
        for i in items
    ]
    paid = [
        RolloutReward(1.0, Source.LEAN, "valid"),
        RolloutReward(1.0, Source.EVALUATOR, "cancelled"),
        RolloutReward(1.0, Source.LEAN, "valid"),
    ]
    for mode in ("gate", "async"):
        audit = JudgeAudit(judge, JudgeAuditConfig(enabled=True, mode=mode, gate_deadline_s=60))
        fake = SimpleNamespace(judge_audit=audit, _append=lambda *a: None)
        fake._judge_items = partial(GRPOModule._judge_items, fake)
        try:
            rewards = GRPOModule._judge_gate(fake, 5, candidates, list(paid))
            held = GRPOModule._judge_pending(fake, 5, candidates, rewards)
        finally:
            audit.close()
        if mode == "gate":
            assert [r.reward for r in rewards] == [1.0, 0.0, 0.0] and held == {}
            assert rewards[1].lean == "judge_invalid" and rewards[2].lean == "judge_unavailable"
        else:
            assert [r.reward for r in rewards] == [1.0, 1.0, 1.0] and sorted(held) == [0, 1, 2]


def test_the_circuit_breaker_stops_a_step_of_infrastructure_failures():
    from leanloop.lean.types import Category, Outcome
    from rl.audit import InfraBreakerTripped, check_infra_share
    from rl.config import RewardChecksConfig
    from rl.hybrid import StepScores
    from rl.reward import Protocol, RolloutReward, Source

    broken = Outcome(Category.INFRA_ERROR, reasons=["infra_failure: unpickling the header environment failed"])
    rewards = [RolloutReward(None, Source.NONE, "infra_error", broken)] * 3
    rewards.append(RolloutReward(0.0, Source.LEAN, "invalid"))
    scores = StepScores(rewards, Protocol.LEAN, scoring_s=1.0, lean_started=4)
    with pytest.raises(InfraBreakerTripped, match="3 of 4 Lean checks ended infra_error.*unpickling"):
        check_infra_share(7, scores, RewardChecksConfig().max_infra_error_share)
    assert check_infra_share(7, scores, None) == 0.75
    assert check_infra_share(7, StepScores(rewards[3:], Protocol.LEAN, 1.0, lean_started=1), 0.5) == 0.0
    with pytest.raises(ValueError):
        RewardChecksConfig(max_infra_error_share=1.0)
    # a candidate's own failures (its REPL killed by its limits, and anything that follows in its
    # job: leanloop.lean.local charges it) score 0 and never count: no candidate can trip the breaker
    charged = Outcome(Category.INVALID, reasons=["candidate_failure: after the program had killed an earlier try"])
    abusers = [RolloutReward(0.0, Source.LEAN, "invalid", charged)] * 3 + rewards[:1]
    assert check_infra_share(7, StepScores(abusers, Protocol.LEAN, 1.0, lean_started=4), 0.5) == 0.25


def test_the_paper_config_gates_every_reward():
    import yaml

    from leanloop.paths import REPO_ROOT

    config = yaml.safe_load((REPO_ROOT / "configs/rl/paper.yaml").read_text(encoding="utf-8"))
    judge = JudgeAuditConfig(**config["model"]["audit"]["judge"])
    assert judge.enabled and judge.mode == "gate"
