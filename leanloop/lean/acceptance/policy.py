"""The acceptance policy: ONE object that decides whether a program proves its statement.

Every stage that checks a program (data, rl, autoformalizer, search, prm) calls it; its profiles
(``collection``, ``collection_llf``, ``rl``, ``statement``): leanloop/lean/README.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from leanloop.lean.acceptance import reasons as R
from leanloop.lean.acceptance.axioms import ALLOWED_AXIOMS, describe_axiom, parse_axioms_reply
from leanloop.lean.acceptance.submission import StatementError, Submission, compose, parse_statement, verbatim
from leanloop.lean.acceptance.prechecks import run_prechecks
from leanloop.lean.acceptance.signature import DIFFERENT, SAME, UNDECIDED, compare
from leanloop.lean.acceptance.tokens import TokenTable
from leanloop.lean.types import (
    Category,
    LeanMessage,
    LeanResponse,
    Outcome,
    Position,
    ResponseStatus,
    TacticRecord,
    VerifyRequest,
)

MAX_CHARS = 262_144
HARNESS_HEARTBEATS = 800_000
# The header of the seed's benchmark (miniF2F as shipped by DeepSeek-Prover-V1.5 and used by the
# RL-Lean and Kimina-Prover candidates in ../shared/data).
BENCHMARK_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat\n\n"
)

# native_decide's axioms (and newer Lean's per-use X._native.native_decide.ax_N): the seed's collection
# list allows native_decide, so LLF's collection does too
NATIVE_AXIOMS = frozenset({"Lean.ofReduceBool", "Lean.trustCompiler"})


def is_native_axiom(axiom: str) -> bool:
    return axiom in NATIVE_AXIOMS or "._native." in axiom


_SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")


# The declared signature (binders and type of the target's declaration) against the trusted statement's,
# both normalised as Lean's pretty-printer lays them out (binder grouping, spacing, redundant
# parentheses: leanloop.lean.acceptance.signature): the offline form of LLF's printed-signature
# comparison. A difference the printer must show too (binder names: a renaming is rejected, as in the
# seed) is a mismatch; any other needs Lean's printed signature, which no recording holds: unavailable.
SIGNATURE_RULE = "signature_text"


@dataclass(frozen=True)
class Profile:
    name: str
    hardened: bool  # run the rl prechecks
    heartbeats: int | None  # the harness's maxHeartbeats line; None: program compiled verbatim
    statement_check: bool  # harness block with the trusted statement + #print axioms trailer
    max_chars: int = MAX_CHARS
    allowed_axioms: frozenset[str] = ALLOWED_AXIOMS
    allow_sorry: bool = False  # `sorry` allowed in the text and its warning allowed from Lean
    only_sorry_warning: bool = False  # any warning other than the sorry warning makes it INVALID
    allow_native_decide: bool = False  # native_decide's axioms pass the trailer's axiom check
    signature_check: bool = False  # the declared signature must equal the trusted one (SIGNATURE_RULE)

    @property
    def statement_rule(self) -> str:
        """Which rule checks that the program proves the trusted statement (recorded with a corpus)."""
        return "check_theorem" if self.statement_check else SIGNATURE_RULE if self.signature_check else "none"


COLLECTION = Profile("collection", hardened=False, heartbeats=None, statement_check=False)
RL = Profile("rl", hardened=True, heartbeats=HARNESS_HEARTBEATS, statement_check=True)
# LLF App. B: "The collection compares pretty-printed signatures and rejects mismatches even if the
# program otherwise compiles" (so a binder renaming is rejected); no axiom trailer. The check theorem
# (definitional equality, binder renamings accepted) stays rl's, the stronger defence under RL.
COLLECTION_LLF = Profile(
    "collection_llf", hardened=False, heartbeats=HARNESS_HEARTBEATS, statement_check=False, signature_check=True
)
# Does a formal statement type-check (the autoformalizer's compile reward)? `:= by sorry` is the
# expected proof: sorry and its warning are allowed, errors are not; the rl text rules still apply
# (an autoformalization policy is optimised against this check too).
STATEMENT = Profile(
    "statement",
    hardened=True,
    heartbeats=HARNESS_HEARTBEATS,
    statement_check=False,
    allow_sorry=True,
    only_sorry_warning=True,
)
PROFILES: dict[str, Profile] = {p.name: p for p in (COLLECTION, COLLECTION_LLF, RL, STATEMENT)}


@dataclass(frozen=True)
class Precheck:
    ok: bool
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "reasons": list(self.reasons)}


def _lf(text: str | None) -> str | None:
    return text.replace("\r\n", "\n") if text is not None else None


def is_sorry_warning(message: LeanMessage) -> bool:
    return message.severity == "warning" and bool(_SORRY_WARNING.search(message.data))


def _first_error(messages: list[LeanMessage]) -> LeanMessage | None:
    """Lean's first reported error (its order, as in RL-Lean's ``errors[0]``), not the one with the
    smallest position: "unsolved goals" is reported after the tactic errors inside its block but
    positioned at the block's start."""
    return next((m for m in messages if m.severity == "error"), None)


