"""The ``rl`` profile against an adversary: each exploit class with the reply Lean would
give, and the final verdict.

Replies: Lean's own recorded messages (RL-Lean recordings of the accepted program
mathd_algebra_478, real ``#print axioms`` replies from the Lean reference manual) wherever they
exist. Where an exploit needs a reply nobody recorded, the test builds it and says so in a comment
starting with ``ASSUMED REPLY:`` — those are assumptions about Lean, never recorded data.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from leanloop.lean.acceptance import AcceptancePolicy, parse_axioms_reply
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.types import (
    Category,
    LeanBackend,
    LeanMessage,
    LeanResponse,
    Position,
    ResponseStatus,
    VerifyRequest,
)
from leanloop.lean.verifier import Verifier

NAME = "mathd_algebra_478"


def codes(reasons):
    return {R.code_of(r) for r in reasons}


@pytest.fixture(scope="module")
def real_error(rl_rows, replay):
    """A real Lean error message (text as Lean printed it) from a recorded failed program."""
    return next(
        m for r in rl_rows if not r["verdict_pass"] for m in replay.answer(r["code"]).messages if m.severity == "error"
    )


@pytest.fixture(scope="module")
def clean_axioms(shared_data):
    for line in open(shared_data / "lean_text/reference_manual_lean_outputs.jsonl"):
        row = json.loads(line)
        reply = parse_axioms_reply(row["output"]) if "axioms" in row["output"] else None
        if reply is not None and not reply.disallowed:
            return reply.name, row["output"]
    raise AssertionError("no clean #print axioms reply recorded")


@pytest.fixture(scope="module")
def replay():
    from leanloop.lean.replay import ReplayBackend

    backend = ReplayBackend(["rl_lean"])
    backend.index
    return backend


def request_for(accepted, statements, program=None):
    return VerifyRequest(
        program=program or accepted["code"],
        name=NAME,
        statement=statements[NAME]["formal_statement"],
        header=statements[NAME]["header"],
    )


def moved_messages(submission, recorded):
    """The recorded messages of the candidate's program, on their lines in the composed program."""

    def at(pos):
        if pos is None:
            return None
        return Position(pos.line + (submission.block_lines if pos.line > submission.header_lines else 0), pos.column)

    return [LeanMessage(m.severity, m.data, at(m.pos), at(m.end_pos)) for m in recorded.messages]


class Answers(LeanBackend):
    """A backend answering fixed programs with fixed responses (built in each test from recorded
    messages; see the ASSUMED REPLY comments), anything else UNAVAILABLE."""

    name = "answers"

    def __init__(self, answers: dict[str, LeanResponse]):
        self.answers, self.asked = answers, []

    async def run(self, program, timeout=None):
        self.asked.append(program)
        return self.answers.get(program, LeanResponse(ResponseStatus.UNAVAILABLE, detail="no recorded Lean answer"))


# ------------------------------------------------------------------ 1. candidate-caused failures score 0
@pytest.mark.parametrize(
    "profile,expected",
    [("rl", Category.INVALID), ("statement", Category.INVALID), ("collection", Category.INFRA_ERROR)],
)
def test_a_repl_that_dies_after_the_program_was_sent_scores_zero_when_hardened(accepted, statements, profile, expected):
    policy = AcceptancePolicy(profile)
    request = request_for(accepted, statements)
    submission = policy.prepare(request)
    dead = LeanResponse(ResponseStatus.CANDIDATE_FAILURE, detail="Lean REPL failed 2 times: BrokenPipeError")
    outcome = policy.judge(request, submission, dead, "local")
    assert outcome.category is expected and codes(outcome.reasons) == {R.CANDIDATE_FAILURE}
    # before the program was sent: retryable infrastructure, under every profile
    infra = policy.judge(request, submission, LeanResponse(ResponseStatus.INFRA_ERROR, detail="no start"), "local")
    assert infra.category is Category.INFRA_ERROR


