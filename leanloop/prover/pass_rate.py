"""The offline pass-rate filter (LLF Section 6): RL trains on the statements the starting prover
solves sometimes, 0 < p <= 0.75, with p measured from sampled attempts verified by ``sft.evaluate``
(an ``sft_eval`` run's ``results.json``).

Statements the evaluation never saw have no pass rate and are left out (an unmeasured statement is
not evidence of a useful one)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from leanloop.artifacts import resolve_run


@dataclass
class PassRateFilter:
    """Keep the statements whose pass rate over sampled attempts lies in (``low``, ``high``] (LLF
    Section 6: 0 < p <= 0.75: never solved teaches nothing, almost always solved little)."""

    attempts: str
    """An sft_eval run (``artifacts://sft_eval/<run>``) of the starting prover on these statements:
    p = valid attempts / attempts (unverified ones are failures, as in pass@k)."""
    low: float = 0.0
    """Exclusive lower bound."""
    high: float = 0.75
    """Inclusive upper bound."""


def pass_rates(attempts: str) -> dict[str, float]:
    """name -> valid attempts / attempts, from a finished sft_eval run's ``results.json``."""
    path = resolve_run(attempts, "sft_eval") / "results.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{attempts}: no results.json (the pass-rate filter needs a finished sft_eval run: "
            "make sft-sample then make sft-eval on the training statements)"
        )
    statements = json.loads(path.read_text())["statements"]
    return {s["name"]: s["correct"] / s["attempts"] for s in statements if s["attempts"]}


def within_pass_rate(config: PassRateFilter) -> set[str]:
    """Names whose pass rate lies in (low, high]."""
    if not 0.0 <= config.low < config.high <= 1.0:
        raise ValueError(f"pass_rate needs 0 <= low < high <= 1, got ({config.low}, {config.high}]")
    return {name for name, p in pass_rates(config.attempts).items() if config.low < p <= config.high}
