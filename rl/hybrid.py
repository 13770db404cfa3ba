"""Scoring one batch of rollouts under a reward protocol: the hybrid race of seed Eq. 8."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from leanloop.lean.types import Outcome
from leanloop.lean.verifier import Verifier
from leanloop.evaluator import Evaluator, HistoryAwareEvaluator, Prediction, deadline_in
from rl.reward_harness import Candidate, Stage
from rl.reward import Protocol, RewardRule, RolloutReward, Source, combine


@dataclass
class StepScores:
    rewards: list[RolloutReward]
    protocol: Protocol
    scoring_s: float  # wall time from the start of scoring to the last reward
    cutoff_s: float | None = None  # hybrid: when the evaluator returned
    evaluator_s: float | None = None  # how long the evaluator took (also when only watched)
    lean_started: int = 0
    lean_in_time: int = 0  # Lean answers used (hybrid: before the cutoff, or awaited)
    lean_cancelled: int = 0
    cancelled_index: list[int] = field(default_factory=list)
    learned: dict[int, Prediction] = field(default_factory=dict)
    """A history-aware evaluator's learned part alone, per rollout index (the drift monitor tracks both)."""

    def values(self) -> list[float | None]:
        return [r.reward for r in self.rewards]

    def lean_first(self) -> int:
        """Rollouts whose Lean verdict arrived before the evaluator finished (every Lean-decided one
        when no evaluator raced): the numerator of LLF's Lean share, whose denominator is every rollout."""
        return sum(
            r.source is Source.LEAN
            and (self.cutoff_s is None or (r.lean_time_s is not None and r.lean_time_s <= self.cutoff_s))
            for r in self.rewards
        )

    def stats(self) -> dict[str, float]:
        rewards = self.rewards
        needing = [
            r
            for r in rewards
            if r.source in (Source.LEAN, Source.EVALUATOR, Source.NONE) and r.lean not in ("input_error",)
        ]
        by_lean = sum(r.source is Source.LEAN for r in needing)
        out: dict[str, float] = {
            # LLF App. F: "the fraction of rollouts whose Lean verdict arrives before the evaluator finishes"
            "reward/lean_share": self.lean_first() / len(rewards) if rewards else float("nan"),
            # ours, beside it: Lean's share of the rewards some verifier had to decide (no code and
            # precheck rejections left out)
            "reward/lean_share_checked": by_lean / len(needing) if needing else float("nan"),
            "reward/scoring_s": self.scoring_s,
            "reward/unscored": float(sum(r.reward is None for r in rewards)),
            "lean/started": float(self.lean_started),
            "lean/in_time": float(self.lean_in_time),
            "lean/cancelled": float(self.lean_cancelled),
        }
        if self.cutoff_s is not None:
            out["reward/cutoff_s"] = self.cutoff_s
        if self.evaluator_s is not None:
            out["reward/evaluator_s"] = self.evaluator_s
        for source in Source:
            values = [r.reward for r in rewards if r.source is source and r.reward is not None]
            out[f"reward/{source.value}/count"] = float(sum(r.source is source for r in rewards))
            if values:
                out[f"reward/{source.value}/mean"] = sum(values) / len(values)
        for category, n in Counter(r.lean for r in rewards).items():
            out[f"outcome/{category}"] = float(n)
        return out


