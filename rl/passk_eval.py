"""pass@k of the RL policy through the hardened reward harness (unbiased estimator, leanloop.prover.passk).

After training, each evaluation statement gets ``attempts`` sampled completions; each goes through
the same harness as the rewards (trusted statement, ``rl`` policy) and Lean. As in
:mod:`sft.evaluate` (categories and pass@k table from :mod:`leanloop.prover.passk`): valid is a success; invalid,
precheck_rejected and no_program are failures; timeout / unavailable / infra_error / input_error
are NOT verified and never guessed — pass@k is computed over verified attempts only, with the
bounds the unverified attempts allow. The evaluator's verdicts give a separate, clearly labelled
*estimate* (what the reward saw), never mixed with Lean's numbers.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from leanloop.lean.types import Category
from rl.harness import RewardHarness, Stage
from leanloop.prover.passk import FAILURE, NO_PROGRAM, SUCCESS, StatementResult, mean_pass_at_k, pass_at_k_report
from leanloop.prover.statements import Statement


@dataclass
class EvaluationConfig:
    enabled: bool = True
    attempts: int = 4
    """Samples per statement (n of the estimator)."""
    ks: list[int] = field(default_factory=lambda: [1, 4])
    max_new_tokens: int | None = None
    """Default: the training generation limit."""
    temperature: float = 1.0
    top_p: float = 1.0
    prompts_per_batch: int = 4

    def __post_init__(self) -> None:
        if any(k < 1 or k > self.attempts for k in self.ks):
            raise ValueError(f"every k in {self.ks} must lie in [1, attempts={self.attempts}]")


def evaluate_policy(model: Any, rollout: Any, render: Callable[[Statement], str], problems: Sequence[Statement],
                    harness: RewardHarness, verifier: Any, evaluator: Any | None,
                    config: EvaluationConfig) -> dict[str, Any]:
    """Generate, verify, and tabulate pass@k (Lean) and the evaluator's estimate."""
    sampler = copy.copy(rollout)  # same tokenizer, stop tokens and engine; evaluation's sampling settings
    sampler.config = replace(rollout.config, temperature=config.temperature, top_p=config.top_p, min_new_tokens=0,
                             max_new_tokens=config.max_new_tokens or rollout.config.max_new_tokens)
    records: list[dict] = []
    for start in range(0, len(problems), config.prompts_per_batch):
        chunk = list(problems[start:start + config.prompts_per_batch])
        rollouts = sampler.generate(model, [render(p) for p in chunk], config.attempts)
        candidates = [harness.build(chunk[i // config.attempts], text) for i, text in enumerate(rollouts.texts)]
        ready = [c for c in candidates if c.stage is Stage.READY]
        outcomes = asyncio.run(verifier.check([c.request for c in ready])) if ready else []
        predictions = evaluator.score([c.program for c in ready]) if evaluator is not None and ready else []
        by_id = {id(c): (o, predictions[k] if predictions else None) for k, (c, o) in enumerate(zip(ready, outcomes))}
        for c in candidates:
            if c.stage is Stage.NO_CODE:
                category, verdict = NO_PROGRAM, None
            elif c.stage is Stage.PRECHECK:
                category, verdict = c.outcome.category.value, None
            else:
                outcome, prediction = by_id[id(c)]
                category = outcome.category.value
                verdict = prediction.verdict if prediction is not None else None
            records.append({"name": c.problem.name, "category": category, "evaluator_verdict": verdict})
    grouped: dict[str, Counter] = {}
    estimate: dict[str, list[int]] = {}
    for r in records:
        grouped.setdefault(r["name"], Counter())[r["category"]] += 1
        n_c = estimate.setdefault(r["name"], [0, 0])
        if r["category"] in (NO_PROGRAM, Category.PRECHECK_REJECTED.value):
            n_c[0] += 1  # deterministic failures count for the estimate too
        elif r["evaluator_verdict"] is not None:
            n_c[0] += 1
            n_c[1] += bool(r["evaluator_verdict"])
    results = []
    for name, categories in grouped.items():
        correct = sum(categories[c] for c in SUCCESS)
        verified = correct + sum(categories[c] for c in FAILURE)
        results.append(StatementResult(name, sum(categories.values()), verified, correct, dict(categories)))
    table = pass_at_k_report(results, config.ks)
    evaluator_table = {str(k): mean_pass_at_k([(n, c) for n, c in estimate.values() if n >= k], k)
                       for k in config.ks}
    categories = Counter(r["category"] for r in records)
    return {"statements": len(results), "attempts": len(records), "categories": dict(categories),
            "verified": sum(r.verified for r in results), "lean_pass_at_k": table,
            "evaluator_estimate_pass_at_k": evaluator_table if evaluator is not None else None,
            "per_statement": [r.__dict__ for r in results]}