class AcceptancePolicy:
    """Prechecks, the program Lean compiles, and the verdict from Lean's answer."""

    def __init__(
        self,
        profile: str | Profile = "collection",
        *,
        header: str | None = BENCHMARK_HEADER,
        heartbeats: int | None | str = "profile",
        max_chars: int | None = None,
        lean_version: str | None = None,
        tokens: TokenTable | None = None,
    ):
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ValueError(f"unknown policy profile {profile!r}; choose one of {sorted(PROFILES)}")
            profile = PROFILES[profile]
        if heartbeats != "profile":
            profile = replace(profile, heartbeats=heartbeats)  # type: ignore[arg-type]
        if max_chars is not None:
            profile = replace(profile, max_chars=max_chars)
        self.profile = profile
        self.header = header
        # the backend's Lean version: it selects Lean's identifier table for the masker
        # (``lexing.table_for``; None: only what every supported version agrees on)
        self.lean_version = lean_version
        # Lean's token table for the masker: the live one the harness read from the header
        # environment, else the shipped one (``tokens.shipped``)
        self.tokens = tokens

    @property
    def name(self) -> str:
        return self.profile.name

    def __repr__(self) -> str:
        return f"AcceptancePolicy(profile={self.profile.name!r}, heartbeats={self.profile.heartbeats})"

    # -- before Lean -------------------------------------------------------------------------
    def precheck(self, program: str, *, header: str | None = None, name: str | None = None) -> Precheck:
        """Deterministic text checks; ``header`` defaults to the policy's benchmark header."""
        reasons = run_prechecks(
            program,
            hardened=self.profile.hardened,
            max_chars=self.profile.max_chars,
            header=header if header is not None else self.header,
            name=name,
            allow_sorry=self.profile.allow_sorry,
            lean_version=self.lean_version,
            heartbeat_budget=self.profile.heartbeats,
            tokens=self.tokens,
        )
        return Precheck(not reasons, reasons)

    def prepare(self, request: VerifyRequest) -> Submission | Outcome:
        """The program Lean must compile, or the final outcome when Lean need not run."""
        program = request.program
        if not isinstance(program, str) or not program.strip():
            return Outcome(Category.INPUT_ERROR, reasons=[R.reason(R.BAD_REQUEST, "empty program")])
        if (self.profile.statement_check or self.profile.signature_check) and not (request.name and request.statement):
            return Outcome(
                Category.INPUT_ERROR,
                reasons=[
                    R.reason(
                        R.BAD_REQUEST,
                        f"the {self.profile.name} profile needs the target name and the trusted "
                        "statement (VerifyRequest.name / .statement)",
                    )
                ],
            )
        header = request.header if request.header is not None else self.header
        if self.profile.hardened:
            # Lean reads CRLF as a line break; the text rules, the verbatim-header check and the
            # harness's line layout all work on LF (a CRLF program is the same program)
            program, header = _lf(program), _lf(header)
            request = replace(request, program=program, header=header, statement=_lf(request.statement))
        check = self.precheck(program, header=header, name=request.name)
        if not check.ok:
            return Outcome(Category.PRECHECK_REJECTED, reasons=check.reasons)
        signature = None
        if self.profile.statement_check or self.profile.signature_check:
            try:
                signature = parse_statement(request.statement or "", request.name)
            except StatementError as exc:
                return Outcome(Category.INPUT_ERROR, reasons=[R.reason(R.TRUSTED_STATEMENT_ERROR, str(exc))])
            if not self.profile.statement_check:
                signature = None  # compared after Lean (signature_verdict), not composed into the program
        if self.profile.heartbeats is None and signature is None:
            return verbatim(program)
        return compose(program, header=header, heartbeats=self.profile.heartbeats, signature=signature)

    # -- after Lean --------------------------------------------------------------------------
    def judge(
        self, request: VerifyRequest, submission: Submission, response: LeanResponse, backend: str = ""
    ) -> Outcome:
        """The outcome for Lean's answer to ``submission``."""
        base = Outcome(Category.UNAVAILABLE, time_s=response.time_s, backend=backend)
        no_answer = self._no_answer(response, base, self.profile)
        if no_answer is not None:
            return no_answer
        if self.profile.hardened:
            stray = self._unmatched(submission, response)
            if stray is not None:
                base.category = Category.INVALID
                base.messages = list(response.messages)
                base.reasons = [R.reason(R.UNMATCHED_REPLY, stray)]
                return base
        messages, tactics, harness_errors, trailer = self._split(submission, response)
        base.messages, base.tactics = messages, tactics
        if harness_errors:
            # The harness block comes before any candidate code, so Lean itself can only report an
            # error there when the trusted statement is broken; code the candidate runs at
            # elaboration time can also log one there (to turn a 0 into "no reward"). Without a
            # separate answer for the statement alone it is the candidate's: INVALID. The Verifier
            # asks for that answer (`statement_probe`) and turns a reproduced error into INPUT_ERROR.
            base.category = Category.INVALID
            base.first_error = harness_errors[0].data
            base.reasons = [
                R.reason(
                    R.HARNESS_LINE_ERROR,
                    f"error on harness line {harness_errors[0].pos.line}"
                    if harness_errors[0].pos
                    else "error on a harness line",
                )
            ]
            return base
        verdict = self._verdict_from_messages(messages, base, self.profile)
        if verdict is not None:
            return verdict
        if self.profile.signature_check:
            verdict, detail = signature_verdict(request, submission.candidate or request.program)
            if verdict != SAME:
                base.category = Category.INVALID if verdict == DIFFERENT else Category.UNAVAILABLE
                base.reasons = [
                    R.reason(R.STATEMENT_MISMATCH if verdict == DIFFERENT else R.SIGNATURE_UNDECIDED, detail)
                ]
                return base
        if not submission.trailer_line:
            base.category = Category.VALID
            return base
        return self._judge_trailer(submission, trailer, base)

    def judge_verbatim_fallback(self, request: VerifyRequest, response: LeanResponse, backend: str = "") -> Outcome:
        """For profiles that compose (rl, statement): the backend had no answer for the composed
        program (replay recordings never contain the harness lines); this is its answer for the
        verbatim program. Errors (or a sorry warning) decide INVALID; nothing else can be decided."""
        base = Outcome(Category.UNAVAILABLE, time_s=response.time_s, backend=backend)
        no_answer = self._no_answer(response, base, self.profile)
        if no_answer is not None:
            no_answer.reasons = [
                r
                if not r.startswith(R.NO_RECORDING)
                else R.reason(
                    R.NO_RECORDING,
                    f"no recorded answer from {backend or 'the backend'}, with or without the harness trailer",
                )
                for r in no_answer.reasons
            ]
            return no_answer
        base.messages, base.tactics = list(response.messages), list(response.tactics)
        verdict = self._verdict_from_messages(base.messages, base, self.profile)
        if verdict is not None:
            return verdict
        base.category = Category.UNAVAILABLE
        base.reasons = [
            R.reason(
                R.NO_TRAILER_REPLY,
                f"{backend or 'the backend'} has a clean answer for the "
                "program as written but none for it as the harness composes it (heartbeat line, "
                "trusted statement, #print axioms trailer): the profile's checks cannot be "
                "performed, so it is neither accepted nor rejected",
            )
        ]
        return base

    def statement_probe(self, submission: Submission) -> Submission:
        """The header and the harness block alone (no candidate code): the program whose answer
        says whether an error on a harness line comes from the trusted statement itself."""
        lines = submission.program.split("\n")
        keep = submission.header_lines + submission.block_lines
        return Submission(
            program="\n".join(lines[:keep]) + "\n",
            candidate="",
            header_lines=submission.header_lines,
            block_lines=submission.block_lines,
            trailer_line=0,
        )

    def judge_probe(self, outcome: Outcome, probe: Submission, response: LeanResponse) -> Outcome:
        """``outcome`` (a harness-line error) given Lean's answer for ``statement_probe``: an error
        there too means the trusted statement is broken (INPUT_ERROR, not the candidate's fault);
        a clean answer, or none at all, leaves the candidate's INVALID."""
        if response.status != ResponseStatus.OK:
            return outcome
        errors = [m for m in response.messages if m.severity == "error"]
        if not errors:
            return outcome
        return Outcome(
            Category.INPUT_ERROR,
            messages=outcome.messages,
            tactics=outcome.tactics,
            first_error=errors[0].data,
            time_s=outcome.time_s,
            backend=outcome.backend,
            reasons=[R.reason(R.TRUSTED_STATEMENT_ERROR, "the trusted statement did not elaborate under the header")],
        )

    @staticmethod
    def _unmatched(submission: Submission, response: LeanResponse) -> str | None:
        """Why some part of ``response`` cannot be Lean's reply to ``submission`` (None: it can).
        Lean positions every message inside the text it was sent (an error at the end of input
        sits one past the last line at most)."""
        last = submission.program.count("\n") + 1
        for item in (*response.messages, *response.tactics):
            for pos in (item.pos, item.end_pos):
                if pos is not None and not 1 <= pos.line <= last + 1:
                    return f"position {pos.line}:{pos.column} outside the {last}-line program"
        return None

    @staticmethod
    def _no_answer(response: LeanResponse, base: Outcome, profile: Profile) -> Outcome | None:
        status = response.status
        if status == ResponseStatus.OK:
            return None
        category, code = {
            ResponseStatus.TIMEOUT: (Category.TIMEOUT, R.LEAN_TIMEOUT),
            ResponseStatus.INFRA_ERROR: (Category.INFRA_ERROR, R.INFRA_FAILURE),
            ResponseStatus.UNAVAILABLE: (Category.UNAVAILABLE, R.NO_RECORDING),
            # the process died or garbled its reply after the program was sent: under a policy
            # that is optimised against (hardened), a failure the candidate caused scores 0
            ResponseStatus.CANDIDATE_FAILURE: (
                Category.INVALID if profile.hardened else Category.INFRA_ERROR,
                R.CANDIDATE_FAILURE,
            ),
        }[ResponseStatus(status)]
        base.category = category
        base.messages = list(response.messages)
        base.reasons = [R.reason(code, response.detail)]
        return base

    @staticmethod
    def _verdict_from_messages(messages: list[LeanMessage], base: Outcome, profile: Profile) -> Outcome | None:
        """INVALID at the first message the profile does not allow (an error; the sorry warning unless
        ``allow_sorry``; any other warning under ``only_sorry_warning``), else None."""

        def invalid(message: LeanMessage, code: str, what: str) -> Outcome:
            base.category = Category.INVALID
            base.first_error = message.data
            where = f" at line {message.pos.line}" if message.pos else ""
            base.reasons = [R.reason(code, f"{what}{where}")]
            return base

        first = _first_error(messages)
        if first is not None:
            return invalid(first, R.LEAN_ERROR, "first error")
        sorry = None if profile.allow_sorry else next((m for m in messages if is_sorry_warning(m)), None)
        if sorry is not None:
            return invalid(sorry, R.SORRY_WARNING, "declaration uses sorry")
        if profile.only_sorry_warning:
            other = next((m for m in messages if m.severity == "warning" and not is_sorry_warning(m)), None)
            if other is not None:
                return invalid(other, R.WARNING_NOT_ALLOWED, "warning other than sorry")
        return None

    @staticmethod
    def _split(submission: Submission, response: LeanResponse):
        """Candidate messages (positions mapped back), harness-block errors, trailer messages."""
        if not submission.composed:
            return list(response.messages), list(response.tactics), [], []
        messages, harness_errors, trailer = [], [], []

        def move(pos: Position | None) -> Position | None:
            return None if pos is None else Position(submission.candidate_line(pos.line), pos.column)

        for message in response.messages:
            line = message.pos.line if message.pos else None
            region = submission.region(line) if line is not None else "candidate"
            if region == "trailer":
                trailer.append(message)
            elif region == "harness":
                if message.severity == "error":
                    harness_errors.append(message)
            else:
                messages.append(LeanMessage(message.severity, message.data, move(message.pos), move(message.end_pos)))
        tactics = [
            TacticRecord(t.tactic, t.goals, move(t.pos), move(t.end_pos))  # type: ignore[arg-type]
            for t in response.tactics
            if submission.region(t.pos.line) == "candidate"
        ]
        return messages, tactics, harness_errors, trailer

    def _judge_trailer(self, submission: Submission, trailer: list[LeanMessage], base: Outcome) -> Outcome:
        errors = [m for m in trailer if m.severity == "error"]
        if errors:
            base.category = Category.INVALID
            base.first_error = errors[0].data
            base.reasons = [
                R.reason(
                    R.STATEMENT_MISMATCH,
                    f"`{submission.check_name}` did not compile: the "
                    "candidate's declaration does not prove the trusted statement",
                )
            ]
            return base
        replies = [
            parse_axioms_reply(m.data)
            for m in trailer
            if m.pos is not None and m.pos.line == submission.axioms_line and m.severity == "info"
        ]
        replies = [
            r
            for r in replies
            if r is not None and (r.name == submission.check_name or r.name.endswith("." + str(submission.check_name)))
        ]
        if len(replies) != 1:
            base.category = Category.INVALID
            base.reasons = [
                R.reason(
                    R.TRAILER_REPLY_MISSING,
                    f"{len(replies)} `#print axioms` replies on trailer "
                    f"line {submission.axioms_line}; acceptance requires exactly one",
                )
            ]
            return base
        bad = [
            a
            for a in replies[0].axioms
            if a not in self.profile.allowed_axioms and not (self.profile.allow_native_decide and is_native_axiom(a))
        ]
        if bad:
            base.category = Category.INVALID
            base.first_error = None
            base.reasons = [R.reason(R.AXIOM_NOT_ALLOWED, describe_axiom(a)) for a in bad]
            return base
        base.category = Category.VALID
        base.reasons = []
        return base


def signature_verdict(request: VerifyRequest, program: str) -> tuple[str, str]:
    """(SAME / DIFFERENT / UNDECIDED, why): does the program's declaration of the target carry the
    trusted statement's signature as Lean would print it (SIGNATURE_RULE)? Run on a program Lean
    compiled without error."""
    expected = parse_statement(request.statement or "", request.name)
    try:
        declared = parse_statement(program, request.name)
    except StatementError:
        return DIFFERENT, f"no `theorem {request.name}` declaration with a signature in the program"
    verdict = compare((expected.binders, expected.type), (declared.binders, declared.type))
    got = " ".join(f"{declared.binders} : {declared.type}".split())
    if verdict == DIFFERENT:
        return (
            verdict,
            f"the declared signature of `{request.name}` binds other names than the trusted one ({SIGNATURE_RULE}): {got!r}",
        )
    if verdict == UNDECIDED:
        return verdict, (
            f"the declared signature of `{request.name}` is spelled differently from the trusted one and only "
            f"Lean's printed signature can say whether it is the same: {got!r}"
        )
    return verdict, ""
