"""The feedback model's evaluators built from plain options: what the RL stage names in its config."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal

from feedback_model.config import CascadeConfig, SelfConsistencyConfig, TraceGenerationConfig

MODES = ("cascade", "feedback")


def _section(cls: type, values: Any, name: str) -> Any:
    if isinstance(values, cls):
        return values
    if not isinstance(values, dict):
        raise TypeError(f"evaluator option {name!r} must be a mapping of {cls.__name__} fields, got {values!r}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"evaluator option {name!r}: unknown keys {unknown}; {cls.__name__} takes {sorted(known)}")
    return cls(**values)


def evaluator(
    path: str,
    mode: Literal["cascade", "feedback"] = "cascade",
    generation: dict[str, Any] | TraceGenerationConfig | None = None,
    self_consistency: dict[str, Any] | SelfConsistencyConfig | bool | None = None,
    cascade: dict[str, Any] | CascadeConfig | None = None,
) -> Any:
    """An Evaluator over the feedback run at ``path`` (``artifacts://feedback_model/<run>`` or its
    final/ folder). ``mode``: ``cascade`` (the one-token gate of ``cascade.gate`` first, the feedback
    model on its positives) or ``feedback`` (the feedback model alone). ``self_consistency``: None /
    False for one greedy trace; True (seed defaults 5 / 0.8 / 4) or a mapping for the vote."""
    from feedback_model.cascade import build_cascade
    from feedback_model.consistency import SelfConsistencyEvaluator
    from feedback_model.evaluator import FeedbackEvaluator

    if mode not in MODES:
        raise ValueError(f"evaluator option mode must be one of {MODES}, got {mode!r}")
    if not path:
        raise ValueError(
            "the feedback evaluator needs evaluator.path: a feedback_model run "
            "(artifacts://feedback_model/<run>, made by `make feedback-model`) or its final/ folder"
        )
    generation = _section(TraceGenerationConfig, generation or {}, "generation")
    if self_consistency is True:
        self_consistency = SelfConsistencyConfig()
    sc = _section(SelfConsistencyConfig, self_consistency, "self_consistency") if self_consistency else None
    if mode == "cascade":
        return build_cascade(_section(CascadeConfig, cascade or {}, "cascade"), path, generation, sc)
    if cascade and _section(CascadeConfig, cascade, "cascade") != CascadeConfig():
        raise ValueError("evaluator option cascade is only read with mode: cascade")
    if sc is not None:
        return SelfConsistencyEvaluator.load(path, generation, self_consistency=sc)
    return FeedbackEvaluator.load(path, generation)
