"""The hybrid scheduler under a simulated clock (``make bench-rl``)."""

from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from leanloop.jsonl import read_jsonl


@dataclass(frozen=True)
class Check:
    duration: float  # recorded Lean time (inf: never finished)
    valid: bool | None  # recorded verdict (None: no verdict)


@dataclass
class PoolRun:
    scoring_s: float  # when the batch's rewards are all known
    finished: int  # checks that finished (verdict known) within their budget and before the cutoff
    timed_out: int
    cancelled: int
    valid_lost: int  # recorded-valid proofs that did not get Lean's verdict (timeout or cancelled)
    lean_share: float  # fraction of rewards decided by Lean

    def to_dict(self) -> dict:
        return asdict(self)


def recorded_checks(path: Path) -> list[Check]:
    """Every RL-Lean compilation result: its recorded verify_time and verdict."""
    out = []
    for row in read_jsonl(path):
        result = row["compilation_result"]
        if result.get("system_errors") or result.get("verify_time") is None:
            out.append(Check(math.inf, None))
        else:
            out.append(Check(float(result["verify_time"]), bool(row["verdict_pass"])))
    return out


def run_pool(checks: list[Check], workers: int, timeout: float, cutoff: float | None = None) -> PoolRun:
    """Simulate one batch through a pool of ``workers`` (see the module docstring)."""
    if workers < 1 or timeout <= 0:
        raise ValueError("need workers >= 1 and timeout > 0")
    free = [0.0] * workers  # when each worker is next free
    heapq.heapify(free)
    ends, done = [], []
    for check in checks:
        start = heapq.heappop(free)
        run = min(check.duration, timeout)
        end = start + run
        heapq.heappush(free, end)
        ends.append(end)
        done.append(check.duration <= timeout)
    makespan = max(ends) if ends else 0.0
    if cutoff is None or makespan <= cutoff:
        finished = sum(done)
        lost = sum(1 for c, d in zip(checks, done) if c.valid and not d)
        scoring = makespan if cutoff is None else max(makespan, cutoff)
        return PoolRun(scoring, finished, len(checks) - finished, 0, lost, finished / len(checks) if checks else 1.0)
    in_time = [d and e <= cutoff for d, e in zip(done, ends)]
    timed_out = sum(1 for d, e in zip(done, ends) if not d and e <= cutoff)
    cancelled = len(checks) - sum(in_time) - timed_out
    lost = sum(1 for c, ok in zip(checks, in_time) if c.valid and not ok)
    return PoolRun(cutoff, sum(in_time), timed_out, cancelled, lost, sum(in_time) / len(checks))


@dataclass
class Scenario:
    name: str
    evaluator_s: float  # L: the evaluator's latency for the whole batch
    other_s: float  # generation + update per step
    scale: float = 1.0  # multiplier on the recorded Lean times


def compare(
    checks: list[Check], batch: int, workers: int, timeout: float, scenario: Scenario, draws: int = 20, seed: int = 0
) -> dict:
    """Mean over ``draws`` batches (sampled with replacement) of each protocol's scoring and step time."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(draws):
        sample = [checks[i] for i in rng.integers(0, len(checks), size=batch)]
        samples.append([Check(c.duration * scenario.scale, c.valid) for c in sample])
    matched = matched_timeout(samples, workers, timeout, scenario.evaluator_s)
    rows: dict[str, list[PoolRun]] = {
        "lean": [run_pool(s, workers, timeout) for s in samples],
        "hybrid": [run_pool(s, workers, timeout, cutoff=scenario.evaluator_s) for s in samples],
        "lean_matched": [run_pool(s, workers, matched) for s in samples],
    }
    out = {
        "scenario": asdict(scenario),
        "batch": batch,
        "workers": workers,
        "timeout": timeout,
        "draws": draws,
        "matched_timeout": matched,
    }
    for protocol, runs in rows.items():
        scoring = float(np.mean([r.scoring_s for r in runs]))
        out[protocol] = {
            "scoring_s": scoring,
            "step_s": scenario.other_s + scoring,
            "lean_share": float(np.mean([r.lean_share for r in runs])),
            "timed_out": float(np.mean([r.timed_out for r in runs])),
            "cancelled": float(np.mean([r.cancelled for r in runs])),
            "valid_without_lean_verdict": float(np.mean([r.valid_lost for r in runs])),
        }
    lean = out["lean"]["step_s"]
    for protocol in ("hybrid", "lean_matched"):
        out[protocol]["step_reduction_vs_lean"] = 1 - out[protocol]["step_s"] / lean
    return out


def matched_timeout(samples: list[list[Check]], workers: int, timeout: float, cutoff: float) -> float:
    """The largest per-proof timeout (<= ``timeout``) at which lean-only scores the batches within
    ``cutoff`` on average (bisection; the makespan grows with the timeout)."""

    def scoring(t: float) -> float:
        return float(np.mean([run_pool(s, workers, t).scoring_s for s in samples]))

    if scoring(timeout) <= cutoff:
        return timeout
    lo, hi = 0.0, timeout
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid > 0 and scoring(mid) <= cutoff else (lo, mid)
    return lo


def scale_to(checks: list[Check], batch: int, workers: int, timeout: float, target_s: float, seed: int = 0) -> float:
    """The factor on the recorded times that makes lean-only batch scoring take ``target_s`` (bisection)."""
    lo, hi = 0.01, 1000.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        got = compare(checks, batch, workers, timeout, Scenario("fit", 1.0, 0.0, mid), draws=5, seed=seed)["lean"][
            "scoring_s"
        ]
        lo, hi = (mid, hi) if got < target_s else (lo, mid)
    return math.sqrt(lo * hi)
