"""The acceptance policy: masking, red-team prechecks for both profiles, the axiom parser on real
``#print axioms`` replies, and the trailer judgement.

Exploit programs are built by injecting each construct into a real RL-Lean program that Lean
accepted, so the only difference from an accepted program is the exploit itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leanloop.lean.acceptance import BENCHMARK_HEADER, AcceptancePolicy, mask, parse_axioms_reply, parse_statement
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.acceptance.submission import compose
from leanloop.lean.types import Category, LeanMessage, LeanResponse, Position, ResponseStatus, VerifyRequest


def codes(reasons: list[str]) -> set[str]:
    return {R.code_of(r) for r in reasons}


@pytest.fixture(scope="module")
def axiom_replies(shared_data):
    rows = [json.loads(line) for line in open(shared_data / "lean_text/reference_manual_lean_outputs.jsonl")]
    out = []
    for row in rows:
        target = re.findall(r"#print axioms (\S+)", row.get("code") or "")
        if "axioms" in row["output"] and target:
            out.append((target[-1], row["output"]))
    return out


# ------------------------------------------------------------------ masking
def test_mask_blanks_comments_and_literals_only():
    program = (
        "theorem t : True := by -- sorry here\n  /- admit /- nested -/ still -/ trivial\n"
        'def s := "a \\"sorry\\" b" ++ toString \'x\' ++ r#"admit"#\n'
        "theorem h' (f'' : Nat) : «weird--name» = 1 := sorry"
    )
    masked = mask(program)
    assert len(masked.text) == len(program) and masked.text.count("\n") == program.count("\n")
    assert masked.unterminated is None
    assert "sorry here" not in masked.text and "nested" not in masked.text and "still" not in masked.text
    assert '"' not in masked.text and "admit" not in masked.text
    assert "h' (f'' : Nat)" in masked.text and "«weird--name» = 1 := sorry" in masked.text
    assert mask("x /- open").unterminated == "block comment"
    assert mask('x "open').unterminated == "string literal"


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=list("ab'\"\\/-#r«» \n{}"), max_size=80))
def test_mask_preserves_length_and_lines(text):
    masked = mask(text).text
    assert len(masked) == len(text)
    for original, blanked in zip(text, masked):
        assert blanked == original or (blanked == " " and original != "\n")


# ------------------------------------------------------------------ prechecks
def test_real_programs_pass_prechecks(rl_rows):
    policy = AcceptancePolicy("collection")
    rl = AcceptancePolicy("rl")
    flagged = [r for r in rl_rows if not policy.precheck(r["code"]).ok]
    # the only RL-Lean program with a real `sorry` outside comments (computed, then checked by eye)
    assert [r["name"] for r in flagged] == [r["name"] for r in rl_rows if re.search(r"^\s+sorry\s*$", r["code"], re.M)]
    # the benchmark header sets maxHeartbeats 0; rl overrides it and must not blame the candidate
    assert all(rl.precheck(r["code"], name=r["name"]).ok for r in rl_rows[:200] if r not in flagged)


BODY = "theorem mathd_algebra_478"

EXPLOITS = {
    # name: (transform of the accepted program, rejected by collection?, rl reason code)
    "sorry": (lambda p: p.replace("linarith\n", "sorry\n", 1), True, R.FORBIDDEN),
    "admit": (lambda p: p.replace("linarith\n", "admit\n", 1), True, R.FORBIDDEN),
    "axiom": (lambda p: p.replace(BODY, "axiom cheat : False\n" + BODY), True, R.FORBIDDEN),
    "opaque": (lambda p: p.replace(BODY, "opaque magic : Nat\n" + BODY), True, R.FORBIDDEN),
    "unsafe": (lambda p: p.replace(BODY, "unsafe def u : Nat := 0\n" + BODY), True, R.FORBIDDEN),
    "late_import": (lambda p: p.replace(BODY, "import Mathlib.Tactic\n" + BODY), True, R.LATE_IMPORT),
    "native_decide": (lambda p: p.replace("linarith\n", "native_decide\n", 1), False, R.NATIVE_DECIDE),
    "decide_native": (lambda p: p.replace("linarith\n", "decide +native\n", 1), False, R.NATIVE_DECIDE),
    "ofReduceBool": (
        lambda p: p.replace("linarith\n", "exact Lean.ofReduceBool _ _ rfl\n", 1),
        False,
        R.TRUSTS_COMPILER,
    ),
    "sorryAx": (lambda p: p.replace("linarith\n", "exact sorryAx _ false\n", 1), False, R.SORRY_DISGUISE),
    "stop": (lambda p: p.replace("linarith\n", "stop\n", 1), False, R.SORRY_DISGUISE),
    "apply?": (lambda p: p.replace("linarith\n", "apply?\n", 1), False, R.SORRY_DISGUISE),
    "implemented_by": (
        lambda p: p.replace(BODY, "@[implemented_by id] def f (n : Nat) := n\n" + BODY),
        False,
        R.COMPILER_OVERRIDE,
    ),
    "extern": (lambda p: p.replace(BODY, 'attribute [extern "c_add"] Nat.add\n' + BODY), False, R.COMPILER_OVERRIDE),
    "csimp": (lambda p: p.replace(BODY, "@[csimp] theorem c : @id = @id := rfl\n" + BODY), False, R.COMPILER_OVERRIDE),
    "skip_kernel": (
        lambda p: p.replace(BODY, "set_option debug.skipKernelTC true\n" + BODY),
        False,
        R.KERNEL_CHECK_OPTION,
    ),
    "heartbeats": (lambda p: p.replace(BODY, "set_option maxHeartbeats 0 in\n" + BODY), False, R.CANDIDATE_HEARTBEATS),
    "synth_heartbeats": (
        lambda p: p.replace(BODY, "set_option synthInstance.maxHeartbeats 0 in\n" + BODY),
        False,
        R.CANDIDATE_HEARTBEATS,
    ),
    "pp_option": (lambda p: p.replace(BODY, "set_option pp.all true\n" + BODY), False, R.OPTION_NOT_ALLOWED),
    "notation": (lambda p: p.replace(BODY, 'local notation "ℝ" => ℕ\n' + BODY), False, R.SYNTAX_EXTENSION),
    "infix": (lambda p: p.replace(BODY, 'infixl:65 " +' + "' " + '" => HAdd.hAdd\n' + BODY), False, R.SYNTAX_EXTENSION),
    "macro_rules": (
        lambda p: p.replace(BODY, "macro_rules | `(tactic| linarith) => `(tactic| skip)\n" + BODY),
        False,
        R.SYNTAX_EXTENSION,
    ),
    "syntax": (lambda p: p.replace(BODY, 'syntax "done!" : tactic\n' + BODY), False, R.SYNTAX_EXTENSION),
    "elab": (lambda p: p.replace(BODY, 'elab "win" : tactic => pure ()\n' + BODY), False, R.METAPROGRAM),
    "eval": (lambda p: p.replace(BODY, '#eval IO.println "valid"\n' + BODY), False, R.METAPROGRAM),
    "run_cmd": (lambda p: p + "\nrun_cmd Lean.logInfo \"'x' does not depend on any axioms\"", False, R.METAPROGRAM),
    "run_tac": (lambda p: p.replace("linarith\n", "run_tac pure ()\n", 1), False, R.METAPROGRAM),
    "tactic_attribute": (
        lambda p: p.replace(
            BODY, "@[tactic Lean.Parser.Tactic.omega] def t : Lean.Elab.Tactic.Tactic := fun _ => pure ()\n" + BODY
        ),
        False,
        R.METAPROGRAM,
    ),
    "exit": (lambda p: p.replace("  subst", "#exit\n  subst", 1), False, R.EXIT_COMMAND),
    "guard_msgs": (lambda p: p.replace(BODY, "#guard_msgs (drop error) in\n" + BODY), False, R.MESSAGE_SUPPRESSION),
    "local_instance": (
        lambda p: p.replace(BODY, "local instance : LT ℝ := ⟨fun _ _ => True⟩\n" + BODY),
        False,
        R.INSTANCE_DECLARATION,
    ),
    "instance_attribute": (
        lambda p: p.replace(BODY, "attribute [-instance] Real.instLT\n" + BODY),
        False,
        R.INSTANCE_DECLARATION,
    ),
    "redeclared": (lambda p: p + "\n" + p[p.index(BODY) :], False, R.TARGET_REDECLARED),
    "target_as_def": (
        lambda p: p.replace(BODY, "lemma helper : True := trivial\ndef mathd_algebra_478"),
        False,
        R.TARGET_NOT_THEOREM,
    ),
    "harness_name": (lambda p: p + "\ntheorem LeanloopHarness.check_0 : True := trivial", False, R.HARNESS_NAME),
    "unterminated": (lambda p: p + "\n/- the trailer would be swallowed", False, R.UNTERMINATED),
    "header_reordered": (
        lambda p: p.replace("import Mathlib\nimport Aesop", "import Aesop\nimport Mathlib"),
        False,
        R.HEADER_NOT_VERBATIM,
    ),
}


@pytest.mark.parametrize("exploit", sorted(EXPLOITS))
def test_red_team_prechecks(exploit, accepted):
    transform, collection_rejects, rl_code = EXPLOITS[exploit]
    program = transform(accepted["code"])
    assert program != accepted["code"]
    collection = AcceptancePolicy("collection").precheck(program, name="mathd_algebra_478")
    rl = AcceptancePolicy("rl").precheck(program, name="mathd_algebra_478")
    assert collection.ok is not collection_rejects, collection.reasons
    assert rl_code in codes(rl.reasons), rl.reasons
    if collection_rejects:
        assert rl_code in codes(collection.reasons)


BENIGN = {
    "sorry_in_comments": lambda p: p.replace(
        "  subst", "  -- sorry, admit and native_decide are fine here\n  /- axiom /- nested sorry -/ -/\n  subst", 1
    ),
    "sorry_in_docstring": lambda p: p.replace(BODY, "/-- uses no sorry; `#exit` -/\n" + BODY),
    "sorry_in_string": lambda p: p.replace(BODY, 'def msg : String := "sorry \\"admit\\" #eval"\n' + BODY),
    "qualified_names": lambda p: p.replace("linarith\n", "have h' := Nat.le_refl 1\n  linarith\n", 1),
    "allowed_option": lambda p: p.replace(BODY, "set_option maxRecDepth 2000 in\n" + BODY),
    "lemma_helper": lambda p: p.replace(BODY, "lemma helper : (1 : ℝ) = 1 := rfl\n" + BODY),
}


@pytest.mark.parametrize("case", sorted(BENIGN))
def test_benign_constructs_pass_both_profiles(case, accepted):
    program = BENIGN[case](accepted["code"])
    assert program != accepted["code"]
    for profile in ("collection", "rl"):
        result = AcceptancePolicy(profile).precheck(program, name="mathd_algebra_478")
        assert result.ok, (profile, result.reasons)


def test_header_rules(shared_data, accepted):
    policy = AcceptancePolicy("collection")
    # order of imports does not matter; a missing module does (a real Kimina-72B file imports only Mathlib)
    reordered = accepted["code"].replace("import Mathlib\nimport Aesop", "import Aesop\nimport Mathlib")
    assert policy.precheck(reordered).ok
    rows = [
        json.loads(line)
        for line in open(shared_data / "candidates/kimina_prover_72b_minif2f_test_solved_0710_additional.jsonl")
    ]
    only_mathlib = [r for r in rows if r["lean_file"].startswith("import Mathlib\n\n")]
    assert only_mathlib
    for row in only_mathlib:
        assert codes(policy.precheck(row["lean_file"]).reasons) == {R.HEADER_MISMATCH}
    # a caller-supplied header that matches makes the same file pass
    assert policy.precheck(only_mathlib[0]["lean_file"], header="import Mathlib\n").ok


def test_length_limit_is_exact(accepted):
    policy = AcceptancePolicy("collection")
    base = accepted["code"] + "\n-- "
    at_limit = base + "x" * (policy.profile.max_chars - len(base))
    assert len(at_limit) == 262_144 and policy.precheck(at_limit).ok
    over = at_limit + "x"
    assert codes(policy.precheck(over).reasons) == {R.TOO_LONG}


def test_no_theorem(accepted):
    program = accepted["code"].replace("theorem mathd_algebra_478", "example")
    assert codes(AcceptancePolicy("collection").precheck(program).reasons) == {R.NO_THEOREM}


# ------------------------------------------------------------------ axioms
def test_axiom_parser_on_real_replies(axiom_replies):
    assert len(axiom_replies) >= 8
    kinds = set()
    for target, output in axiom_replies:
        reply = parse_axioms_reply(output)
        assert reply is not None, output
        assert reply.name == target
        assert not any(" " in a or "\n" in a for a in reply.axioms)
        for axiom in reply.disallowed:
            kinds.add(
                "sorry"
                if axiom == "sorryAx"
                else "compiler"
                if "._native." in axiom or axiom.startswith("Lean.")
                else "other"
            )
        if set(reply.axioms) <= {"propext", "Classical.choice", "Quot.sound"}:
            assert reply.disallowed == ()
    # the manual's replies cover every class the policy must refuse, and the multi-line one parses
    assert kinds == {"sorry", "compiler"}
    wrapped = next(o for _, o in axiom_replies if "\n" in o)
    assert parse_axioms_reply(wrapped).axioms[-1].endswith("native_decide.ax_1")
    assert parse_axioms_reply("unknown constant 'foo'") is None


# ------------------------------------------------------------------ statements and trailer
def test_every_minif2f_statement_becomes_a_signature(statements):
    for name, row in statements.items():
        sig = parse_statement(row["formal_statement"], name)
        assert sig.name == name and sig.type and ":=" not in sig.type
        rebuilt = f"theorem {name} {sig.binders} : {sig.type}"
        assert " ".join(rebuilt.split()) in " ".join(row["formal_statement"].split())


def replies_by_kind(axiom_replies) -> dict[str, tuple[str, str]]:
    """The first real ``#print axioms`` reply of each kind: clean, sorry, native (native_decide), compiler."""
    replies = {}
    for target, output in axiom_replies:
        reply = parse_axioms_reply(output)
        kind = (
            "clean"
            if not reply.disallowed
            else "sorry"
            if "sorryAx" in reply.axioms
            else "native"
            if any("._native." in a for a in reply.axioms)
            else "compiler"
        )
        replies.setdefault(kind, (target, output))
    return replies


