"""Drift monitor: is the evaluator still right about the policy's current proofs?

The policy moves away from the programs the evaluator was trained on, and an RL policy is
optimised against the evaluator's mistakes: its false positives (accepting wrong proofs) are
reward the policy learns to farm. Every ``every_n_steps`` steps the monitor compares the
evaluator's verdicts with Lean labels obtained for the same programs — the ones Lean finished in
the step (the evaluator scored them too) and the ones the timeout audit rechecked afterwards — and
reports accuracy, false-positive rate (evaluator accepts, Lean rejects), false-negative rate and
the Lean share of the rewards over the window. An alarm is raised when the FPR exceeds
``fpr_alarm`` or the accuracy falls below ``accuracy_alarm`` (with at least ``min_pairs`` pairs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from rl.hybrid import StepScores
from rl.reward import Source


@dataclass
class DriftConfig:
    enabled: bool = True
    every_n_steps: int = 5
    steps: list[int] | None = None
    """Report at exactly these steps (LLF: 25, 125, 250) instead of every ``every_n_steps``. Each report
    covers every rollout Lean labelled since the last one: in the step, or later by the timeout audit."""
    fpr_alarm: float = 0.2
    accuracy_alarm: float = 0.7
    min_pairs: int = 10


@dataclass
class Pair:
    verdict: bool  # the evaluator's
    label: bool  # Lean's
    origin: str  # in_step / audit / refresh


@dataclass
class DriftReport:
    step: int
    pairs: int
    lean_valid: int
    lean_invalid: int
    accuracy: float | None
    fpr: float | None
    fnr: float | None
    lean_share: float | None
    alarm: bool
    reasons: list[str] = field(default_factory=list)
    learned: dict[str, float | None] | None = None
    """A history-aware evaluator's learned part alone on the same pairs (accuracy, fpr, fnr): how
    much of the agreement the per-problem evidence adds. None for other evaluators."""

    def metrics(self, prefix: str = "drift") -> dict[str, float]:
        out = {f"{prefix}/pairs": float(self.pairs), f"{prefix}/alarm": float(self.alarm)}
        for key in ("accuracy", "fpr", "fnr", "lean_share"):
            value = getattr(self, key)
            if value is not None:
                out[f"{prefix}/{key}"] = float(value)
        for key, value in (self.learned or {}).items():
            if value is not None:
                out[f"{prefix}/learned/{key}"] = float(value)
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def agreement(pairs: list[Pair]) -> tuple[float | None, float | None, float | None, int, int]:
    """accuracy, FPR, FNR (None where undefined), Lean-valid and Lean-invalid counts."""
    valid = [p for p in pairs if p.label]
    invalid = [p for p in pairs if not p.label]
    accuracy = sum(p.verdict == p.label for p in pairs) / len(pairs) if pairs else None
    fpr = sum(p.verdict for p in invalid) / len(invalid) if invalid else None
    fnr = sum(not p.verdict for p in valid) / len(valid) if valid else None
    return accuracy, fpr, fnr, len(valid), len(invalid)


class DriftMonitor:
    def __init__(self, config: DriftConfig | None = None):
        self.config = config or DriftConfig()
        self.pairs: list[Pair] = []
        self.learned_pairs: list[Pair] = []
        self.lean_rewards = 0
        self.verdict_rewards = 0
        self.history: list[DriftReport] = []

    def observe_step(self, scores: StepScores) -> int:
        """Pairs from one step's scoring; returns how many were added."""
        added = 0
        self.lean_rewards += scores.lean_first()
        self.verdict_rewards += len(scores.rewards)
        for i, r in enumerate(scores.rewards):
            label = r.outcome.label if r.outcome is not None and r.lean not in ("precheck_rejected",) else None
            verdict = r.prediction.verdict if r.prediction is not None else None
            if label is not None and verdict is not None:
                self.pairs.append(Pair(bool(verdict), bool(label), "in_step"))
                added += 1
                learned = scores.learned.get(i)
                if learned is not None and learned.verdict is not None:
                    self.learned_pairs.append(Pair(bool(learned.verdict), bool(label), "in_step"))
        return added

    def observe(self, verdict: bool | None, label: bool | None, origin: str) -> None:
        if verdict is not None and label is not None:
            self.pairs.append(Pair(bool(verdict), bool(label), origin))

    def due(self, step: int) -> bool:
        if not self.config.enabled or step <= 0:
            return False
        if self.config.steps is not None:
            return step in self.config.steps
        return step % self.config.every_n_steps == 0

    def state_dict(self) -> dict:
        """The pairs and shares gathered since the last report, and the reports so far."""
        return {
            "pairs": [asdict(p) for p in self.pairs],
            "learned_pairs": [asdict(p) for p in self.learned_pairs],
            "lean_rewards": self.lean_rewards,
            "verdict_rewards": self.verdict_rewards,
            "history": [asdict(r) for r in self.history],
        }

    def load_state_dict(self, state: dict) -> None:
        self.pairs = [Pair(**p) for p in state["pairs"]]
        self.learned_pairs = [Pair(**p) for p in state["learned_pairs"]]
        self.lean_rewards, self.verdict_rewards = state["lean_rewards"], state["verdict_rewards"]
        self.history = [DriftReport(**r) for r in state["history"]]

    def report(self, step: int, reset: bool = True) -> DriftReport:
        c = self.config
        accuracy, fpr, fnr, n_valid, n_invalid = agreement(self.pairs)
        share = self.lean_rewards / self.verdict_rewards if self.verdict_rewards else None
        reasons = []
        if len(self.pairs) >= c.min_pairs:
            if fpr is not None and fpr > c.fpr_alarm:
                reasons.append(f"false-positive rate {fpr:.2f} > {c.fpr_alarm}")
            if accuracy is not None and accuracy < c.accuracy_alarm:
                reasons.append(f"accuracy {accuracy:.2f} < {c.accuracy_alarm}")
        learned = None
        if self.learned_pairs:
            l_accuracy, l_fpr, l_fnr, _, _ = agreement(self.learned_pairs)
            learned = {"pairs": float(len(self.learned_pairs)), "accuracy": l_accuracy, "fpr": l_fpr, "fnr": l_fnr}
        report = DriftReport(
            step, len(self.pairs), n_valid, n_invalid, accuracy, fpr, fnr, share, bool(reasons), reasons, learned
        )
        self.history.append(report)
        if reset:
            self.pairs, self.learned_pairs, self.lean_rewards, self.verdict_rewards = [], [], 0, 0
        return report
