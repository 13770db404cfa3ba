"""The reward harness: from a completion to the program Lean checks, with the statement trusted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from leanloop.lean.acceptance import AcceptancePolicy, mask
from leanloop.lean.acceptance.submission import Submission, split_docstring, statement_prefix
from leanloop.lean.types import Category, Outcome, VerifyRequest
from leanloop.prover.extract import last_lean_block
from leanloop.prover.statements import Statement

Extraction = Literal["code_block", "continuation", "auto"]

# Lines a code block may start with that the harness replaces by the trusted header: imports, and
# `set_option` commands that stand alone (`... in` scopes the next declaration: it stays, and the
# prechecks judge it). A standalone `open` stays: the proof may need it, and repeating one the
# header has changes nothing.
_HEADER_LINE = re.compile(r"^\s*(?:import\s.*|set_option\s(?:(?!\bin\s*$).)*|)$")
_FENCE = re.compile(r"^[ \t]*```", re.M)
_ENDS_BY = re.compile(r":=\s*(?:by)?\s*$")


class Stage(str, Enum):
    """How far a rollout got before its reward was decided."""

    NO_CODE = "no_code"  # nothing extractable: reward 0
    PRECHECK = "precheck"  # decided before Lean: precheck_rejected (reward 0) or input_error (unscored)
    READY = "ready"  # needs a verdict: Lean and/or the evaluator


@dataclass
class Candidate:
    """One rollout's program and what the harness already knows about it."""

    problem: Statement
    completion: str
    stage: Stage
    program: str | None = None
    reason: str | None = None  # why no code
    request: VerifyRequest | None = None
    outcome: Outcome | None = None  # the precheck outcome when stage is PRECHECK
    submission: Submission | None = None  # what Lean would compile (READY)
    extraction: str | None = None  # code_block / continuation

    @property
    def precheck_reasons(self) -> list[str]:
        return list(self.outcome.reasons) if self.outcome is not None else []


@dataclass
class ProofBody:
    body: str | None  # starts right after the target's `:=` (e.g. " by\n  simp")
    helpers: str = ""  # declarations the block makes before the target
    method: str | None = None
    reason: str | None = None


def _assign_offset(masked: str, start: int) -> int | None:
    """Offset of the top-level ``:=`` of the declaration starting at ``start`` (brackets balanced)."""
    depth = 0
    pairs = {"(": 1, "[": 1, "{": 1, "⦃": 1, "⟨": 1, ")": -1, "]": -1, "}": -1, "⦄": -1, "⟩": -1}
    i = start
    while i < len(masked):
        ch = masked[i]
        delta = pairs.get(ch)
        if delta:
            depth += delta
        elif depth == 0 and masked.startswith(":=", i):
            return i
        i += 1
    return None


def proof_from_block(block: str, theorem: str) -> ProofBody:
    """The proof body (and preceding helper declarations) of ``theorem`` in a code block."""
    masked = mask(block).text
    pattern = re.compile(
        r"(?m)^[ \t]*(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*"
        r"(?:theorem|lemma)\s+(?:_root_\.)?" + re.escape(theorem) + r"(?=[\s(:{\[⦃])"
    )
    found = list(pattern.finditer(masked))
    if not found:
        return ProofBody(None, reason=f"the last lean block does not declare `{theorem}`")
    # The first declaration is the one whose proof we take; a second one is a redeclaration, which
    # the rl prechecks reject (it stays in the body so that they see it).
    decl = found[0]
    assign = _assign_offset(masked, decl.end())
    if assign is None:
        return ProofBody(None, reason=f"`{theorem}` in the last lean block has no `:=` (no proof)")
    body = block[assign + 2 :]
    if not body.strip():
        return ProofBody(None, reason=f"`{theorem}` in the last lean block has an empty proof")
    lines = block[: decl.start()].splitlines(keepends=True)
    cut = 0
    while cut < len(lines) and _HEADER_LINE.match(mask(lines[cut]).text):
        cut += 1
    return ProofBody(body.rstrip(), "".join(lines[cut:]), "code_block")


def proof_from_continuation(completion: str) -> ProofBody:
    fence = _FENCE.search(completion)
    body = completion[: fence.start()] if fence else completion
    if not body.strip():
        return ProofBody(
            None, reason="empty completion" if not completion.strip() else "no proof text before the first code fence"
        )
    return ProofBody(body.rstrip(), "", "continuation")


def extract_proof(completion: str, theorem: str, mode: Extraction = "auto") -> ProofBody:
    """``auto``: the last complete lean block if there is one, else the continuation."""
    if not isinstance(completion, str) or not completion.strip():
        return ProofBody(None, reason="empty completion")
    if mode in ("code_block", "auto"):
        block = last_lean_block(completion)
        if block is not None:
            return proof_from_block(block, theorem)
        if mode == "code_block":
            opened = re.search(r"^[ \t]*```[ \t]*lean4?[ \t]*$", completion, re.M)
            return ProofBody(
                None,
                reason="lean code block opened but never closed"
                if opened
                else "no complete lean code block in the answer",
            )
    return proof_from_continuation(completion)


