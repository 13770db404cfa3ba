"""Step labels from Lean (LeanPRM steps 2-3)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol, Sequence

from leanloop.lean.session import LeanSession, Reply, by_sorry
from leanloop.lean.types import Category, LeanBackend, Outcome, ResponseStatus, VerifyRequest
from prm.paired import PairedStep, assemble_program
from prm.review import CorrespondenceJudge, Failure, Reviewer
from prm.steps import TacticStep, first_failing_step

OK, TIMEOUT, INFRA_ERROR, UNAVAILABLE = "ok", "timeout", "infra_error", "unavailable"


@dataclass
class StepLabel:
    prose: str
    tactic: str
    label: bool | None  # None: no label (no answer from Lean, reviewer drop, correspondence reject)
    reason: str


@dataclass
class CheckResult:
    """What Lean said about the tactics in order."""

    status: str  # ok / timeout / infra_error / unavailable, or another backend status (candidate_failure)
    first_failure: int | None = None  # index of the first step that does not compile
    output: str = ""  # the first failure's compiler output (or why there is no answer)
    goals_left: bool = False  # every tactic compiled but goals remain
    checked: int = 0  # how many steps Lean was asked about
    lean_version: str | None = None


def propagate(count: int, first_failure: int | None, failure_reason: str) -> list[tuple[bool, str]]:
    """(label, reason) per step: correct before the first failure, incorrect from it on."""
    out: list[tuple[bool, str]] = []
    for i in range(count):
        if first_failure is None or i < first_failure:
            out.append((True, "compiles"))
        elif i == first_failure:
            out.append((False, f"first failure: {failure_reason}"))
        else:
            out.append((False, f"after the first failure (step {first_failure + 1})"))
    return out


def _first_line(text: str, limit: int = 160) -> str:
    return (text.strip().split("\n")[0] if text.strip() else "")[:limit]


def labels_from_outcome(
    steps: Sequence[TacticStep], outcome: Outcome
) -> tuple[list[StepLabel], bool | None, int | None, str]:
    """Labels of a recorded whole program's steps from its Verifier outcome:
    (step labels, proof label, first failing step, why)."""
    if outcome.category is Category.VALID:
        return [StepLabel(s.prose, s.tactic, True, "compiles") for s in steps], True, None, "accepted"
    errors = [m for m in outcome.messages if m.severity == "error"]
    if outcome.category in (Category.INVALID, Category.PRECHECK_REJECTED) and errors:
        index, error = first_failing_step(list(steps), errors)
        if index is None:  # neither in a step nor on the proof's `by`: no step is to blame
            where = f"line {error.pos.line}" if error.pos else "no position"
            why = f"error outside every step ({where}): {_first_line(error.data)}"
            return [StepLabel(s.prose, s.tactic, None, f"no label: {why}") for s in steps], False, None, why
        labels = propagate(len(steps), index, _first_line(error.data))
        return (
            [StepLabel(s.prose, s.tactic, l, r) for s, (l, r) in zip(steps, labels)],
            False,
            index,
            f"first error at line {error.pos.line if error.pos else '?'}",
        )
    why = (
        outcome.category.value + (": " + "; ".join(outcome.reasons[:2]) if outcome.reasons else "")
        if outcome.category is not Category.INVALID
        else "rejected with no located error"
    )
    return [StepLabel(s.prose, s.tactic, None, f"no label: {why}") for s in steps], outcome.label, None, why


# -- checking generated proofs ---------------------------------------------------------------------


class StepChecker(Protocol):
    name: str

    def check(self, header: str, statement: str, tactics: Sequence[str]) -> CheckResult: ...


class IncrementalChecker:
    """Tactic by tactic through the REPL's proof states (lean-interact ``Command`` + ``ProofStep``).

    ``session``: a :class:`leanloop.lean.session.LeanSession` (``LeanSession(backend.config,
    backend.repl_config)``: the local backend's set-up, stand-in REPL included); its header cache,
    restart generations and reply classification are the ones the Verifier's pool and search use.
    ``timeout``: per request (default: the session's)."""

    name = "incremental"

    def __init__(self, session: LeanSession, timeout: float | None = None):
        self.session = session
        self.timeout = timeout

    def close(self) -> None:
        self.session.close()

    def check(self, header: str, statement: str, tactics: Sequence[str]) -> CheckResult:
        result = self._check(header, statement, tactics)
        result.lean_version = self.session.lean_version
        return result

    @staticmethod
    def _no_answer(reply: Reply) -> CheckResult:
        # the header and statement are trusted: a REPL dying on them is the infrastructure's
        status = reply.status if reply.status is not ResponseStatus.CANDIDATE_FAILURE else ResponseStatus.INFRA_ERROR
        return CheckResult(status.value, output=reply.detail)

    def _check(self, header: str, statement: str, tactics: Sequence[str]) -> CheckResult:
        reply = self.session.command(by_sorry(statement), header=header if header.strip() else "", timeout=self.timeout)
        if not reply.ok:
            return self._no_answer(reply)
        errors = reply.errors()
        if reply.header_failed:
            return CheckResult(
                INFRA_ERROR,
                output="the trusted header does not elaborate: " + "; ".join(_first_line(e) for e in errors),
            )
        if errors or len(reply.answer.sorries) != 1:
            return CheckResult(
                INFRA_ERROR,
                output="the trusted statement does not elaborate to one goal: "
                + "; ".join(_first_line(e) for e in errors),
            )
        state, generation = reply.answer.sorries[0].proof_state, reply.generation
        goals: list[str] = []
        for index, tactic in enumerate(tactics):
            reply = self.session.step(state, generation, tactic, self.timeout)
            if not reply.ok:  # timeout, crash, refusal, a restart under the proof state: no answer, never a label
                return CheckResult(reply.status.value, output=reply.detail)
            # error messages, a "Lean error" refusal (e.g. Lean could not parse the tactic), a proof
            # status "Error..." (e.g. the kernel rejects the term)
            errors = reply.errors()
            if errors:
                return CheckResult(OK, index, "\n".join(errors), checked=index + 1)
            state, generation, goals = reply.answer.proof_state, reply.generation, list(reply.answer.goals)
        if goals:
            return CheckResult(
                OK, len(tactics) - 1, "unsolved goals\n" + "\n\n".join(goals), goals_left=True, checked=len(tactics)
            )
        return CheckResult(OK, None, checked=len(tactics))


class PrefixChecker:
    """Prefix compilation through any backend: the first k tactics then ``sorry``, k = 1, 2, ...
    until one fails; only errors before the ``sorry`` line count. When every prefix compiles, the
    whole program says whether goals are left."""

    name = "prefix"

    def __init__(self, backend: LeanBackend, timeout: float = 60.0):
        self.backend = backend
        self.timeout = timeout

    def _ask(self, program: str):
        response = asyncio.run(self.backend.run(program, self.timeout))
        self._version = response.lean_version or getattr(self, "_version", None)
        return response

    def check(self, header: str, statement: str, tactics: Sequence[str]) -> CheckResult:
        self._version = None
        result = self._check(header, statement, tactics)
        result.lean_version = self._version
        return result

    def _check(self, header: str, statement: str, tactics: Sequence[str]) -> CheckResult:
        first_tactic_line = assemble_program(header, statement, []).count("\n") + 2
        for k in range(1, len(tactics) + 1):
            program = assemble_program(header, statement, [*tactics[:k], "sorry"])
            sorry_line = program.count("\n") + 1
            response = self._ask(program)
            if response.status is not ResponseStatus.OK:
                return CheckResult(response.status.value, output=response.detail, checked=k)
            trusted, before = split_prefix_errors(response.errors, first_tactic_line, sorry_line)
            if trusted:  # no step is to blame (the incremental checker answers the same)
                return CheckResult(
                    INFRA_ERROR,
                    output="the trusted statement does not elaborate: "
                    + "; ".join(_first_line(m.data) for m in trusted),
                    checked=k,
                )
            if before:
                return CheckResult(OK, k - 1, "\n".join(m.data for m in before), checked=k)
        # every prefix compiles: the whole program says whether goals are left at the end
        whole = self._ask(assemble_program(header, statement, tactics))
        if whole.status is not ResponseStatus.OK:
            return CheckResult(whole.status.value, output=whole.detail, checked=len(tactics))
        if whole.errors:
            return CheckResult(
                OK, len(tactics) - 1, "\n".join(m.data for m in whole.errors), goals_left=True, checked=len(tactics)
            )
        return CheckResult(OK, None, checked=len(tactics))


def split_prefix_errors(errors: Sequence[Any], first_tactic_line: int, sorry_line: int) -> tuple[list, list]:
    """A prefix program's errors: (in the trusted header or statement, or with no position;
    in the tactics before the closing ``sorry``). Errors on the ``sorry`` line and after are neither."""
    trusted = [m for m in errors if m.pos is None or m.pos.line < first_tactic_line]
    steps = [m for m in errors if m.pos is not None and first_tactic_line <= m.pos.line < sorry_line]
    return trusted, steps


# -- one paired proof, end to end ------------------------------------------------------------------


@dataclass
class ProofLabels:
    steps: list[StepLabel]
    proof_label: bool | None
    first_error: int | None
    status: str
    reason: str
    reviewer: list[dict[str, Any]] = field(default_factory=list)
    correspondence_rejected: int = 0
    repaired: bool = False
    lean_version: str | None = None


def _labelled(steps: Sequence[PairedStep], result: CheckResult) -> list[StepLabel]:
    reason = ("unsolved goals at the end" if result.goals_left else _first_line(result.output)) or "does not compile"
    return [
        StepLabel(s.prose, s.tactic, l, r)
        for s, (l, r) in zip(steps, propagate(len(steps), result.first_failure, reason))
    ]


def label_paired_proof(
    steps: Sequence[PairedStep],
    *,
    header: str,
    statement: str,
    name: str | None,
    checker: StepChecker,
    whole_program: Callable[[VerifyRequest], Outcome],
    reviewer: Reviewer | None = None,
    judge: CorrespondenceJudge | None = None,
) -> ProofLabels:
    """Labels of one paired proof: check, review the first failure (one repair), judge correspondence."""
    steps = list(steps)
    result = checker.check(header, statement, [s.tactic for s in steps])
    if result.status != OK:  # no verdict of Lean's on the tactics (candidate_failure included)
        return ProofLabels(
            [StepLabel(s.prose, s.tactic, None, f"no label: {result.status}") for s in steps],
            None,
            None,
            result.status,
            _first_line(result.output) or result.status,
            lean_version=result.lean_version,
        )
    decisions: list[dict[str, Any]] = []
    repaired = False
    labels = _labelled(steps, result)
    if result.first_failure is not None and reviewer is not None:
        index = result.first_failure
        decision = reviewer.review(Failure(statement, tuple(steps), index, result.output))
        record = {"step": index, "verdict": decision.verdict, "reason": decision.reason, "repair": decision.repair}
        if decision.verdict == "syntax" and decision.repair and decision.repair != steps[index].tactic:
            fixed = steps[:index] + [PairedStep(steps[index].prose, decision.repair)] + steps[index + 1 :]
            again = checker.check(header, statement, [s.tactic for s in fixed])
            record["recheck"] = (
                again.status
                if again.status != OK
                else ("fixed" if again.first_failure is None or again.first_failure > index else "still fails")
            )
            if again.status == OK and record["recheck"] == "fixed":
                steps, result, repaired = fixed, again, True
                labels = _labelled(steps, result)
                if result.first_failure is not None:  # a later failure: judged, not repaired again
                    later = reviewer.review(Failure(statement, tuple(steps), result.first_failure, result.output))
                    decisions.append(record)
                    record = {
                        "step": result.first_failure,
                        "verdict": later.verdict,
                        "reason": later.reason,
                        "repair": None,
                        "recheck": "no second repair",
                    }
                    decision = later
        decisions.append(record)
        keep = decision.verdict == "mathematical" and record.get("recheck") in (None, "no second repair")
        if result.first_failure is not None and not keep:
            why = f"dropped: reviewer judged the failure {decision.verdict}" + (
                f" and the repair {record['recheck']}"
                if record.get("recheck") not in (None, "no second repair")
                else ""
            )
            labels = [
                l if i < result.first_failure else StepLabel(l.prose, l.tactic, None, why) for i, l in enumerate(labels)
            ]
    proof_label: bool | None = False
    status = OK
    reason = "first failure at step %d" % (result.first_failure + 1) if result.first_failure is not None else ""
    if result.first_failure is None:
        outcome = whole_program(
            VerifyRequest(
                assemble_program(header, statement, [s.tactic for s in steps]),
                name=name,
                statement=statement,
                header=header,
            )
        )
        proof_label = outcome.label
        reason = f"every tactic compiles; whole program {outcome.category.value}"
        if outcome.category is not Category.VALID:  # the policy decides; no step is shown wrong or right
            why = outcome.category.value + (": " + "; ".join(outcome.reasons[:2]) if outcome.reasons else "")
            labels = [StepLabel(l.prose, l.tactic, None, f"no label: whole program {why}") for l in labels]
            if outcome.label is None:  # no answer about the whole program (timeout, infra, unavailable)
                status = outcome.category.value
    rejected = 0
    if judge is not None:
        for i, l in enumerate(labels):
            if l.label is None:
                continue
            ok, why = judge.judge(l.prose, l.tactic)
            if not ok:
                labels[i] = StepLabel(l.prose, l.tactic, None, f"dropped: correspondence judge rejected ({why})")
                rejected += 1
    return ProofLabels(
        labels, proof_label, result.first_failure, status, reason, decisions, rejected, repaired, result.lean_version
    )


def training_prefix(labels: Sequence[bool | None]) -> list[bool]:
    """The labels a verifier trains on: the longest prefix with a label at every step (a step with
    no label hides whether the steps after it are right)."""
    out: list[bool] = []
    for label in labels:
        if label is None:
            break
        out.append(label)
    return out


def as_dicts(labels: Sequence[StepLabel]) -> list[dict[str, Any]]:
    return [asdict(l) for l in labels]
