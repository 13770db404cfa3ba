"""The hybrid reward protocol (seed Eq. 8) and its alternatives, on real recorded Lean outcomes.

Lean answers come from the replay backend (real RL-Lean recordings); ``rl.latency.TimedBackend``
controls only WHEN each answer arrives. Under the ``rl`` policy a recorded error makes a program
``invalid``; a recorded clean compile is ``unavailable`` (no trailer reply). The evaluator is a real
one-token classifier (accept-all threshold) behind a fixed extra latency, so the race is decided
by the clock, not by machine load.
"""

from __future__ import annotations

import time

import pytest

from leanloop.lean.verifier import Verifier
from rl.audit import AuditConfig, TimeoutAudit
from rl.drift import DriftConfig, DriftMonitor
from rl.reward_harness import RewardHarness, Stage
from rl.hybrid import RewardScorer
from rl.latency import TimedBackend
from rl.reward import Protocol, Source

SLOW = 30.0


class Slow:
    """A real evaluator that starts ``delay`` seconds late (its cutoff is then at least that)."""

    def __init__(self, inner, delay: float):
        self.inner, self.delay = inner, delay
        self.calls = 0

    def score(self, programs, deadline=None):
        self.calls += 1
        time.sleep(self.delay)
        return self.inner.score(programs, deadline)


@pytest.fixture(scope="module")
def batch(continuations):
    """4 fast and 4 slow real failing programs, 1 real passing one, 1 precheck exploit, 1 empty completion."""
    harness = RewardHarness("rl")
    failing = [
        c for c in continuations if not c[2]["verdict_pass"] and not c[2]["compilation_result"].get("system_errors")
    ]
    seen, chosen = set(), []
    for statement, completion, row in failing:
        if statement.name not in seen and harness.build(statement, completion).stage is Stage.READY:
            seen.add(statement.name)
            chosen.append((statement, completion))
        if len(chosen) == 8:
            break
    passing = next((s, c) for s, c, r in continuations if r["verdict_pass"])
    candidates = [harness.build(s, c) for s, c in chosen]
    candidates.append(harness.build(*passing))
    candidates.append(harness.build(passing[0], "\n  native_decide\n"))
    candidates.append(harness.build(passing[0], ""))
    assert [c.stage for c in candidates[-3:]] == [Stage.READY, Stage.PRECHECK, Stage.NO_CODE]
    return candidates


def timed(replay, candidates, slow_delay: float, fast=range(4), slow=range(4, 8), passing_delay: float = 0.0):
    delays = {candidates[i].program: 0.0 for i in fast}
    delays.update({candidates[i].program: slow_delay for i in slow})
    delays[candidates[8].program] = passing_delay
    # the composed program (harness block + trailer) has no recording and answers at once; the
    # verbatim fallback carries the recorded answer and its controlled delay
    return TimedBackend(replay, delay=lambda program, response: delays.get(program, 0.0))


def test_hybrid_keeps_early_lean_verdicts_and_cancels_the_rest(replay, classifier, batch):
    backend = timed(replay, batch, SLOW)
    evaluator = Slow(classifier(threshold=0.0), 0.5)
    scorer = RewardScorer(Verifier(backend, "rl", concurrency=16, timeout=60.0), evaluator, "hybrid")
    began = time.perf_counter()
    scores = scorer.score(batch)
    elapsed = time.perf_counter() - began
    assert elapsed < SLOW / 3  # the slow checks were not waited for
    rewards = scores.rewards
    for r in rewards[:4]:  # finished before the cutoff: Lean's verdict (recorded error) wins over "accept"
        assert (r.reward, r.source, r.lean) == (0.0, Source.LEAN, "invalid")
        assert r.prediction.verdict is True and r.lean_time_s < scores.cutoff_s
    for r in rewards[4:8]:  # still running at the cutoff: the evaluator's verdict, the check cancelled
        assert (r.reward, r.source, r.lean) == (1.0, Source.EVALUATOR, "cancelled") and r.outcome is None
    # a clean recording cannot be confirmed under rl (no trailer reply): no Lean label, evaluator decides
    assert (rewards[8].reward, rewards[8].source, rewards[8].lean) == (1.0, Source.EVALUATOR, "unavailable")
    assert (rewards[9].reward, rewards[9].source) == (0.0, Source.PRECHECK)
    assert (rewards[10].reward, rewards[10].source) == (0.0, Source.EXTRACTION)
    assert backend.cancelled == 4 and backend.finished == backend.started - 4
    assert scores.cutoff_s >= 0.5 and scores.lean_cancelled == 4 and sorted(scores.cancelled_index) == [4, 5, 6, 7]
    stats = scores.stats()
    # LLF App. F: "the fraction of rollouts whose Lean verdict arrives before the evaluator finishes":
    # every rollout counts, the one with no code and the precheck rejection included
    assert stats["reward/lean_share"] == pytest.approx(4 / 11)
    assert stats["reward/lean_share_checked"] == pytest.approx(4 / 9)  # ours: of those a verifier decides
    assert stats["reward/cutoff_s"] == scores.cutoff_s
    assert stats["reward/lean/count"] == 4 and stats["reward/evaluator/count"] == 5
    assert stats["reward/evaluator/mean"] == 1.0 and stats["reward/lean/mean"] == 0.0
    assert stats["outcome/invalid"] == 4 and stats["outcome/cancelled"] == 4 and stats["outcome/precheck_rejected"] == 1
    assert stats["outcome/no_code"] == 1 and stats["lean/cancelled"] == 4