def trusted_prefix(problem: Statement) -> str:
    """What comes before any completion text: the header and the statement's trusted context
    (without the docstring that belongs to the statement). The policy elaborates the trusted
    statement right after it, in the statement's own context (its opens, variables, definitions)."""
    return statement_prefix(problem.header, problem.context)


_NAMESPACE = re.compile(r"(?<![\w.'])namespace\s")


def trusted_program(problem: Statement, proof: ProofBody) -> str:
    """Trusted header + context, the completion's helpers, the statement's docstring and the
    trusted statement, then the completion's proof body. The helpers go before the docstring
    (a docstring must directly precede its declaration)."""
    statement = problem.statement.rstrip()
    docstring = split_docstring(problem.context)[1]
    # the completion's own docstring of the target belongs to the declaration the trusted statement
    # replaces (two doc comments in a row do not parse); the trusted one is used
    helpers = split_docstring(proof.helpers)[0] if proof.helpers else ""
    if helpers and _NAMESPACE.search(mask(helpers).text):
        from leanloop.lean.acceptance.submission import open_scopes

        if any(not s.startswith("\0") for s in open_scopes(mask(helpers).text)):
            # the completion declared the target `_root_.<name>` inside its namespace: keep it global
            statement = re.sub(
                r"((?:theorem|lemma)\s+)(?!_root_\.)(" + re.escape(problem.theorem) + r")(?=[\s(:{\[⦃])",
                r"\1_root_.\2",
                statement,
                count=1,
            )
    head = trusted_prefix(problem) + helpers + docstring
    if proof.method == "continuation":
        # the statement ends in `:= by` (leanloop.prover.statements guarantees it) and the body continues it
        return head + statement + proof.body
    return head + _ENDS_BY.sub("", statement).rstrip() + " :=" + proof.body


class RewardHarness:
    """Completion -> :class:`Candidate` under an acceptance policy (``rl`` by default)."""

    def __init__(self, policy: AcceptancePolicy | str = "rl", extraction: Extraction = "auto"):
        self.policy = AcceptancePolicy(policy) if isinstance(policy, str) else policy
        if self.policy.name != "rl":
            # collection would accept a proof of a different statement (no trailer check)
            raise ValueError(f"the reward harness needs the hardened `rl` policy profile, got {self.policy.name!r}")
        if extraction not in ("code_block", "continuation", "auto"):
            raise ValueError(f"extraction must be code_block, continuation or auto, got {extraction!r}")
        self.extraction = extraction

    def request(self, problem: Statement, program: str, rollout_id: str | None = None) -> VerifyRequest:
        # `statement` is the trusted declaration text (header excluded): the policy elaborates it in
        # the harness block and checks the candidate's `@name` against it
        return VerifyRequest(
            program=program,
            name=problem.theorem,
            statement=problem.statement,
            header=trusted_prefix(problem),
            id=rollout_id,
        )

    def build(self, problem: Statement, completion: str, rollout_id: str | None = None) -> Candidate:
        if isinstance(completion, str):
            completion = completion.replace("\r\n", "\n")  # Lean reads CRLF as a line break
        proof = extract_proof(completion, problem.theorem, self.extraction)
        if proof.body is None:
            return Candidate(problem, completion, Stage.NO_CODE, reason=proof.reason)
        program = trusted_program(problem, proof)
        request = self.request(problem, program, rollout_id)
        prepared = self.policy.prepare(request)
        if isinstance(prepared, Outcome):
            return Candidate(
                problem,
                completion,
                Stage.PRECHECK,
                program=program,
                request=request,
                outcome=prepared,
                extraction=proof.method,
            )
        return Candidate(
            problem,
            completion,
            Stage.READY,
            program=program,
            request=request,
            submission=prepared,
            extraction=proof.method,
        )


@dataclass
class HarnessCounts:
    """Per-batch tally of where rollouts stopped (logged each step)."""

    no_code: int = 0
    precheck_rejected: int = 0
    input_error: int = 0
    ready: int = 0
    precheck_reasons: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, candidates: list[Candidate]) -> "HarnessCounts":
        from leanloop.lean.acceptance.reasons import code_of

        counts = cls()
        for c in candidates:
            if c.stage is Stage.NO_CODE:
                counts.no_code += 1
            elif c.stage is Stage.READY:
                counts.ready += 1
            elif c.outcome is not None and c.outcome.category is Category.PRECHECK_REJECTED:
                counts.precheck_rejected += 1
                for r in c.outcome.reasons:
                    counts.precheck_reasons[code_of(r)] = counts.precheck_reasons.get(code_of(r), 0) + 1
            else:
                counts.input_error += 1
        return counts
