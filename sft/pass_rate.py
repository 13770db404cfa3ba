"""The offline pass-rate filter (LLF Section 6): RL trains on the statements the starting prover
solves sometimes, 0 < p <= 0.75, with p measured from sampled attempts verified by ``sft.evaluate``.

Statements the evaluation never saw have no pass rate and are left out (an unmeasured statement is
not evidence of a useful one)."""

from __future__ import annotations

import json

from sft.config import PassRateFilter
from sft.corpus import run_folder


def pass_rates(attempts: str) -> dict[str, float]:
    """name -> valid attempts / attempts, from an sft_eval run's ``results.json``."""
    folder = run_folder(attempts)
    path = folder / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{attempts}: no results.json (the pass-rate filter needs a finished sft_eval run: "
                                "make sample then make sft-eval on the training statements)")
    statements = json.loads(path.read_text())["statements"]
    return {s["name"]: s["correct"] / s["attempts"] for s in statements if s["attempts"]}


def within_pass_rate(config: PassRateFilter) -> set[str]:
    """Names whose pass rate lies in (low, high]."""
    if not 0.0 <= config.low < config.high <= 1.0:
        raise ValueError(f"pass_rate needs 0 <= low < high <= 1, got ({config.low}, {config.high}]")
    return {name for name, p in pass_rates(config.attempts).items() if config.low < p <= config.high}