def test_items_the_evaluator_could_not_score_wait_for_lean(replay, classifier, batch):
    backend = timed(replay, batch, 0.3)
    evaluator = Slow(classifier(threshold=0.0), 0.2)
    scorer = RewardScorer(Verifier(backend, "rl", 16, 60.0), evaluator, "hybrid", evaluator_deadline_s=0.05)
    scores = scorer.score(batch)
    assert all(r.prediction is not None and r.prediction.verdict is None for r in scores.rewards[:9])
    assert [r.source for r in scores.rewards[:8]] == [Source.LEAN] * 8
    assert all(r.reward == 0.0 for r in scores.rewards[:8]) and backend.cancelled == 0
    # Lean gave no label and the evaluator no verdict: unscored, never a guess
    assert scores.rewards[8].reward is None and scores.rewards[8].source is Source.NONE


def test_lean_protocols_wait_and_count_timeouts_as_failures(replay, classifier, batch):
    evaluator = classifier(threshold=0.0)
    backend = timed(replay, batch, 0.4)
    full = RewardScorer(Verifier(backend, "rl", 16, 60.0), evaluator, "lean").score(batch)
    assert [(r.reward, r.source, r.lean) for r in full.rewards[:8]] == [(0.0, Source.LEAN, "invalid")] * 8
    assert full.rewards[8].reward is None and full.rewards[8].lean == "unavailable"
    assert full.scoring_s >= 0.4 and full.cutoff_s is None and backend.cancelled == 0
    # the shadow evaluator scored every program, for the monitors only
    assert all(r.prediction is not None and r.prediction.verdict for r in full.rewards[:9])

    matched_backend = timed(replay, batch, 0.4)
    matched = RewardScorer(Verifier(matched_backend, "rl", 16, 0.1), evaluator, Protocol.LEAN_MATCHED).score(batch)
    assert [(r.reward, r.lean) for r in matched.rewards[:4]] == [(0.0, "invalid")] * 4
    assert [(r.reward, r.source, r.lean) for r in matched.rewards[4:8]] == [(0.0, Source.LEAN, "timeout")] * 4
    assert matched_backend.timed_out == 4

    # the audit rechecks the timed-out proofs with a larger budget: all four were invalid anyway,
    # and the (accept-all) evaluator accepted every one of them
    audit = TimeoutAudit(Verifier(timed(replay, batch, 0.4), "rl", 16, 5.0), AuditConfig(timeout=5.0))
    report, rechecks = audit.run(1, batch, matched)
    assert (report.unfinished, report.rechecked, report.valid) == (4, 4, 0)
    assert report.categories == {"invalid": 4}
    assert (report.evaluator_accepted, report.evaluator_accepted_invalid, report.evaluator_accepted_valid) == (4, 4, 0)
    assert [r.index for r in rechecks] == [4, 5, 6, 7]
    assert (report.resolved, report.valid_share, report.evaluator_recall) == (
        4,
        0.0,
        None,
    )  # no valid: recall undefined
    # LLF App. E rechecks every timeout: a cap (the old default took the first 64 / 128) is opt-in
    capped, _ = TimeoutAudit(Verifier(timed(replay, batch, 0.4), "rl", 16, 5.0), AuditConfig(max_items=2)).run(
        1, batch, matched
    )
    assert (capped.unfinished, capped.rechecked) == (4, 2)
    assert AuditConfig(max_items=None).max_items is None

    monitor = DriftMonitor(DriftConfig(every_n_steps=1, min_pairs=4, fpr_alarm=0.2))
    assert monitor.observe_step(matched) == 4  # the four Lean verdicts the shadow evaluator also judged
    for r in rechecks:
        monitor.observe(r.verdict, r.outcome.label, "audit")
    drift = monitor.report(1)
    assert (drift.pairs, drift.lean_invalid, drift.fpr, drift.accuracy) == (8, 8, 1.0, 0.0)
    assert drift.alarm and any("false-positive" in reason for reason in drift.reasons)
    assert drift.lean_share == pytest.approx(8 / 11)


