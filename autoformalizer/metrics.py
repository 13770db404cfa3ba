"""The autoformalizer's nine metrics, and a report with the compile@k curve and the error breakdown.

compile@k and pass@N are shares of all statements (the seed's Section 7.3): an item without a verdict
(no recording, timeout, backend failure) is not a pass and stays in the denominator, and how many
there were is counted and named in the report; a metric with no answered item at all is ``None`` with
the reason, never a guess.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from autoformalizer.statements import faithfulness, well_formed

KS = (1, 2, 3, 4, 5)
VERDICT = {"passed": True, "failed": False, "malformed": False}  # anything else: no verdict
ERROR_CATEGORIES = ("unknown_ident", "syntax", "typeclass", "type_mismatch", "other")
# Why an unsolved problem ended unsolved: its last attempt's first error (the seed's five categories,
# "(unknown_ident, syntax, typeclass, type_mismatch, other)"), or, reported apart, no Lean error at
# all: never reached Lean (malformed), refused by the prechecks (rejected), no verdict (a timeout,
# an unavailable or failed backend).
FAILURES_APART = ("malformed", "rejected", "no_verdict")
FAILURE_MODES = (*ERROR_CATEGORIES, *FAILURES_APART)
_NO_VERDICT = ("unavailable", "timeout", "infra_error", "input_error")

# First matching rule wins; patterns are Lean's own wordings across v4.9 .. v4.33 (see the tests,
# which classify the shipped RL-Lean, Kimina and REPL messages).
_ERROR_RULES: list[tuple[str, re.Pattern]] = [
    (
        "unknown_ident",
        re.compile(
            r"(?i)^unknown (identifier|constant|declaration|namespace)\b|the environment does not contain|"
            r"^unknown (free variable|universe level)"
        ),
    ),
    (
        "syntax",
        re.compile(
            r"(?i)^unexpected (token|identifier|end of input)|^expected (token|term|command|identifier|'|`)|"
            r"^unterminated |^unknown tactic|^missing end of|^unknown command"
        ),
    ),
    ("typeclass", re.compile(r"(?i)^failed to synthesize|typeclass instance problem is stuck")),
    (
        "type_mismatch",
        re.compile(
            r"(?i)^(application )?type mismatch|^function expected|^type expected|but is expected to have type|"
            r"^invalid field notation|^invalid projection|^(cannot|failed to) coerce|^\S+ has type"
        ),
    ),
]


def classify_error(message: str) -> str:
    text = message.strip()
    for category, pattern in _ERROR_RULES:
        if pattern.search(text) or pattern.search(text.split("\n", 1)[0]):
            return category
    return "other"


def error_breakdown(messages: Iterable[Any]) -> dict[str, int]:
    """Counts of error messages per category (``LeanMessage`` objects, dicts or strings; only
    errors are counted when a severity is given)."""
    counts = dict.fromkeys(ERROR_CATEGORIES, 0)
    for m in messages:
        if isinstance(m, str):
            text = m
        elif isinstance(m, dict):
            if m.get("severity", "error") != "error":
                continue
            text = m.get("data", "")
        else:
            if getattr(m, "severity", "error") != "error":
                continue
            text = m.data
        counts[classify_error(text)] += 1
    return counts


def failure_modes(last_attempts: Iterable[Any]) -> dict[str, int]:
    """One failure mode per unsolved problem (the design's error breakdown): the category of the first
    error of its last attempt's check, ``malformed`` when that attempt never reached Lean (None),
    ``no_verdict`` when Lean gave none (timeout, unavailable), ``rejected`` when the prechecks
    refused it (no Lean error). Pass only unsolved problems' last checks (``StatementCheck`` or None)."""
    counts = dict.fromkeys(FAILURE_MODES, 0)
    for check in last_attempts:
        if check is None:
            counts["malformed"] += 1
            continue
        if getattr(check.status, "value", check.status) in _NO_VERDICT:
            counts["no_verdict"] += 1
            continue
        first = next((m for m in check.messages if getattr(m, "severity", "error") == "error"), None)
        counts[classify_error(first.data) if first is not None else "rejected"] += 1
    return counts


def well_formed_rate(statements: Sequence[str]) -> float | None:
    if not statements:
        return None
    return float(np.mean([well_formed(s).ok for s in statements]))


@dataclass
class CompileAtK:
    values: dict[int, float | None]
    problems: int
    undetermined: dict[int, int]  # problems with no verdict within the first k attempts


def compile_at_k(attempt_statuses: Sequence[Sequence[str]], ks: Sequence[int] = KS) -> CompileAtK:
    """Share of all problems with a statement that type-checks within the first k attempts (repair
    turns), k = 1..5 (the seed's "percentage of statements successfully type-checking ... within (k)
    feedback attempts", Section 7.3): an attempt Lean did not answer (timeout, no recording) is not a
    pass, so its problem stays in the denominator, and the count of such problems is kept beside the
    value. None only when no problem has a verdict within its first k attempts (nothing was measured)."""
    values, undetermined = {}, {}
    for k in ks:
        passed = determined = 0
        for statuses in attempt_statuses:
            first = list(statuses[:k])
            if "passed" in first:
                passed += 1
                determined += 1
            elif all(s in VERDICT for s in first) and (len(first) == k or len(first) == len(statuses)):
                determined += 1  # a loop that stopped early without a pass counts as failed
        undetermined[k] = len(attempt_statuses) - determined
        values[k] = passed / len(attempt_statuses) if determined else None
    return CompileAtK(values, len(attempt_statuses), undetermined)


def pass_at_n(samples: Sequence[Sequence[bool | None]], n: int) -> tuple[float | None, int]:
    """Unbiased pass@n (Chen et al. 2021) averaged over all problems, from each problem's sampled
    verdicts: a sample Lean gave no verdict (None) is not a pass, so it counts as a failed sample and
    its problem stays in the denominator. Returns (value, problems used); a problem with fewer than n
    samples cannot be estimated and is refused (ValueError). None when no sample has a verdict."""
    from leanloop.prover.passk import pass_at_k

    short = sum(len(s) < n for s in samples)
    if short:
        raise ValueError(f"pass@{n}: {short} problem(s) have fewer than {n} sampled statements")
    if not samples or all(v is None for s in samples for v in s):
        return None, 0
    return float(np.mean([pass_at_k(len(s), sum(bool(v) for v in s), n) for s in samples])), len(samples)


def mean_iters_solved(iterations: Sequence[int], solved: Sequence[bool | None]) -> float | None:
    """Mean number of repair turns among solved problems."""
    used = [i for i, s in zip(iterations, solved) if s]
    return float(np.mean(used)) if used else None


def faithfulness_code(candidates: Sequence[str], references: Sequence[str]) -> float | None:
    """Mean SequenceMatcher faithfulness of candidate statements to their references."""
    if not candidates:
        return None
    return float(np.mean([faithfulness(c, r) for c, r in zip(candidates, references)]))


def normalize_goal(goal: str) -> str:
    return " ".join(goal.split())


def goal_exact_match(
    candidate_goals: Sequence[str | None], reference_goals: Sequence[str | None]
) -> tuple[float | None, int]:
    """Share of elaborated candidate goals equal to the reference goal (whitespace-normalised), over
    pairs where Lean reported the candidate's goal. Returns (value, pairs used)."""
    pairs = [(c, r) for c, r in zip(candidate_goals, reference_goals) if c is not None and r is not None]
    if not pairs:
        return None, 0
    return float(np.mean([normalize_goal(c) == normalize_goal(r) for c, r in pairs])), len(pairs)


def tokens_per_sec(tokens: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"tokens_per_sec needs a positive duration, got {seconds}")
    return tokens / seconds


class ResourceMonitor:
    """Peak memory and utilisation over a block: GPU (torch.cuda) when present, else this process's
    RSS and CPU use, sampled by a background thread.

        with ResourceMonitor() as mon: ...
        mon.result -> {"device", "peak_memory_bytes", "utilization", "wall_s"}
    """

    def __init__(self, interval_s: float = 0.05):
        self.interval_s = interval_s
        self.result: dict[str, Any] = {}

    def __enter__(self) -> "ResourceMonitor":
        import psutil
        import torch

        self._gpu = torch.cuda.is_available()
        self._proc = psutil.Process(os.getpid())
        self._peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        if self._gpu:
            torch.cuda.reset_peak_memory_stats()
            self._gpu_util: list[float] = []
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._t0, self._cpu0 = time.perf_counter(), self._proc.cpu_times()
        self._thread.start()
        return self

    def _sample(self) -> None:
        import torch

        while not self._stop.wait(self.interval_s):
            self._peak = max(self._peak, self._proc.memory_info().rss)
            if self._gpu:
                try:
                    self._gpu_util.append(float(torch.cuda.utilization()))
                except Exception:  # pynvml missing: utilisation unknown, memory still measured
                    pass

    def __exit__(self, *exc: object) -> None:
        import torch

        self._stop.set()
        self._thread.join()
        wall = time.perf_counter() - self._t0
        cpu1 = self._proc.cpu_times()
        cpu = (cpu1.user - self._cpu0.user) + (cpu1.system - self._cpu0.system)
        self._peak = max(self._peak, self._proc.memory_info().rss)
        if self._gpu:
            util = float(np.mean(self._gpu_util)) / 100 if self._gpu_util else None
            self.result = {
                "device": torch.cuda.get_device_name(),
                "peak_memory_bytes": torch.cuda.max_memory_allocated(),
                "utilization": util,
                "wall_s": wall,
                "host_peak_rss_bytes": self._peak,
            }
        else:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            self.result = {
                "device": f"cpu ({cores} cores)",
                "peak_memory_bytes": self._peak,
                "utilization": cpu / (wall * cores) if wall > 0 else None,
                "wall_s": wall,
            }


# ------------------------------------------------------------------------------ report


@dataclass
class AutoformalizerReport:
    """The nine metrics of one evaluation; a metric is None when it could not be computed, with the
    reason in ``missing``."""

    well_formed: float | None = None
    compile_at_k: dict[int, float | None] = field(default_factory=dict)
    pass_at_n: dict[int, float | None] = field(default_factory=dict)
    """Unbiased first-turn pass@n over sampled statements."""
    pass_at_cap: float | None = None
    """pass@N as the design counts it: terminal success within the iteration cap (N repair turns)."""
    mean_iters_solved: float | None = None
    faithfulness_code: float | None = None
    goal_exact_match: float | None = None
    error_breakdown: dict[str, int] = field(default_factory=dict)
    """The design's error breakdown: unsolved problems whose last attempt Lean rejected, by the
    category of its first error (the five ERROR_CATEGORIES; :func:`failure_modes`)."""
    failures_apart: dict[str, int] = field(default_factory=dict)
    """Unsolved problems with no Lean error to classify (FAILURES_APART), reported beside it."""
    tokens_per_sec: float | None = None
    """Generated tokens per second of generation, Lean's checking time excluded."""
    resources: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _plot_compile_at_k(values: dict[int, float | None], path: Path) -> bool:
    points = [(k, v) for k, v in sorted(values.items()) if v is not None]
    if not points:
        return False
    from leanloop.plots import pyplot, save

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot([k for k, _ in points], [v for _, v in points], marker="o")
    ax.set_xlabel("repair turns k")
    ax.set_ylabel("compile@k")
    ax.set_ylim(0, 1)
    ax.set_xticks([k for k, _ in points])
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, path, dpi=120)
    return True


