"""pass@k of the RL policy through the hardened reward harness (unbiased estimator, leanloop.prover.passk)."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from leanloop.lean.types import Category
from rl.reward_harness import RewardHarness, Stage
from leanloop.prover.passk import NO_PROGRAM, mean_pass_at_k, pass_at_k_report, per_statement, repeat_summary
from leanloop.prover.statements import Statement


@dataclass
class SamplingProtocol:
    """``runs`` independent runs of ``attempts`` samples per statement at ``temperature``; pass@k for
    each of ``ks``, averaged over the runs."""

    name: str = "pass@k"
    attempts: int = 4
    ks: list[int] = field(default_factory=lambda: [1, 4])
    temperature: float = 1.0
    runs: int = 1

    def __post_init__(self) -> None:
        if any(k < 1 or k > self.attempts for k in self.ks):
            raise ValueError(f"every k in {self.ks} must lie in [1, attempts={self.attempts}]")
        if self.runs < 1:
            raise ValueError(f"evaluation protocol {self.name!r} needs runs >= 1")


@dataclass
class EvaluationConfig:
    enabled: bool = True
    protocols: list[SamplingProtocol] = field(default_factory=lambda: [SamplingProtocol()])
    max_new_tokens: int | None = None
    """Default: the training generation limit (LLF evaluates with up to 32,768)."""
    top_p: float = 1.0
    timeout: float | None = None
    """Per-proof Lean budget of the evaluation (LLF: 180 s); None: ``lean.timeout``. Never the
    lean_matched reward timeout: every run is evaluated under the same budget."""
    prompts_per_batch: int = 4

    @property
    def attempts(self) -> int:
        """Samples per statement over all protocols and runs."""
        return sum(p.attempts * p.runs for p in self.protocols)


def evaluate_policy(
    model: Any,
    rollout: Any,
    render: Callable[[Statement], str],
    problems: Sequence[Statement],
    harness: RewardHarness,
    verifier: Any,
    evaluator: Any | None,
    config: EvaluationConfig,
    judge: Any | None = None,
) -> dict[str, Any]:
    """Generate, verify, and tabulate pass@k (Lean) per protocol, and the evaluator's estimate."""
    records: list[dict] = []
    tables: dict[str, dict[str, dict]] = {}
    judge_counts: Counter = Counter()
    for protocol in config.protocols:
        runs = [
            sample_run(
                model,
                rollout,
                render,
                problems,
                harness,
                verifier,
                evaluator,
                config,
                protocol,
                run,
                judge,
                judge_counts,
            )
            for run in range(protocol.runs)
        ]
        for run in runs:
            records += run
        tables[protocol.name] = mean_over_runs([pass_at_k_report(per_statement(run), protocol.ks) for run in runs])
    estimate: dict[str, list[int]] = {}
    for r in records:
        n_c = estimate.setdefault(r["name"], [0, 0])
        if r["category"] in (NO_PROGRAM, Category.PRECHECK_REJECTED.value):
            n_c[0] += 1  # deterministic failures count for the estimate too
        elif r["evaluator_verdict"] is not None:
            n_c[0] += 1
            n_c[1] += bool(r["evaluator_verdict"])
    ks = sorted({k for p in config.protocols for k in p.ks})
    evaluator_table = {str(k): mean_pass_at_k([(n, c) for n, c in estimate.values() if n >= k], k) for k in ks}
    results = per_statement(records)
    categories = Counter(r["category"] for r in records)
    return {
        "statements": len(results),
        "attempts": len(records),
        "categories": dict(categories),
        "verified": sum(r.verified for r in results),
        "lean_pass_at_k": tables,
        "evaluator_estimate_pass_at_k": evaluator_table if evaluator is not None else None,
        "judge": dict(judge_counts) if judge is not None else None,
        "per_statement": [r.__dict__ for r in results],
    }


def sample_run(
    model: Any,
    rollout: Any,
    render: Callable[[Statement], str],
    problems: Sequence[Statement],
    harness: RewardHarness,
    verifier: Any,
    evaluator: Any | None,
    config: EvaluationConfig,
    protocol: SamplingProtocol,
    run: int,
    judge: Any | None = None,
    judge_counts: Counter | None = None,
) -> list[dict]:
    """One run of a protocol: ``attempts`` samples per statement, each verified; one record each."""
    sampler = copy.copy(rollout)  # same tokenizer, stop tokens and engine; evaluation's sampling settings
    sampler.config = replace(
        rollout.config,
        temperature=protocol.temperature,
        top_p=config.top_p,
        min_new_tokens=0,
        max_new_tokens=config.max_new_tokens or rollout.config.max_new_tokens,
    )
    records: list[dict] = []
    for start in range(0, len(problems), config.prompts_per_batch):
        chunk = list(problems[start : start + config.prompts_per_batch])
        rollouts = sampler.generate(model, [render(p) for p in chunk], protocol.attempts)
        candidates = [harness.build(chunk[i // protocol.attempts], text) for i, text in enumerate(rollouts.texts)]
        ready = [c for c in candidates if c.stage is Stage.READY]
        outcomes = asyncio.run(verifier.check([c.request for c in ready])) if ready else []
        if judge is not None:
            accepted = [k for k, o in enumerate(outcomes) if o.category is Category.VALID]
            judged = judge.check_sync([ready[k].request for k in accepted]) if accepted else []
            for k, verdict in zip(accepted, judged):
                judge_counts[{True: "agreed", False: "disagreed", None: "undecided"}[verdict.label]] += 1
                outcomes[k] = verdict
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
            records.append(
                {
                    "name": c.problem.name,
                    "category": category,
                    "evaluator_verdict": verdict,
                    "protocol": protocol.name,
                    "run": run,
                }
            )
    return records


def mean_over_runs(tables: Sequence[dict[str, dict]]) -> dict[str, dict]:
    """Each k's numbers averaged over the runs (None where a run has none), with the per-run pass@k and
    its standard deviation across the runs (LLF Eq. 11, Table 7); counts from the first run."""
    out: dict[str, dict] = {}
    for k, first in tables[0].items():
        row = dict(first, runs=len(tables))
        for key in ("pass_at_k", "verified_only_pass_at_k", "upper_bound"):
            values = [t[k][key] for t in tables if t[k][key] is not None]
            row[key] = sum(values) / len(values) if values else None
        row["per_run"] = [t[k]["pass_at_k"] for t in tables]
        row["std_over_runs"] = repeat_summary(row["per_run"])["std"]
        out[k] = row
    return out
