"""Audits of the RL reward: what the step's time limit cost, and whether the judge agrees."""

from __future__ import annotations

import hashlib
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from leanloop.lean.judge import ComparatorJudge, JudgeConfig
from leanloop.lean.types import Category, Outcome, VerifyRequest
from leanloop.lean.verifier import Verifier
from rl.reward_harness import Candidate
from rl.hybrid import StepScores
from rl.reward import CANCELLED


@dataclass
class JudgeAuditConfig:
    enabled: bool = False
    """Re-check accepted rewards with the judge (needs comparator, landrun and lean4export:
    leanloop/lean/README.md "The judge")."""
    share: float = 1.0
    """``async``: fraction of accepted rewards re-checked (chosen by a hash of the program, so
    reproducible). ``gate`` judges every reward it pays."""
    sources: list[str] = field(default_factory=lambda: ["lean", "evaluator"])
    """Reward sources whose 1.0 is re-checked: ``lean`` (the REPL fast path), ``evaluator`` (paid at
    the hybrid cutoff; an exploit that fools the evaluator is as much an exploit). ``async`` only."""
    mode: Literal["async", "gate"] = "async"
    """``async``: judged after the reward is paid, credit held back until the judge agrees;
    ``gate``: the reward waits for the judge (see the module docstring)."""
    gate_deadline_s: float | None = None
    """gate: seconds the step waits for the judge's verdicts (None: ``judge.timeout``)."""
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    drain_timeout: float = 3600.0
    """At the end of training, wait at most this long for the checks still running."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"judge audit share must be in [0, 1], got {self.share}")
        if self.mode not in ("async", "gate"):
            raise ValueError(f"judge audit mode must be async or gate, got {self.mode!r}")
        if self.mode == "gate" and not self.enabled:
            raise ValueError("audit.judge.mode: gate needs audit.judge.enabled: true (the gate waits for the judge)")
        unknown = sorted(set(self.sources) - {"lean", "evaluator"})
        if unknown:
            raise ValueError(f"judge audit sources must be among lean, evaluator; got {unknown}")


@dataclass
class AuditConfig:
    enabled: bool = True
    timeout: float = 300.0
    """Per-proof budget of the recheck (seconds of Lean time; LLF App. E: 600)."""
    max_items: int | None = 64
    """Recheck at most this many proofs per step (the first ones in batch order); None: every one
    (LLF rechecks every timeout)."""
    judge: JudgeAuditConfig = field(default_factory=JudgeAuditConfig)
    """The judge's asynchronous re-check of accepted rewards."""


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
        keys = (
            "unfinished",
            "rechecked",
            "resolved",
            "valid",
            "evaluator_accepted",
            "evaluator_accepted_valid",
            "evaluator_accepted_invalid",
            "evaluator_rejected_valid",
        )
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


@dataclass
class JudgeItem:
    """One accepted reward sent to the judge."""

    step: int
    name: str  # the problem (curriculum / replay buffer key)
    completion: str
    request: VerifyRequest
    source: str  # the reward's source (lean / evaluator)
    # what the proof earns once the judge agrees (async: held back until then): its replay-buffer
    # entry (an rl.curriculum.StoredProof) and one curriculum success
    proof: Any = None
    credited: bool = False  # its success already counted (only then can a rejection revoke it)


@dataclass
class JudgeResult:
    item: JudgeItem
    outcome: Outcome

    @property
    def timed_out(self) -> bool:
        return self.outcome.category is Category.TIMEOUT

    @property
    def agreed(self) -> bool | None:
        """True: the judge accepts too; False: it rejects what was paid 1, or timed out on it
        (whatever paid it: a candidate can spin until the judge gives up); None: no verdict."""
        if self.timed_out:
            return False
        label = self.outcome.label
        return None if label is None else bool(label)

    def to_dict(self) -> dict:
        return {
            "step": self.item.step,
            "name": self.item.name,
            "source": self.item.source,
            "judge": self.outcome.category.value,
            "agreed": self.agreed,
            "timed_out": self.timed_out,
            "reasons": list(self.outcome.reasons),
            "completion": self.item.completion if self.agreed is False else None,
        }