def test_evaluator_only_starts_no_lean_check(replay, classifier, batch):
    backend = timed(replay, batch, SLOW)
    scores = RewardScorer(Verifier(backend, "rl", 16, 60.0), classifier(threshold=1.1), "evaluator").score(batch)
    assert backend.started == 0 and scores.lean_started == 0
    assert [r.source for r in scores.rewards[:9]] == [Source.EVALUATOR] * 9
    assert all(r.reward == 0.0 for r in scores.rewards)  # threshold above 1 rejects everything
    with pytest.raises(ValueError, match="needs an evaluator"):
        RewardScorer(Verifier(backend, "rl"), None, "hybrid")


def test_history_evaluator_uses_the_siblings_lean_returned_before_the_cutoff(replay, classifier, batch):
    """A history-aware evaluator scores while Lean runs; at the cutoff the group's finished sibling
    (a recorded error: invalid) lowers the score of its unfinished rollout, and not of another group's."""
    from dataclasses import replace

    from classifiers.evidence import Evidence, History
    from classifiers.history import HistoryEvaluator
    from classifiers.stacker import FEATURES, Stacker
    from leanloop.evaluator import HistoryAwareEvaluator

    group = batch[0].problem
    candidates = [batch[0], replace(batch[4], problem=group), batch[5]]
    delays = {batch[0].program: 0.0, batch[4].program: SLOW, batch[5].program: SLOW}
    backend = TimedBackend(replay, delay=lambda program, response: delays.get(program, 0.0))
    weights = {"score_logit": 1.0, "history_logit": 2.0, "sibling_logit": 2.0}  # counts alone: exact expectations
    stacker = Stacker(coef=[weights.get(f, 0.0) for f in FEATURES], intercept=0.0, prior_mean=0.5, threshold=0.5)
    inner = classifier(threshold=0.5)
    evaluator = HistoryEvaluator(Slow(inner, 0.5), stacker, History())
    # the declared protocol, not duck typing, decides that the cutoff combines with Lean's verdicts
    assert isinstance(evaluator, HistoryAwareEvaluator) and not isinstance(inner, HistoryAwareEvaluator)
    scores = RewardScorer(Verifier(backend, "rl", 16, 60.0), evaluator, "hybrid").score(candidates)
    first, sibling, other = scores.rewards
    assert (first.source, first.lean) == (Source.LEAN, "invalid")
    assert sibling.source is Source.EVALUATOR and other.source is Source.EVALUATOR
    learned = [p.score for p in inner.score([c.program for c in candidates])]

    def stacked(score, siblings):
        return float(stacker.predict([score], [Evidence(siblings=siblings)])[0])

    assert sibling.prediction.score == pytest.approx(stacked(learned[1], (0, 1)), abs=1e-6)
    assert other.prediction.score == pytest.approx(stacked(learned[2], (0, 0)), abs=1e-6)
    assert sibling.prediction.score < stacked(learned[1], (0, 0))
    # the drift monitor tracks the stacked verdicts and, beside them, the learned part alone
    assert set(scores.learned) == {0, 1, 2} and scores.learned[1].score == pytest.approx(learned[1], abs=1e-6)
    monitor = DriftMonitor(DriftConfig(min_pairs=1))
    assert monitor.observe_step(scores) == 1  # only the first rollout has a Lean label
    report = monitor.report(1)
    assert report.learned["pairs"] == 1 and report.metrics()["drift/learned/accuracy"] in (0.0, 1.0)
    assert report.to_dict()["learned"]["accuracy"] == report.learned["accuracy"]