def _harness_line_scenario(accepted, statements, replay, real_error, clean_axioms, probe_reply):
    policy = AcceptancePolicy("rl")
    request = request_for(accepted, statements)
    submission = policy.prepare(request)
    moved = moved_messages(submission, replay.answer(accepted["code"]))
    target, output = clean_axioms
    # ASSUMED REPLY: Lean's answer to the composed program where candidate code (running at
    # elaboration time) logged a real error text at the harness's expected-statement line, and the trailer
    # printed a clean axioms reply (the reference manual's, renamed to the check theorem).
    forged = replace(real_error, pos=Position(submission.header_lines + 2, 0), end_pos=None)
    axioms = LeanMessage(
        "info", output.replace(f"'{target}'", f"'{submission.check_name}'"), Position(submission.axioms_line, 0)
    )
    answers = {submission.program: LeanResponse(ResponseStatus.OK, messages=[*moved, forged, axioms])}
    probe = policy.statement_probe(submission)
    assert probe.program.count("\n") == submission.header_lines + submission.block_lines
    assert "linarith" in accepted["code"] and "linarith" not in probe.program  # no candidate code
    if probe_reply is not None:
        answers[probe.program] = probe_reply(probe, forged)
    backend = Answers(answers)
    outcome = Verifier(backend, policy).check_sync([request])[0]
    return outcome, backend


def test_an_error_on_a_harness_line_is_the_candidates_unless_the_statement_alone_reproduces_it(
    accepted, statements, replay, real_error, clean_axioms
):
    # the statement alone is clean (ASSUMED REPLY: no messages for header + harness block)
    outcome, backend = _harness_line_scenario(
        accepted, statements, replay, real_error, clean_axioms, lambda probe, err: LeanResponse(ResponseStatus.OK)
    )
    assert outcome.category is Category.INVALID and codes(outcome.reasons) == {R.HARNESS_LINE_ERROR}
    assert len(backend.asked) == 2
    # no answer for the statement alone: still the candidate's (never an unscored input error)
    outcome, _ = _harness_line_scenario(accepted, statements, replay, real_error, clean_axioms, None)
    assert outcome.category is Category.INVALID and outcome.label is False
    # the statement alone fails the same way (ASSUMED REPLY: the same error on the same line): input error
    outcome, _ = _harness_line_scenario(
        accepted,
        statements,
        replay,
        real_error,
        clean_axioms,
        lambda probe, err: LeanResponse(ResponseStatus.OK, messages=[err]),
    )
    assert outcome.category is Category.INPUT_ERROR and codes(outcome.reasons) == {R.TRUSTED_STATEMENT_ERROR}


def test_a_message_outside_the_program_is_not_leans_reply(accepted, statements, replay, clean_axioms):
    policy = AcceptancePolicy("rl")
    request = request_for(accepted, statements)
    submission = policy.prepare(request)
    moved = moved_messages(submission, replay.answer(accepted["code"]))
    target, output = clean_axioms
    good = LeanMessage(
        "info", output.replace(f"'{target}'", f"'{submission.check_name}'"), Position(submission.axioms_line, 0)
    )
    assert (
        policy.judge(request, submission, LeanResponse(ResponseStatus.OK, messages=[*moved, good])).category
        is Category.VALID
    )
    # ASSUMED REPLY: bytes the candidate wrote to the REPL's stdout, read as a reply whose message
    # sits on a line the program does not have
    stray = replace(good, pos=Position(submission.axioms_line + 40, 0))
    outcome = policy.judge(request, submission, LeanResponse(ResponseStatus.OK, messages=[*moved, good, stray]))
    assert outcome.category is Category.INVALID and codes(outcome.reasons) == {R.UNMATCHED_REPLY}


