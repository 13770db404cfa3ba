"""Timeout audit: what did the step's time limit cost?

After a step, the proofs whose Lean check did not finish — timed out under a lean protocol, or
cancelled at the hybrid cutoff — are checked again with a larger budget (``timeout``). The report
says how many were valid after all (reward lost by the time limit, or decided by the evaluator
instead), and how many the evaluator accepted, split by the late Lean label: accepted-and-valid
(the evaluator was right), accepted-but-invalid (a false positive the policy was paid for). The
late labels also feed the drift monitor and the evaluator refresh.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from leanloop.lean.types import Category, Outcome
from leanloop.lean.verifier import Verifier
from rl.harness import Candidate
from rl.hybrid import StepScores
from rl.reward import CANCELLED


@dataclass
class AuditConfig:
    enabled: bool = True
    timeout: float = 300.0
    """Per-proof budget of the recheck (seconds of Lean time; LLF App. E: 600)."""
    max_items: int | None = 64
    """Recheck at most this many proofs per step (the first ones in batch order); None: every one
    (LLF rechecks every timeout)."""


@dataclass
class AuditReport:
    step: int
    unfinished: int = 0  # timed out or cancelled in the step
    rechecked: int = 0
    categories: dict[str, int] = field(default_factory=dict)
    valid: int = 0
    evaluator_scored: int = 0
    evaluator_accepted: int = 0
    evaluator_accepted_valid: int = 0
    evaluator_accepted_invalid: int = 0
    evaluator_rejected_valid: int = 0
    resolved: int = 0  # rechecks Lean labelled (valid or invalid) within the audit budget

    @property
    def valid_share(self) -> float | None:
        """valid / resolved (LLF App. E)."""
        return self.valid / self.resolved if self.resolved else None

    @property
    def evaluator_recall(self) -> float | None:
        """The evaluator's recall on the resolved valid proofs it scored."""
        scored_valid = self.evaluator_accepted_valid + self.evaluator_rejected_valid
        return self.evaluator_accepted_valid / scored_valid if scored_valid else None

    def metrics(self) -> dict[str, float]:
        keys = ("unfinished", "rechecked", "resolved", "valid", "evaluator_accepted", "evaluator_accepted_valid",
                "evaluator_accepted_invalid", "evaluator_rejected_valid")
        out = {f"audit/{k}": float(getattr(self, k)) for k in keys}
        for key in ("valid_share", "evaluator_recall"):
            if getattr(self, key) is not None:
                out[f"audit/{key}"] = float(getattr(self, key))
        return out

    def to_dict(self) -> dict:
        return {**asdict(self), "valid_share": self.valid_share, "evaluator_recall": self.evaluator_recall}


@dataclass
class Recheck:
    index: int  # rollout index in the step
    outcome: Outcome
    verdict: bool | None  # the evaluator's, if it scored this proof


class TimeoutAudit:
    def __init__(self, verifier: Verifier, config: AuditConfig | None = None):
        self.config = config or AuditConfig()
        self.verifier = verifier

    def unfinished(self, scores: StepScores) -> list[int]:
        return [i for i, r in enumerate(scores.rewards) if r.lean in (CANCELLED, Category.TIMEOUT.value)]

    def run(self, step: int, candidates: list[Candidate], scores: StepScores) -> tuple[AuditReport, list[Recheck]]:
        todo = self.unfinished(scores)
        report = AuditReport(step, unfinished=len(todo))
        if self.config.max_items is not None:
            todo = todo[: self.config.max_items]
        if not todo:
            return report, []
        outcomes = self.verifier.check_sync([candidates[i].request for i in todo])
        rechecks = []
        for i, outcome in zip(todo, outcomes):
            prediction = scores.rewards[i].prediction
            verdict = prediction.verdict if prediction is not None else None
            rechecks.append(Recheck(i, outcome, verdict))
            report.categories[outcome.category.value] = report.categories.get(outcome.category.value, 0) + 1
            label = outcome.label
            report.resolved += label is not None
            report.valid += label is True
            if verdict is not None:
                report.evaluator_scored += 1
                report.evaluator_accepted += bool(verdict)
                report.evaluator_accepted_valid += bool(verdict) and label is True
                report.evaluator_accepted_invalid += bool(verdict) and label is False
                report.evaluator_rejected_valid += (not verdict) and label is True
        report.rechecked = len(todo)
        return report, rechecks