def _plot_error_breakdown(counts: dict[str, int], path: Path) -> bool:
    if not counts or sum(counts.values()) == 0:
        return False
    from leanloop.plots import pyplot, save

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.2))
    names = list(ERROR_CATEGORIES)
    ax.bar(names, [counts.get(n, 0) for n in names], color="tab:red")
    ax.set_ylabel("unsolved problems")
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    save(fig, path, dpi=120)
    return True


def write_report(report: AutoformalizerReport, out_dir: str | Path) -> Path:
    """``report.md``, ``metrics.json``, ``compile_at_k.png`` and ``error_breakdown.png``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")

    def fmt(value: Any) -> str:
        return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = ["# Autoformalizer evaluation", ""]
    lines += ["| metric | value |", "|---|---|", f"| well_formed | {fmt(report.well_formed)} |"]
    lines += [f"| compile@{k} | {fmt(v)} |" for k, v in sorted(report.compile_at_k.items())]
    cap = report.counts.get("iteration_cap", "N")
    lines += [f"| pass@{cap} at the iteration cap (terminal success) | {fmt(report.pass_at_cap)} |"]
    lines += [f"| pass@{n} (unbiased, first turn) | {fmt(v)} |" for n, v in sorted(report.pass_at_n.items())]
    lines += [
        f"| mean_iters_solved | {fmt(report.mean_iters_solved)} |",
        f"| faithfulness_code | {fmt(report.faithfulness_code)} |",
        f"| goal_exact_match | {fmt(report.goal_exact_match)} |",
        f"| tokens_per_sec (Lean time excluded) | {fmt(report.tokens_per_sec)} |",
    ]
    if report.resources:
        peak = report.resources.get("peak_memory_bytes")
        lines.append(
            f"| peak memory ({report.resources.get('device')}) | "
            f"{'n/a' if peak is None else f'{peak / 2**20:.1f} MiB'} |"
        )
        lines.append(f"| utilization | {fmt(report.resources.get('utilization'))} |")
    lines += [
        "",
        "## Error breakdown (failure modes of the unsolved problems: last attempt's first error)",
        "",
        "| failure mode | unsolved problems |",
        "|---|---|",
    ]
    lines += [f"| {c} | {report.error_breakdown.get(c, 0)} |" for c in ERROR_CATEGORIES]
    lines += [f"| *apart:* {c} | {report.failures_apart.get(c, 0)} |" for c in FAILURES_APART]
    if report.counts:
        lines += ["", "## Counts", ""] + [f"- {k}: {v}" for k, v in report.counts.items()]
    if report.missing:
        lines += ["", "## Not computed", ""] + [f"- **{k}**: {v}" for k, v in report.missing.items()]
    if _plot_compile_at_k(report.compile_at_k, out / "compile_at_k.png"):
        lines += ["", "![compile@k](compile_at_k.png)"]
    if _plot_error_breakdown(report.error_breakdown, out / "error_breakdown.png"):
        lines += ["", "![error breakdown](error_breakdown.png)"]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