def test_a_missing_trailer_reply_scores_zero(accepted, statements, replay):
    policy = AcceptancePolicy("rl")
    request = request_for(accepted, statements)
    submission = policy.prepare(request)
    # the recorded messages alone: Lean (or the candidate) printed nothing on the trailer
    moved = moved_messages(submission, replay.answer(accepted["code"]))
    outcome = policy.judge(request, submission, LeanResponse(ResponseStatus.OK, messages=moved))
    assert outcome.category is Category.INVALID and codes(outcome.reasons) == {R.TRAILER_REPLY_MISSING}


def test_candidate_failures_score_zero_in_every_reward_protocol(accepted, statements):
    from rl.reward import Protocol, combine
    from rl.reward_harness import Candidate, Stage
    from leanloop.evaluator import Prediction

    policy = AcceptancePolicy("rl")
    request = request_for(accepted, statements)
    outcome = policy.judge(request, policy.prepare(request), LeanResponse(ResponseStatus.CANDIDATE_FAILURE))
    candidate = Candidate(problem=None, completion="", stage=Stage.READY)
    accept_all = Prediction(verdict=True, score=1.0, trace=None, time_s=0.0)
    for protocol in (Protocol.LEAN, Protocol.LEAN_MATCHED, Protocol.HYBRID):
        assert combine(protocol, candidate, outcome, accept_all).reward == 0.0


# ------------------------------------------------------------------ 2. name capture in the check line
def _with_before(accepted, text: str) -> str:
    """The accepted program with ``text`` inserted right before its theorem (its docstring kept)."""
    code = accepted["code"]
    at = code.index(f"theorem {NAME}")
    return code[:at] + text + code[at:]


def test_the_check_line_names_only_global_declarations_and_closes_the_candidates_scopes(accepted, statements):
    from leanloop.lean.acceptance.submission import open_scopes
    from leanloop.lean.acceptance import mask

    policy = AcceptancePolicy("rl")
    # the candidate's theorem is Decoy.mathd_algebra_478; a section variable of the same name
    # would be what a bare `@mathd_algebra_478` on the check line means
    capture = f"section Inner\nvariable ({NAME} : ∀ b h v : ℝ, False)\n"
    program = _with_before(accepted, "namespace Decoy\n") + "\n" + capture
    submission = policy.prepare(request_for(accepted, statements, program))
    assert hasattr(submission, "trailer_line"), submission
    lines = submission.program.split("\n")
    trailer = lines[submission.trailer_line - 1 : submission.axioms_line]
    assert trailer[:2] == ["end Inner", "end Decoy"]  # innermost first: the variable is gone before the check
    check = lines[submission.check_line - 1]
    assert check.startswith("theorem _root_.LeanloopHarness.check_")
    # every identifier on the check and axioms lines is absolute: no local or namespace can capture it
    for line in (check, lines[submission.axioms_line - 1]):
        idents = re.findall(r"@?[\w.]+\.\w+|@\w+", line.split(":", 1)[-1] if line is check else line)
        assert idents and all(i.lstrip("@").startswith("_root_.") for i in idents), line
    assert f"@_root_.{NAME}" in check
    assert open_scopes(mask("section A\nnamespace B.C\nmutual\nend\nsection\nend\n").text) == ["A", "B.C"]
    # ASSUMED REPLY: Lean cannot resolve `_root_.mathd_algebra_478` (only Decoy.mathd_algebra_478 and
    # the section variable exist), an error on the check line -> the candidate scores 0
    error = LeanMessage("error", f"unknown constant '{NAME}'", Position(submission.check_line, 0))
    outcome = policy.judge(
        request_for(accepted, statements, program), submission, LeanResponse(ResponseStatus.OK, messages=[error])
    )
    assert outcome.category is Category.INVALID and codes(outcome.reasons) == {R.STATEMENT_MISMATCH}


@pytest.mark.parametrize(
    "capture",
    [
        f"variable ({NAME} : ∀ b h v : ℝ, False)\ninclude {NAME}\n",
        "variable? [Group G]\n",
        "omit h\n",
        # written mid-line, after a proof: a command keyword ends the tactic block
        f"  linarith include {NAME}\n",
    ],
)
def test_scope_capture_commands_are_refused(accepted, statements, capture):
    program = accepted["code"] + "\n" + capture
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED and R.SCOPE_CAPTURE in codes(outcome.reasons)