def _rl_setup(accepted, statements, replay):
    name = accepted["name"]
    request = VerifyRequest(
        program=accepted["code"],
        name=name,
        statement=statements[name]["formal_statement"],
        header=statements[name]["header"],
    )
    policy = AcceptancePolicy("rl")
    submission = policy.prepare(request)
    recorded = replay.answer(accepted["code"])
    # Lean's recorded messages, moved to where they sit in the composed program
    shift = submission.block_lines

    def at(pos):
        return (
            None
            if pos is None
            else Position(pos.line + (shift if pos.line > submission.header_lines else 0), pos.column)
        )

    moved = [LeanMessage(m.severity, m.data, at(m.pos), at(m.end_pos)) for m in recorded.messages]
    return policy, request, submission, recorded, moved


@pytest.fixture(scope="module")
def replay():
    from leanloop.lean.replay import ReplayBackend

    backend = ReplayBackend(["rl_lean"])
    backend.index
    return backend


def test_trailer_judgement_reads_only_trailer_lines(accepted, statements, replay, axiom_replies):
    """Real Lean texts only: the recorded messages of a real accepted program, and real
    ``#print axioms`` replies, placed on the lines of the composed program they would occupy."""
    policy, request, submission, recorded, moved = _rl_setup(accepted, statements, replay)
    assert submission.program.startswith(statements[accepted["name"]]["header"].rstrip())
    assert f"@_root_.{accepted['name']}" in submission.program.splitlines()[submission.check_line - 1]
    assert submission.program.splitlines()[submission.axioms_line - 1].startswith("#print axioms")
    replies = replies_by_kind(axiom_replies)
    assert set(replies) == {"clean", "sorry", "native", "compiler"}

    def judge(message_line: int, kind: str) -> tuple:
        target, output = replies[kind]
        sub = replace(submission, check_name=target)
        reply = LeanMessage("info", output, Position(message_line, 0), Position(message_line, 13))
        response = LeanResponse(ResponseStatus.OK, messages=[*moved, reply], time_s=recorded.time_s)
        outcome = policy.judge(request, sub, response, "test")
        return outcome.category, codes(outcome.reasons), outcome

    category, _, outcome = judge(submission.axioms_line, "clean")
    assert category is Category.VALID
    # messages come back at the candidate's own positions
    assert [(m.data, m.pos) for m in outcome.messages] == [(m.data, m.pos) for m in recorded.messages]
    for kind in ("sorry", "native", "compiler"):
        assert judge(submission.axioms_line, kind)[:2] == (Category.INVALID, {R.AXIOM_NOT_ALLOWED})
    # the same clean reply printed from the candidate's own lines does not count
    candidate_line = submission.header_lines + submission.block_lines + 3
    assert judge(candidate_line, "clean")[:2] == (Category.INVALID, {R.TRAILER_REPLY_MISSING})
    assert judge(submission.trailer_line, "clean")[:2] == (Category.INVALID, {R.TRAILER_REPLY_MISSING})