class JudgeAudit:
    """Background re-checks of accepted rewards (see the module docstring)."""

    def __init__(self, judge: ComparatorJudge, config: JudgeAuditConfig | None = None):
        self.judge = judge
        self.config = config or JudgeAuditConfig()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-audit")
        self._pending: list[tuple[list[JudgeItem], Future]] = []
        self._lock = threading.Lock()
        self.submitted = self.agreed = self.disagreed = self.undecided = self.timeouts = 0
        self.gated = self.gate_withheld = 0
        self.gate_s = 0.0

    def selected(self, program: str) -> bool:
        if self.config.share >= 1.0:
            return True
        draw = int(hashlib.sha256(program.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
        return draw < self.config.share

    def wanted(self, items: list[JudgeItem]) -> list[JudgeItem]:
        """The items the configured sources and share send to the judge; under ``gate`` every item
        (a reward the gate pays unjudged would be the gap the gate exists to close)."""
        if self.config.mode == "gate":
            return list(items)
        return [i for i in items if i.source in self.config.sources and self.selected(i.request.program)]

    def submit(self, items: list[JudgeItem]) -> int:
        """Queue the selected items; returns how many were queued. Never blocks training."""
        items = self.wanted(items)
        if items:
            future = self._pool.submit(self.judge.check_sync, [i.request for i in items])
            with self._lock:
                self._pending.append((items, future))
            self.submitted += len(items)
        return len(items)

    def collect(self, wait: bool = False, timeout: float | None = None) -> list[JudgeResult]:
        """Results of the finished checks (``wait``: of all of them, up to ``timeout`` seconds)."""
        with self._lock:
            pending = list(self._pending)
        if wait and pending:
            wait_futures([f for _, f in pending], timeout=timeout)
        results: list[JudgeResult] = []
        still = []
        for items, future in pending:
            if not future.done():
                still.append((items, future))
                continue
            try:
                outcomes = future.result()
            except Exception as error:  # a judge bug must not stop training: the items stay undecided
                outcomes = [
                    Outcome(Category.INFRA_ERROR, reasons=[f"infra_failure: judge raised {error!r}"]) for _ in items
                ]
            results += [JudgeResult(i, o) for i, o in zip(items, outcomes)]
        with self._lock:
            self._pending = [p for p in self._pending if p in still]
        self._count(results)
        return results

    def _count(self, results: list[JudgeResult]) -> None:
        for result in results:
            agreed = result.agreed
            self.agreed += agreed is True
            self.disagreed += agreed is False
            self.undecided += agreed is None
            self.timeouts += result.timed_out
            if agreed is False:
                why = (
                    "the judge timed out on it (a fast-path-valid candidate the judge cannot decide counts as a "
                    "disagreement)"
                    if result.timed_out
                    else f"the judge rejects it: {'; '.join(result.outcome.reasons)[:300]}"
                )
                print(
                    f"[rl] JUDGE ALARM: step {result.item.step} paid 1.0 ({result.item.source}) for "
                    f"{result.item.name} but {why}",
                    file=sys.stderr,
                )

    def gate(self, items: list[JudgeItem]) -> list[JudgeResult]:
        """``gate`` mode: judge ``items`` now, waiting at most the step's deadline; a verdict not in
        by then is a TIMEOUT (treated as the fast path timing out). One result per item, in order."""
        import asyncio
        import time

        deadline = self.config.gate_deadline_s or self.judge.config.timeout
        began = time.perf_counter()

        async def run() -> list[Outcome]:
            slots = asyncio.Semaphore(max(1, self.judge.config.concurrency))

            async def one(request: VerifyRequest) -> Outcome:
                async with slots:
                    return await self.judge.check_one(request)

            tasks = [asyncio.ensure_future(one(i.request)) for i in items]
            await asyncio.wait(tasks, timeout=deadline)
            late = Outcome(
                Category.TIMEOUT,
                reasons=[f"lean_timeout: the judge gave no verdict within the step's {deadline:g} s gate deadline"],
            )
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return [t.result() if t.done() and not t.cancelled() and t.exception() is None else late for t in tasks]

        if not items:
            return []
        try:
            outcomes = asyncio.run(run())
        except Exception as error:  # a judge bug is no verdict: the gate pays nothing for it
            outcomes = [
                Outcome(Category.INFRA_ERROR, reasons=[f"infra_failure: judge raised {error!r}"]) for _ in items
            ]
        self.gate_s += time.perf_counter() - began
        results = [JudgeResult(i, o) for i, o in zip(items, outcomes)]
        self.submitted += len(items)
        self.gated += len(items)
        self.gate_withheld += sum(r.agreed is not True for r in results)
        self._count(results)
        return results

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(len(items) for items, _ in self._pending)

    @property
    def agreement_rate(self) -> float | None:
        decided = self.agreed + self.disagreed
        return self.agreed / decided if decided else None

    def summary(self) -> dict:
        return {
            "mode": self.config.mode,
            "submitted": self.submitted,
            "agreed": self.agreed,
            "disagreed": self.disagreed,
            "undecided": self.undecided,
            "timeouts": self.timeouts,
            "pending": self.pending,
            "agreement_rate": self.agreement_rate,
            "gate_withheld": self.gate_withheld,
            "gate_s": round(self.gate_s, 3),
        }

    def metrics(self) -> dict[str, float]:
        out = {f"judge/{k}": float(v) for k, v in self.summary().items() if v is not None and not isinstance(v, str)}
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def credit_agreed(results: list[JudgeResult], replay, curriculum, step: int) -> int:
    """Hand a proof the judge agreed with what it was held back (``async``): its replay-buffer entry
    and its curriculum success. Returns how many were credited."""
    credited = 0
    for result in results:
        item = result.item
        if result.agreed is True and not item.credited:
            if item.proof is not None:
                replay.add(item.name, item.proof)
            curriculum.credit(item.name, step)
            item.credited = True
            credited += 1
    return credited


def revoke_rejected(results: list[JudgeResult], replay, curriculum, step: int) -> int:
    """Take back what a rejected proof earned: its place in the replay buffer
    (``rl.curriculum.ReplayBuffer``) and its success in the curriculum, if it was counted. Returns
    how many were revoked."""
    revoked = 0
    for result in results:
        if result.agreed is False and result.item.credited:
            replay.remove(result.item.name, result.item.completion)
            curriculum.revoke(result.item.name, step, f"the judge rejected a proof paid at step {result.item.step}")
            revoked += 1
    return revoked


class InfraBreakerTripped(RuntimeError):
    """A step's Lean checks failed on the infrastructure too often to keep training."""


def check_infra_share(step: int, scores: StepScores, limit: float | None) -> float:
    """The step's ``infra_error`` share among its Lean checks; raises InfraBreakerTripped above
    ``limit`` (the rl stage's circuit breaker, ``reward_checks.max_infra_error_share``)."""
    started = scores.lean_started
    if not started:
        return 0.0
    failed = sum(r.lean == Category.INFRA_ERROR.value for r in scores.rewards)
    share = failed / started
    if limit is not None and share > limit:
        examples = [
            r.outcome.reasons[0] if r.outcome is not None and r.outcome.reasons else ""
            for r in scores.rewards
            if r.lean == Category.INFRA_ERROR.value
        ][:2]
        raise InfraBreakerTripped(
            f"step {step}: {failed} of {started} Lean checks ended infra_error ({share:.0%} > "
            f"reward_checks.max_infra_error_share={limit:g}); stopping instead of training on rewards of None. "
            f"Check the Lean backend (toolchain, header pickle, sandbox); first reasons: {examples}"
        )
    return share
