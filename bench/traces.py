"""``python -m bench.traces``: annotation and metric throughput on the real recorded data."""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from leanloop.lean.replies import parse_response
from leanloop.metrics.bootstrap import bootstrap_samples, bootstrap_samples_loop
from leanloop.metrics.budget import budget_curve, build_pools
from leanloop.metrics.feedback import feedback_scores
from leanloop.metrics.verdicts import verdict_metrics
from leanloop.paths import shared_data_dir
from leanloop.tool import cli_entry, parse_config
from leanloop.traces.annotate import annotate
from leanloop.traces.parse import trace_verdict
from leanloop.traces.reference_pairs import iter_recorded, iter_rl_lean


@dataclass
class BenchConfig:
    smoke: bool = False
    """0.05 s per rate, 200 bootstrap resamples: checks the bench runs (seconds)."""


def rl_lean_predictions(shared: Path, with_traces: bool = True) -> list[dict[str, Any]]:
    """One prediction row per RL-Lean candidate (see the module docstring for score and trace).
    Candidates whose compilation had no answer (timeouts) get ``label: None`` and no reference."""
    rows: list[dict[str, Any]] = []
    for record in iter_rl_lean(shared / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"):
        response = parse_response(record.reply, record.program)
        answered = response.status.value == "ok"
        round_match = re.search(r"round(\d+)", record.extra["source"])
        rows.append(
            {
                "id": f"{record.name}#{record.index}",
                "group": record.extra["name"],
                "benchmark": "minif2f_test",
                # One candidate per problem per round: the nine rounds together form the pool of attempts.
                "run": "Expert_V2",
                "round": int(round_match.group(1)) if round_match else None,
                "label": bool(record.extra["verdict_pass"]) if answered else None,
                "program": record.program,
                "reference_trace": (
                    annotate(record.program, response.messages, response.tactics) if answered and with_traces else None
                ),
                "trace": record.program,
            }
        )
    # Score: the problem's pass rate in the earlier rounds, Laplace-smoothed (round 0 scores 0.5).
    history: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for row in rows:
        if row["label"] is not None and row["round"] is not None:
            history[row["group"]].append((row["round"], int(row["label"])))
    for row in rows:
        earlier = [
            label for round_, label in history[row["group"]] if row["round"] is not None and round_ < row["round"]
        ]
        row["score"] = (sum(earlier) + 1) / (len(earlier) + 2)
    return rows


def _rate(work: Callable[[], int], min_seconds: float = 1.0) -> tuple[float, int]:
    """Items per CPU second of ``work`` (which returns how many items it did), repeated for at least
    ``min_seconds``. CPU time, not wall time: the machine is shared and the work single-threaded."""
    done, start = 0, time.process_time()
    while True:
        done += work()
        elapsed = time.process_time() - start
        if elapsed >= min_seconds:
            return done / elapsed, done


def main(argv: list[str] | None = None) -> dict[str, float]:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.traces", description=__doc__.splitlines()[0])
    min_seconds = 0.05 if config.smoke else 1.0
    resamples, loop_resamples = (200, 10) if config.smoke else (5000, 250)
    shared = shared_data_dir()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"bench.traces on {cores} core(s); rates are per CPU second (single-threaded Python)")

    records = list(iter_recorded(shared))
    parsed = [(r, parse_response(r.reply, r.program)) for r in records]
    answered = [(r, p) for r, p in parsed if p.status.value == "ok"]
    by_source: dict[str, int] = defaultdict(int)
    for r, _ in answered:
        by_source[r.source] += 1
    print(
        f"recorded replies with feedback: {len(records)} ({len(answered)} with a Lean answer): "
        + ", ".join(f"{k} {v}" for k, v in by_source.items())
    )

    def annotate_all() -> int:
        for r, p in answered:
            annotate(r.program, p.messages, p.tactics)
        return len(answered)

    def parse_and_annotate_all() -> int:
        for r, _ in answered:
            p = parse_response(r.reply, r.program)
            annotate(r.program, p.messages, p.tactics)
        return len(answered)

    annotations, _ = _rate(annotate_all, min_seconds)
    raw_annotations, _ = _rate(parse_and_annotate_all, min_seconds)
    print(f"annotate (parsed replies):      {annotations:10.0f} annotations/s")
    print(
        f"parse + annotate (raw JSON):    {raw_annotations:10.0f} annotations/s  "
        f"(parsing costs {annotations / raw_annotations:.2f}x)"
    )

    traces = [annotate(r.program, p.messages, p.tactics) for r, p in answered]
    programs = [r.program for r, _ in answered]
    verdicts, _ = _rate(lambda: sum(1 for t in traces if trace_verdict(t) is not None), min_seconds)
    print(f"verdict rule:                   {verdicts:10.0f} traces/s")
    identical, _ = _rate(lambda: sum(1 for t in traces if feedback_scores(t, t)), min_seconds)
    baseline, _ = _rate(lambda: sum(1 for t, p in zip(traces, programs) if feedback_scores(t, p)), min_seconds)
    print(f"feedback metrics (trace vs itself):          {identical:10.0f} evaluations/s")
    print(f"feedback metrics (trace vs copy baseline):   {baseline:10.0f} evaluations/s")

    rows = [row for row in rl_lean_predictions(shared) if row["label"] is not None]
    labels = np.asarray([int(row["label"]) for row in rows])
    scores = np.asarray([row["score"] for row in rows])
    groups = [row["group"] for row in rows]
    metrics_rate, _ = _rate(lambda: int(bool(verdict_metrics(labels, scores))), min_seconds)
    summary = verdict_metrics(labels, scores)
    print(
        f"verdict metrics on {len(rows)} RL-Lean candidates ({len(set(groups))} problems; earlier-rounds "
        f"pass-rate evaluator: AUROC {summary['auroc']:.3f}, MCC {summary['mcc']:.3f}): "
        f"{metrics_rate:8.0f} evaluations/s"
    )

    start = time.process_time()
    bootstrap_samples(labels, groups, scores, n_resamples=resamples)
    vectorized = time.process_time() - start
    start = time.process_time()
    bootstrap_samples_loop(labels, groups, scores, n_resamples=loop_resamples)
    loop = (time.process_time() - start) / loop_resamples * resamples
    print(
        f"grouped bootstrap, {resamples:,} resamples (CPU time): vectorized {vectorized:.2f} s, per-resample loop "
        f"{loop:.1f} s (extrapolated from {loop_resamples}): {loop / vectorized:.1f}x faster"
    )

    start = time.process_time()
    curve = budget_curve(
        build_pools(
            labels, scores, groups, runs=[row["run"] for row in rows], benchmarks=[row["benchmark"] for row in rows]
        )
    )
    print(
        f"budget replay over {len(curve['k'])} budgets: {time.process_time() - start:.2f} s "
        f"(coverage at k=1: ranked {curve['ranked'][0]:.3f}, random {curve['random'][0]:.3f}, "
        f"oracle {curve['oracle'][0]:.3f})"
    )
    return {
        "annotations_per_s": annotations,
        "raw_annotations_per_s": raw_annotations,
        "parsing_cost": annotations / raw_annotations,
        "verdicts_per_s": verdicts,
        "feedback_identical_per_s": identical,
        "feedback_baseline_per_s": baseline,
        "verdict_metrics_per_s": metrics_rate,
        "auroc": float(summary["auroc"]),
        "bootstrap_speedup": loop / vectorized,
        "coverage_at_1_ranked": float(curve["ranked"][0]),
    }


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.traces"))