def test_trailer_errors(accepted, statements, replay, rl_rows):
    policy, request, submission, recorded, moved = _rl_setup(accepted, statements, replay)
    real_error = next(
        m for r in rl_rows if not r["verdict_pass"] for m in replay.answer(r["code"]).messages if m.severity == "error"
    )
    for line, category, code in (
        (submission.trailer_line, Category.INVALID, R.STATEMENT_MISMATCH),
        # on a harness line: the candidate's, until the statement alone reproduces it
        (submission.header_lines + 1, Category.INVALID, R.HARNESS_LINE_ERROR),
    ):
        error = replace(real_error, pos=Position(line, 0), end_pos=Position(line, 5))
        outcome = policy.judge(request, submission, LeanResponse(ResponseStatus.OK, messages=[*moved, error]))
        assert outcome.category is category and codes(outcome.reasons) == {code}
        assert outcome.first_error == real_error.data


def test_compose_layout(accepted, statements):
    name = accepted["name"]
    sig = parse_statement(statements[name]["formal_statement"], name)
    sub = compose(accepted["code"], header=BENCHMARK_HEADER, heartbeats=800_000, signature=sig)
    lines = sub.program.splitlines()
    original = accepted["code"].splitlines()
    assert lines[: sub.header_lines] == original[: sub.header_lines]
    assert lines[sub.header_lines] == "set_option maxHeartbeats 800000"
    assert lines[sub.header_lines + 1].startswith("theorem LeanloopHarness.expected_")
    body = lines[sub.header_lines + sub.block_lines : sub.trailer_line - 1]
    assert body == original[sub.header_lines :]
    assert sub.region(sub.header_lines + 1) == "harness" and sub.region(sub.trailer_line) == "trailer"
    assert sub.candidate_line(sub.header_lines + sub.block_lines + 1) == sub.header_lines + 1


