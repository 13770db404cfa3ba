"""The Reward interface (docs/design.md): Lean Outcomes and evaluator Predictions combined under a named
protocol into one reward per rollout.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from leanloop.lean.types import Category, Outcome
from leanloop.evaluator import Prediction
from rl.reward_harness import Candidate, Stage


class Protocol(str, Enum):
    LEAN = "lean"
    LEAN_MATCHED = "lean_matched"
    HYBRID = "hybrid"
    EVALUATOR = "evaluator"

    @property
    def uses_lean(self) -> bool:
        return self is not Protocol.EVALUATOR

    @property
    def lean_decides(self) -> bool:
        """Lean alone decides (the evaluator, if it runs, is only watched)."""
        return self in (Protocol.LEAN, Protocol.LEAN_MATCHED)


class Source(str, Enum):
    """Where a rollout's reward came from (logged per step)."""

    EXTRACTION = "extraction"  # no proof in the completion: 0
    PRECHECK = "precheck"  # rejected by the policy's text rules: 0
    LEAN = "lean"  # Lean's verdict (valid 1 / invalid 0 / timeout 0 under lean protocols)
    EVALUATOR = "evaluator"  # the evaluator's verdict
    REPLAY = "replay"  # a buffered successful proof put into an all-fail group (rl.curriculum)
    NONE = "none"  # no verdict from anyone: unscored


# what happened to a rollout's Lean check, besides Outcome categories
CANCELLED = "cancelled"  # still running at the hybrid cutoff
NOT_RUN = "not_run"  # evaluator-only protocol, or decided before Lean


@dataclass
class RolloutReward:
    reward: float | None
    source: Source
    lean: str  # the Lean outcome category, or cancelled / not_run / no_code / precheck_rejected
    outcome: Outcome | None = None
    prediction: Prediction | None = None
    lean_time_s: float | None = None  # when the Lean answer arrived, seconds after scoring began


@dataclass
class RewardRule:
    """The numbers: valid 1, failure 0; the evaluator contributes its verdict (or its score)."""

    evaluator_reward: Literal["verdict", "score"] = "verdict"
    """``verdict``: 1 if the evaluator accepts (the seed's Eq. 8); ``score``: its probability."""

    def evaluator_value(self, prediction: Prediction | None) -> float | None:
        if prediction is None or prediction.verdict is None:
            return None
        if self.evaluator_reward == "score" and prediction.score is not None:
            return float(prediction.score)
        return 1.0 if prediction.verdict else 0.0


def combine(
    protocol: Protocol | str,
    candidate: Candidate,
    outcome: Outcome | None,
    prediction: Prediction | None,
    rule: RewardRule | None = None,
    lean_time_s: float | None = None,
    cancelled: bool = False,
) -> RolloutReward:
    """One rollout's reward. ``outcome``: Lean's answer if it arrived in time (None: not run or
    cancelled); ``prediction``: the evaluator's (None: it did not run)."""
    protocol = Protocol(protocol)
    rule = rule or RewardRule()
    if candidate.stage is Stage.NO_CODE:
        return RolloutReward(0.0, Source.EXTRACTION, "no_code")
    if candidate.stage is Stage.PRECHECK:
        decided = candidate.outcome
        if decided is not None and decided.category is Category.PRECHECK_REJECTED:
            return RolloutReward(0.0, Source.PRECHECK, Category.PRECHECK_REJECTED.value, decided)
        # input_error: the trusted statement itself is broken; not the policy's fault, no reward
        return RolloutReward(None, Source.NONE, decided.category.value if decided else "input_error", decided)
    lean = CANCELLED if cancelled else (outcome.category.value if outcome is not None else NOT_RUN)
    base = dict(lean=lean, outcome=outcome, prediction=prediction, lean_time_s=lean_time_s)
    if outcome is not None and outcome.category is Category.PRECHECK_REJECTED:
        return RolloutReward(0.0, Source.PRECHECK, **base)
    label = outcome.label if outcome is not None else None
    if protocol.lean_decides:
        if label is not None:
            return RolloutReward(1.0 if label else 0.0, Source.LEAN, **base)
        if outcome is not None and outcome.category is Category.TIMEOUT:
            return RolloutReward(0.0, Source.LEAN, **base)
        return RolloutReward(None, Source.NONE, **base)
    if protocol is Protocol.HYBRID and label is not None:
        return RolloutReward(1.0 if label else 0.0, Source.LEAN, **base)
    value = rule.evaluator_value(prediction)
    if value is not None:
        return RolloutReward(value, Source.EVALUATOR, **base)
    return RolloutReward(None, Source.NONE, **base)