# ------------------------------------------------------------------ 3. the masker agrees with Lean's lexer
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from leanloop.lean.acceptance import mask  # noqa: E402

# (text, is it code Lean's lexer reads as tokens?) — literals and comments as Lean lexes them
_CODE = ["x", "h'", "f''", "get!", "decide?", "!", "?", "(", ")", ":=", "1", "Nat.succ", "r", "a'b'", "#eval"]
_HIDDEN = [
    '"a\\"b"',
    'r"\\"',
    'r#"a"b"#',
    "'\"'",
    "'a'",
    "'\\n'",
    "/-- doc /- nested -/ -/",
    "/--/ x -/",
    "/-! mod -/",
    "/- a -/",
    "-- line\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 100), st.booleans()), max_size=25))
def test_mask_blanks_exactly_what_leans_lexer_reads_as_literals_or_comments(pieces):
    text, expected, last = "", "", ""
    for hidden, pick, glue in pieces:
        part = _HIDDEN[pick % len(_HIDDEN)] if hidden else _CODE[pick % len(_CODE)]
        # a literal may touch a standalone `!` or `(` (Lean: separate tokens; `get!r"` would be the
        # identifier `get!r`); anything else gets a space
        sep = "" if (glue and hidden and last in ("!", "(")) or not text or text.endswith("\n") else " "
        last = part
        text += sep + part
        expected += sep + ("".join(" " if c != "\n" else "\n" for c in part) if hidden else part)
    masked = mask(text)
    assert masked.text == expected and masked.unterminated is None, text


@pytest.mark.parametrize("smuggle", ['!r"\\"', "!'\"'"])
def test_a_bang_before_a_literal_does_not_open_a_string_lean_never_sees(accepted, statements, smuggle):
    """Round 2 of the red team: after `!r"\\"` the old masker opened a string running to the end,
    hiding every later command from every text rule."""
    program = accepted["code"] + f'\ndef smuggle := {smuggle}\n#eval IO.println "no goals"\n'
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED and R.METAPROGRAM in codes(outcome.reasons)


HIDDEN_PAYLOAD = 'set_option debug.skipKernelTC true\nrun_cmd Lean.addDecl default\n-- "\n'


@pytest.mark.parametrize("smuggle", ["#check'\"'", "#reduce'\"'", '#checkr"\\"', '#check.r"\\"', "#check_failure'\"'"])
def test_a_hash_command_before_a_literal_does_not_open_a_string_lean_never_sees(accepted, statements, smuggle):
    """`#check` is one symbol token (`#` starts no identifier), so in `#check'"'` Lean reads a char
    literal and in `#checkr"\\"` a raw string; the old masker read `check'` / `checkr` as an
    identifier and opened a string running to the `-- "`, hiding the payload from every rule."""
    program = accepted["code"] + f"\n{smuggle}\n" + HIDDEN_PAYLOAD
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    found = codes(outcome.reasons)
    assert outcome.category is Category.PRECHECK_REJECTED
    assert {R.KERNEL_CHECK_OPTION, R.METAPROGRAM} <= found, outcome.reasons  # the payload is visible
    assert R.AMBIGUOUS_LEXING in found


def test_a_literal_glued_to_a_hash_word_is_refused_whichever_way_lean_splits_it(accepted, statements):
    """Where the `#word` token ends is up to Lean's token table: `#check_failurefoo'"'` is
    `#check_failure`, the identifier `foo'` and a string, so masking `'"'` as a char literal would
    hide what follows the next `"` instead. Neither reading is safe: the rl profile refuses."""
    program = accepted["code"] + "\n#check_failurefoo'\"' \"\n" + 'run_cmd Lean.addDecl default\n-- "\n'
    assert mask(program).ambiguous
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED and R.AMBIGUOUS_LEXING in codes(outcome.reasons)
    # a name ends before `.'` and after a «quoted» part: Lean reads the char literal
    assert mask("x.'\"' y").text == "x.    y" and mask("«x»'\"' y").text == "«x»    y"
    assert mask('x.r"a"').text == "x.r   " and mask("h' := '\"'").ambiguous is None


def test_a_doc_comment_opening_does_not_close_itself(accepted, statements):
    program = accepted["code"] + "\n/--/ #eval 1\n"  # Lean: an unterminated doc comment
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert R.UNTERMINATED in codes(outcome.reasons)
    assert mask("/--/ x -/ #eval").text.endswith("#eval")


@pytest.mark.parametrize(
    "smuggle,code",
    [
        ('def s := s!"{(by_elab pure ()).1}"', R.METAPROGRAM),
        ("def s : Nat := dbg_trace \"{('}', by_elab pure ())}\"; 0", R.METAPROGRAM),
        ('def s := s!"{sorry}"', R.FORBIDDEN),
    ],
)
def test_code_inside_interpolated_strings_is_seen(accepted, statements, smuggle, code):
    program = accepted["code"] + "\n" + smuggle + "\n"
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED and code in codes(outcome.reasons), outcome.reasons
    # the collection profile keeps the seed's masking (a string is a string)
    assert mask(smuggle).text.count("by_elab") == 0


def test_crlf_is_the_same_program(accepted, statements):
    crlf = accepted["code"].replace("\n", "\r\n")
    request = VerifyRequest(
        program=crlf,
        name=NAME,
        statement=statements[NAME]["formal_statement"].replace("\n", "\r\n"),
        header=statements[NAME]["header"].replace("\n", "\r\n"),
    )
    policy = AcceptancePolicy("rl")
    assert policy.prepare(request).program == policy.prepare(request_for(accepted, statements)).program


# ------------------------------------------------------------------ 4. elaboration-time code without a keyword
# A cheap first filter, not the defence (see docs/threat_model.md): each payload of the red team's
# second round, injected into the accepted program, stops at the text rules.
ELABORATION_TIME_CODE = {
    "by_elab term": "def x : Nat := by_elab return Lean.mkNatLit 0",
    "run_conv": "example : 1 = 1 := by\n  conv => run_conv pure ()\n",
    "run_tac inside s!": 'def s := s!"{(by run_tac pure ())}"',
    "dbg_trace with char-literal braces": "def s : Nat := dbg_trace \"{('}', 0)}\"; 0",
    "linarith discharger": "example (a : ℝ) (h : 0 < a) : 0 < a := by\n  linarith (config := {discharger := pure ()})",
    "aesop rule": "@[aesop safe tactic]\ndef t : Lean.Elab.Tactic.TacticM Unit := pure ()",
    "positivity extension": "@[positivity _ + _]\ndef ext := 0",
    "norm_num extension": "@[norm_num (_ : ℕ) + _]\ndef ext := 0",
    "attribute added at run time": "def f := Lean.Attribute.add",
    "unchecked declaration": "def f := Lean.addDecl",
    "addDeclWithoutChecking": "def f := addDeclWithoutChecking",
    "skip kernel check through options": "def o := debug.skipKernelTC",
    "IO ref kept across commands": "def r := IO.mkRef 0",
    "linter registration": "register_linter_set foo := []",
    "macro rewriting the check line": 'macro "theorem" : command => `(example : True := trivial)',
    "override of #print axioms": 'elab "#print" "axioms" id:ident : command => pure ()',
}


@pytest.mark.parametrize("name", list(ELABORATION_TIME_CODE))
def test_elaboration_time_code_is_refused_before_lean(accepted, statements, name):
    program = accepted["code"] + "\n\n" + ELABORATION_TIME_CODE[name] + "\n"
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED, name
    assert codes(outcome.reasons) & {R.METAPROGRAM, R.SYNTAX_EXTENSION, R.KERNEL_CHECK_OPTION}, outcome.reasons