def test_rl_needs_trusted_statement(accepted):
    outcome = AcceptancePolicy("rl").prepare(VerifyRequest(program=accepted["code"], name=accepted["name"]))
    assert outcome.category is Category.INPUT_ERROR and codes(outcome.reasons) == {R.BAD_REQUEST}
    empty = AcceptancePolicy("collection").prepare(VerifyRequest(program="  \n"))
    assert empty.category is Category.INPUT_ERROR


def test_statement_profile_accepts_sorry_but_not_errors():
    """Real REPL recordings: a program whose only complaint is the sorry warning, and one with an error."""
    from leanloop.lean.acceptance.submission import verbatim
    from leanloop.lean.replay import ReplayBackend

    index = ReplayBackend(["repl_io"]).index
    sorry_only = error = None
    for program, recordings in index:
        response = recordings[0].response
        if response.status is not ResponseStatus.OK or "import" in program:
            continue
        severities = {m.severity for m in response.messages}
        if (
            sorry_only is None
            and response.messages
            and all(m.severity == "warning" and "sorry" in m.data for m in response.messages)
            and "theorem" in program
        ):
            sorry_only = (program, response)
        if error is None and "error" in severities and "theorem" in program:
            error = (program, response)
    assert sorry_only and error
    statement = AcceptancePolicy("statement", header="")
    collection = AcceptancePolicy("collection", header="")
    program, response = sorry_only
    assert statement.precheck(program).ok and not collection.precheck(program).ok
    request = VerifyRequest(program=program)
    assert statement.judge(request, verbatim(program), response).category is Category.VALID
    judged = collection.judge(request, verbatim(program), response)
    assert judged.category is Category.INVALID and codes(judged.reasons) == {R.SORRY_WARNING}
    program, response = error
    assert statement.judge(VerifyRequest(program=program), verbatim(program), response).category is Category.INVALID