class RewardScorer:
    """Rewards for a batch of :class:`Candidate` under one protocol."""

    def __init__(
        self,
        verifier: Verifier | None,
        evaluator: Evaluator | None,
        protocol: Protocol | str,
        rule: RewardRule | None = None,
        shadow: bool = True,
        evaluator_deadline_s: float | None = None,
    ):
        self.protocol = Protocol(protocol)
        if self.protocol.uses_lean and verifier is None:
            raise ValueError(f"protocol {self.protocol.value} needs a Lean verifier (lean: section of the config)")
        if self.protocol in (Protocol.HYBRID, Protocol.EVALUATOR) and evaluator is None:
            raise ValueError(f"protocol {self.protocol.value} needs an evaluator (evaluator: section of the config)")
        self.verifier = verifier
        self.evaluator = evaluator
        self.rule = rule or RewardRule()
        self.shadow = shadow
        self.evaluator_deadline_s = evaluator_deadline_s

    def score(self, candidates: Sequence[Candidate]) -> StepScores:
        return asyncio.run(self.ascore(candidates))

    async def _evaluate(
        self, candidates: Sequence[Candidate], ready: list[int], answers: dict[int, tuple[Outcome, float]]
    ) -> tuple[list[Prediction], float, dict[int, Prediction]]:
        """The evaluator's predictions for the ready rollouts. A :class:`HistoryAwareEvaluator`
        (classifiers.history) scores the programs while Lean runs, then
        combines at the cutoff with the verdicts of the group's siblings Lean has returned by then;
        its learned predictions alone come back too (by rollout index; empty for other evaluators)."""
        programs = [candidates[i].program for i in ready]
        deadline = deadline_in(self.evaluator_deadline_s) if self.evaluator_deadline_s else None
        history_aware = isinstance(self.evaluator, HistoryAwareEvaluator)
        began = time.perf_counter()
        score = self.evaluator.learned if history_aware else self.evaluator.score
        predictions = await asyncio.to_thread(score, programs, deadline)
        if len(predictions) != len(programs):
            raise RuntimeError(
                f"{type(self.evaluator).__name__}.score returned {len(predictions)} predictions "
                f"for {len(programs)} programs; the Evaluator interface gives one per program"
            )
        learned: dict[int, Prediction] = {}
        if history_aware:
            known = [answers[i][0].label if i in answers else None for i in ready]
            learned = dict(zip(ready, predictions))
            predictions = self.evaluator.combine(
                programs, predictions, [candidates[i].problem.name for i in ready], known
            )
        return list(predictions), time.perf_counter() - began, learned

    async def ascore(self, candidates: Sequence[Candidate]) -> StepScores:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ready = [i for i, c in enumerate(candidates) if c.stage is Stage.READY]
        answers: dict[int, tuple[Outcome, float]] = {}

        async def check(i: int) -> None:
            outcome = await self.verifier.check_one(candidates[i].request)
            answers[i] = (outcome, loop.time() - t0)

        tasks: dict[int, asyncio.Task] = {}
        if self.protocol.uses_lean:
            tasks = {i: asyncio.create_task(check(i)) for i in ready}
        watch = self.evaluator is not None and bool(ready) and (not self.protocol.lean_decides or self.shadow)
        evaluation = asyncio.create_task(self._evaluate(candidates, ready, answers)) if watch else None

        predictions: dict[int, Prediction] = {}
        evaluator_s = cutoff = None
        learned: dict[int, Prediction] = {}
        used: dict[int, tuple[Outcome, float]] = {}
        cancelled: list[int] = []
        if not ready:
            pass  # everything was decided by the harness: nothing to race
        elif self.protocol is Protocol.HYBRID:
            preds, evaluator_s, learned = await evaluation
            cutoff = loop.time() - t0
            predictions = dict(zip(ready, preds))
            used = dict(answers)  # the verdicts Lean returned before the cutoff
            waiting = [i for i in ready if i not in used and predictions[i].verdict is None]
            if waiting:  # the evaluator could not judge these: Lean's answer is the only one
                await asyncio.gather(*(tasks[i] for i in waiting))
                used.update({i: answers[i] for i in waiting})
            cancelled = [i for i in ready if i not in used]
            for i in cancelled:
                tasks[i].cancel()
            await asyncio.gather(*(tasks[i] for i in cancelled), return_exceptions=True)
        elif self.protocol.lean_decides:
            await asyncio.gather(*tasks.values())
            used = dict(answers)
            if evaluation is not None:
                preds, evaluator_s, learned = await evaluation
                predictions = dict(zip(ready, preds))
        else:
            preds, evaluator_s, learned = await evaluation
            predictions = dict(zip(ready, preds))
        rewards = []
        for i, candidate in enumerate(candidates):
            outcome, at = used.get(i, (None, None))
            rewards.append(
                combine(
                    self.protocol,
                    candidate,
                    outcome,
                    predictions.get(i),
                    self.rule,
                    lean_time_s=at,
                    cancelled=i in cancelled,
                )
            )
        return StepScores(
            rewards,
            self.protocol,
            scoring_s=loop.time() - t0,
            cutoff_s=cutoff,
            evaluator_s=evaluator_s,
            lean_started=len(tasks),
            lean_in_time=len(used),
            lean_cancelled=len(cancelled),
            cancelled_index=cancelled,
            learned=learned,
        )
