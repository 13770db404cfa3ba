"""Self-consistency ("Learning Lean Feedback", Section 5): k traces sampled at temperature T, each
judged by the seed's verdict rule; the program is accepted when at least m of them say valid, and
the share of valid traces is the score (what AUROC ranks by). Defaults 5 / 0.8 / 4.

Sample j of a program is seeded from (seed, program text, j), so a program gets the same k traces
whether it is scored alone, in a batch or behind the cascade's gate.
"""

from __future__ import annotations

from typing import Any, Sequence

from feedback_model.config import SelfConsistencyConfig, TraceFormat, TraceGenerationConfig
from feedback_model.evaluator import FeedbackPrediction, TraceEvaluator
from feedback_model.generate import GeneratedTrace, TraceGenerator, sample_seeds
from leanloop.traces import trace_verdict


def vote(verdicts: Sequence[bool], min_valid: int) -> tuple[bool, float]:
    """(accepted, share of valid traces): accepted iff at least ``min_valid`` traces are valid."""
    if not verdicts:
        raise ValueError("a vote needs at least one trace")
    valid = sum(bool(v) for v in verdicts)
    return valid >= min_valid, valid / len(verdicts)


class SelfConsistencyEvaluator(TraceEvaluator):
    def __init__(
        self,
        generator: TraceGenerator,
        tokenizer: Any,
        format: TraceFormat,
        config: TraceGenerationConfig,
        self_consistency: SelfConsistencyConfig | None = None,
    ) -> None:
        super().__init__(generator, tokenizer, format, config)
        self.consistency = self_consistency or SelfConsistencyConfig()
        self.samples = self.consistency.samples
        self.temperature = self.consistency.temperature
        self.top_p = self.consistency.top_p

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "min_valid": self.consistency.min_valid}

    def seeds(self, program: str) -> list[int]:
        return sample_seeds(program, self.samples, self.consistency.seed)

    def judge(self, traces: list[GeneratedTrace]) -> FeedbackPrediction:
        verdicts = [trace_verdict(t.text, truncated=t.truncated).valid for t in traces]
        accepted, share = vote(verdicts, self.consistency.min_valid)
        # the trace shown is the first one that agrees with the decision
        shown = next(t for t, v in zip(traces, verdicts) if v == accepted) if accepted in verdicts else traces[0]
        reason = f"vote: {sum(verdicts)}/{len(verdicts)} traces valid (accept at >= {self.consistency.min_valid})"
        return FeedbackPrediction(
            accepted,
            share,
            shown.text,
            sum(t.time_s for t in traces),
            reason,
            shown.truncated,
            sum(t.new_tokens for t in traces),
            tuple(verdicts),
        )