def test_statement_profile_allows_only_the_sorry_warning():
    """A real REPL recording whose only messages are linter warnings (no error, no sorry): clean
    for `collection`, INVALID for `statement` ("only the sorry warning allowed"), with the reason."""
    from leanloop.lean.acceptance.submission import verbatim
    from leanloop.lean.replay import ReplayBackend

    index = ReplayBackend(["repl_io", "repl_all_versions"]).index
    found = None
    for program, recordings in index:
        response = recordings[0].response
        if (
            response.status is ResponseStatus.OK
            and "theorem" in program
            and response.messages
            and all(m.severity == "warning" and "sorry" not in m.data for m in response.messages)
        ):
            found = (program, response)
            break
    assert found
    program, response = found
    request = VerifyRequest(program=program)
    statement = AcceptancePolicy("statement", header="").judge(request, verbatim(program), response)
    assert statement.category is Category.INVALID and codes(statement.reasons) == {R.WARNING_NOT_ALLOWED}
    assert statement.first_error == response.messages[0].data
    assert (
        AcceptancePolicy("collection", header="").judge(request, verbatim(program), response).category is Category.VALID
    )
    # the sorry warning alone stays allowed, on the same recording with its warnings replaced by sorry's
    sorry = [LeanMessage("warning", "declaration uses 'sorry'", m.pos, m.end_pos) for m in response.messages]
    clean = replace(response, messages=sorry)
    assert AcceptancePolicy("statement", header="").judge(request, verbatim(program), clean).category is Category.VALID


def test_statement_profile_without_header_puts_the_harness_line_before_the_theorem(statements):
    """header=None and no import block: the heartbeat line goes first, never inside a multi-line
    statement; with an import block it follows the imports."""
    multi_line = next(r["formal_statement"] for r in statements.values() if r["formal_statement"].count("\n") > 1)
    program = multi_line + " sorry"
    policy = AcceptancePolicy("statement", header=None)
    composed = policy.prepare(VerifyRequest(program=program))
    assert composed.program == "set_option maxHeartbeats 800000\n" + program
    assert composed.region(1) == "harness" and composed.candidate_line(2) == 1
    with_imports = "import Mathlib\nimport Aesop\n" + program
    composed = policy.prepare(VerifyRequest(program=with_imports))
    assert composed.program == "import Mathlib\nimport Aesop\nset_option maxHeartbeats 800000\n" + program


def test_collection_llf_compiles_with_800000_heartbeats_and_checks_the_statement(accepted, statements, replay):
    """LLF's collection (App. B): the collection prechecks, the candidate compiled with the harness's
    800,000 heartbeats, and "the collection compares pretty-printed signatures and rejects mismatches
    even if the program otherwise compiles" (so a binder renaming is rejected); no check theorem, no
    axiom trailer (that is rl's rule). Real recorded Lean output for the accepted program."""
    request = VerifyRequest(
        program=accepted["code"],
        name=accepted["name"],
        statement=statements[accepted["name"]]["formal_statement"],
        header=statements[accepted["name"]]["header"],
    )
    verbatim_submission = AcceptancePolicy("collection").prepare(request)
    assert not verbatim_submission.composed  # the recorded (verbatim) collection
    policy = AcceptancePolicy("collection_llf")
    assert policy.profile.statement_rule == "signature_text"
    assert AcceptancePolicy("rl").profile.statement_rule == "check_theorem"
    assert AcceptancePolicy("collection").profile.statement_rule == "none"
    submission = policy.prepare(request)
    assert submission.program.splitlines()[submission.header_lines] == "set_option maxHeartbeats 800000"
    assert submission.trailer_line == 0 and "LeanloopHarness" not in submission.program  # no check theorem
    recorded = replay.answer(accepted["code"])
    shift = submission.block_lines

    def moved(messages):
        return [
            LeanMessage(
                m.severity,
                m.data,
                None
                if m.pos is None
                else Position(m.pos.line + (shift if m.pos.line > submission.header_lines else 0), m.pos.column),
            )
            for m in messages
        ]

    def judge(active: AcceptancePolicy, req: VerifyRequest, sub, messages):
        return active.judge(req, sub, LeanResponse(ResponseStatus.OK, messages=moved(messages)), "test")

    assert judge(policy, request, submission, recorded.messages).category is Category.VALID
    sorry = [LeanMessage("warning", "declaration uses 'sorry'", Position(submission.header_lines + 1, 0))]
    assert judge(policy, request, submission, [*recorded.messages, *sorry]).category is Category.INVALID
    # A binder renamed in the candidate's declaration: the printed signature differs, so collection_llf
    # rejects it although it compiles (ASSUMED REPLY: the accepted program's recorded messages, which
    # do not mention the binder); rl's check theorem would accept it (definitional equality).
    binder = re.search(r"\((h\S*) :", statements[accepted["name"]]["formal_statement"]).group(1)
    renamed = replace(request, program=accepted["code"].replace(binder, "hRenamed"))
    wrong = judge(policy, renamed, policy.prepare(renamed), recorded.messages)
    assert wrong.category is Category.INVALID and codes(wrong.reasons) == {R.STATEMENT_MISMATCH}
    assert "signature_text" in wrong.reasons[0]
    # whitespace is not part of the signature: the declaration laid out over more lines passes
    spread = replace(request, program=accepted["code"].replace(f"({binder} :", f"\n    ({binder}  :", 1))
    assert spread.program != request.program
    assert judge(policy, spread, policy.prepare(spread), recorded.messages).category is Category.VALID
    # a type spelled differently beyond what the printer unifies: only Lean's printed signature could
    # say, none is recorded, so it is unavailable, never invalid
    respelled = replace(request, program=accepted["code"].replace(f"({binder} :", f"({binder} : True ∧", 1))
    undecided = judge(policy, respelled, policy.prepare(respelled), recorded.messages)
    assert undecided.category is Category.UNAVAILABLE and codes(undecided.reasons) == {R.SIGNATURE_UNDECIDED}
    assert (
        policy.prepare(VerifyRequest(program=accepted["code"], name=accepted["name"])).category is Category.INPUT_ERROR
    )  # it needs the trusted statement, like rl
