"""The masker reads identifiers and literals as Lean's lexer does, per Lean version, and refuses
(``ambiguous_lexing``) where it cannot know; checked against an independent reference lexer
(``lean_lexer_reference``) over a confusable alphabet, and against every real recorded Lean
error: none is positioned inside text the masker blanked."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from leanloop.lean.acceptance import AcceptancePolicy, mask
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.acceptance.lexing import CLASSIC, LATIN, TRANSITION, table_for
from leanloop.lean.acceptance.tokens import TokenTable
from leanloop.lean.recordings import SOURCE_ALIASES, load_recordings
from leanloop.lean.types import Category, VerifyRequest

sys.path.insert(0, str(Path(__file__).parent))
from lean_lexer_reference import lex  # noqa: E402

NAME = "mathd_algebra_478"


def codes(reasons):
    return {R.code_of(r) for r in reasons}


def request_for(accepted, statements, program):
    return VerifyRequest(
        program=program, name=NAME, statement=statements[NAME]["formal_statement"], header=statements[NAME]["header"]
    )


def test_version_tables_follow_leans_source():
    assert table_for("v4.9.0-rc1") is CLASSIC and table_for("leanprover/lean4:v4.15.0") is CLASSIC
    assert table_for("v4.33.0-rc2") is LATIN and table_for("v4.20.0") is TRANSITION and table_for(None) is TRANSITION
    # characters Python calls word characters and Lean does not (a modifier letter Mathlib uses as
    # postfix notation, Cyrillic, the excluded Greek λ Π Σ, ×)
    for c in "ᶜʰжλΠΣ×":
        assert c.isalpha() or c == "×"
        assert not any(t.is_id_first(c) or t.is_id_rest(c) for t in (CLASSIC, LATIN, TRANSITION)), c
    assert LATIN.is_id_first("é") and not CLASSIC.is_id_first("é") and TRANSITION.is_disputed("é")
    assert LATIN.is_id_rest("ⱼ") and not CLASSIC.is_id_rest("ⱼ") and not LATIN.is_id_first("ⱼ")
    assert all(t.is_id_first(c) for t in (CLASSIC, LATIN) for c in "αℕ𝒜_x")
    assert all(t.is_id_rest(c) and not t.is_id_first(c) for t in (CLASSIC, LATIN) for c in "₁ₐᵢ'!?0")


HIDDEN = 'set_option debug.skipKernelTC true\nrun_cmd Lean.addDecl default\n-- "\n'


@pytest.mark.parametrize(
    "smuggle",
    [
        "def b := xж'\"'",
        "#check 0x1f'\"'",
        'def d := r#""#',
        'def e := "\\q"',
        "def f := →ₗ'\"'",
        "#check_failurefoo'\"'",
    ],
)
def test_confusable_characters_before_a_quote_are_refused_not_misread(accepted, statements, smuggle):
    program = accepted["code"] + "\n" + smuggle + "\n" + HIDDEN
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED and R.AMBIGUOUS_LEXING in codes(outcome.reasons), smuggle
    # and the payload after it stays visible to the word rules
    assert {R.KERNEL_CHECK_OPTION, R.METAPROGRAM} <= codes(outcome.reasons), (smuggle, outcome.reasons)


# Round 5: Mathlib tokens that start with an ASCII symbol and run into letters. Lean reads
# `[MOD'"'` as the token `[MOD` and a char literal; a reader without the table saw the identifier
# `MOD'`, opened a string at `"` and went blind to everything after it.
ROUND5 = [
    "theorem t : 3 ≡ 0 [MOD'\"'.toNat] := rfl",
    "theorem t : (3 : ℤ) ≡ 0 [ZMOD'\"'.toNat] := rfl",
    "example : a ≡ b [PMOD'\"'.toNat] := sorry",
    "example : x ≡ y [SMOD'\"'.toNat] := sorry",
    "example : f =O['\"'.toNat] g := sorry",
    "theorem aᶜ'\"' := 1",
    "def c := y\\'\"'",
]


@pytest.mark.parametrize("smuggle", ROUND5)
def test_a_literal_after_a_table_token_is_read_as_lean_reads_it(accepted, statements, smuggle):
    program = accepted["code"] + "\n" + smuggle + "\n" + HIDDEN
    outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
    assert outcome.category is Category.PRECHECK_REJECTED
    assert {R.KERNEL_CHECK_OPTION, R.METAPROGRAM} <= codes(outcome.reasons), (smuggle, outcome.reasons)


def test_a_keyword_glued_to_a_table_token_is_a_word():
    from leanloop.lean.acceptance.prechecks import continues_name

    assert not continues_name("[MODsorry", 4) and not continues_name("=O[sorry", 3)


def test_a_char_literal_after_a_bang_is_accepted(accepted, statements):
    """`(!'x'.isDigit)`: the tokens `(` and `!`, then a char literal (round 5: refused before)."""
    program = accepted["code"] + "\ndef d (s : String) : Bool := s.all (fun c => (!'x'.isDigit) || c == c)\n"
    assert mask(program, lean_version="v4.15.0").ambiguous is None
    assert AcceptancePolicy("rl").precheck(program, name=NAME).ok


def test_the_masker_reads_with_the_table_it_is_given():
    """The same text under two tables: the live table decides (a token the shipped table lacks)."""
    from leanloop.lean.acceptance.tokens import TokenTable, shipped

    text = "x ≡ y [QMOD'\"'.1] z\n#eval 1 -- \""
    assert "#eval" not in mask(text).text  # without `[QMOD`: the identifier QMOD' and a string
    live = TokenTable.live([*shipped().tokens, "[QMOD"])
    assert "#eval" in mask(text, tokens=live).text and live.sha256 != shipped().sha256


def test_latin_letters_follow_the_backends_lean_version():
    program = "def é' := 1\ntheorem x : é' = 1 := rfl\n"
    assert mask(program, lean_version="v4.33.0").ambiguous is None
    assert mask("def é'\"' := 1", lean_version="v4.20.0").ambiguous  # the version does not pin é
    # v4.15 reads é as a symbol: `é` then a char literal '"', then code
    assert mask("é'\"' x", lean_version="v4.15.0").text == "é    x"


def test_an_honest_heartbeat_option_under_the_budget_is_accepted(accepted, statements):
    body = accepted["code"]
    at = body.index("theorem")
    for option, ok in [
        ("set_option maxHeartbeats 400000 in\n", True),
        ("set_option maxHeartbeats 800000 in\n", True),
        ("set_option maxHeartbeats 0 in\n", False),
        ("set_option maxHeartbeats 800001 in\n", False),
        ("set_option synthInstance.maxHeartbeats 20000 in\n", False),
    ]:
        program = body[:at] + option + body[at:]
        outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
        assert hasattr(outcome, "trailer_line") is ok, (option, getattr(outcome, "reasons", None))
        if not ok:
            assert R.CANDIDATE_HEARTBEATS in codes(outcome.reasons)


# ------------------------------------------------------------------ against the reference lexer
_PIECES = [
    "a",
    "x",
    "h",
    "é",
    "ⱼ",
    "ᶜ",
    "ж",
    "α",
    "λ",
    "₁",
    "ₗ",
    "→",
    "¬",
    "∑",
    "⁻¹",
    "'",
    "'",
    '"',
    '"',
    "\\",
    "!",
    "?",
    "#",
    "#check",
    ".",
    "r",
    "«",
    "»",
    "-",
    "/",
    "--",
    "/-",
    "-/",
    "0",
    "1",
    "0x",
    "e",
    " ",
    " ",
    "\n",
    "_",
    "(",
    ":=",
    "[",
    "MOD",
    "[MOD",
]
# token tables: what Lean core has, and an adversarial one (a notation token ending in a quote the
# masker does not know, symbol tokens that run into letters and subscripts)
_BENIGN = frozenset(
    {
        "(",
        ")",
        ":=",
        "!",
        "?",
        "#",
        ".",
        "..",
        "-",
        "/",
        "→",
        "¬",
        "∑",
        "''",
        "∑'",
        "⁻¹'",
        "#check",
        "/--",
        "/-!",
        "\\",
        "[",
        "[MOD",
        "ᶜ",
    }
)
_ADVERSARIAL = _BENIGN | {"ᶜ'", "→ₗ", "¬h", "#check_", "\\'", "ж", "∑x", "#checkx", "é", "⁻¹", "[MODx", "!'"}


# derandomize: CI must not turn red on a draw no earlier run made; widen a search locally with
# --hypothesis-seed. The examples are counterexamples such searches found.
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.lists(st.sampled_from(_PIECES), max_size=30), st.sampled_from(["v4.9.0", "v4.15.0", "v4.20.0", "v4.33.0"]))
@example(["'", "\\", "a", "'"], "v4.9.0")  # a char escape Lean rejects: it lexes on inside the literal
def test_masker_agrees_with_the_reference_lexer_or_refuses(pieces, version):
    """Given Lean's token table, the masker reads what Lean's lexer reads, or refuses."""
    text = "".join(pieces)
    table = table_for(version)
    tables = [CLASSIC, LATIN] if table is TRANSITION else [table]
    for tokens in (_BENIGN, _ADVERSARIAL):
        masked = mask(text, lean_version=version, tokens=TokenTable(tokens, origin="test"))
        if masked.ambiguous or masked.unterminated:
            continue  # the rl profile refuses the program
        for lean_table in tables:
            for raw in (True, False):  # raw string literals exist only in newer Lean
                lexed = lex(text, lean_table, tokens, raw_strings=raw)
                cut = len(text) if lexed.error is None else lexed.error
                for p in range(cut):
                    if text[p] in " \n":
                        continue
                    blanked = masked.text[p] == " "
                    assert blanked == (p in lexed.hidden), (text, version, lean_table.name, p, masked.text)


_SCOPED_PIECES = ["[MOD", "[ZMOD", "MOD", "'", "'", '"', "-", "--", "x", "0", " ", "\n", "!", "!'", "∑'", "∑", ".", "]"]
_SCOPED_TABLE = _ADVERSARIAL | {"[ZMOD", "∑'", "∑", "]"}


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    st.lists(st.sampled_from(_SCOPED_PIECES), max_size=24),
    st.sets(st.sampled_from(sorted(TokenTable(frozenset(_SCOPED_TABLE)).scope_sensitive))),
)
@example(["[MOD", "'", "-", "'", "--", " ", "x"], {"[MOD"})  # Lean without `open Nat`: `MOD'`, `-`, '-', code
@example(["[MOD", "'", "x", "'"], {"[MOD"})
def test_the_masker_agrees_with_lean_whichever_scoped_tokens_are_open_or_refuses(pieces, closed):
    """A scoped notation's token exists only where its namespace is open, which the table cannot
    say: given the whole table, the masker reads what Lean reads with any of those tokens absent, or
    refuses. (A reading where Lean's lexer stops is a parse error: it pays nothing.)"""
    text = "".join(pieces)
    masked = mask(text, lean_version="v4.33.0", tokens=TokenTable(frozenset(_SCOPED_TABLE), origin="test"))
    if masked.ambiguous or masked.unterminated:
        return
    lexed = lex(text, LATIN, frozenset(_SCOPED_TABLE - closed))
    if lexed.error is not None:
        return
    for p, c in enumerate(text):
        if c not in " \n":
            assert (masked.text[p] == " ") == (p in lexed.hidden), (text, sorted(closed), p, masked.text)


def test_a_scoped_token_that_changes_a_literal_is_refused_and_plain_uses_are_not(accepted, statements):
    refused = "theorem t (a b n : Nat) : a ≡ b [MOD'-'-- IO.Process.spawn\n n] := sorry"
    assert mask(refused).ambiguous and "[MOD" in mask(refused).ambiguous
    for fine in (
        "theorem t (a b n : Nat) : a ≡ b [MOD n] := sorry",
        "example : (!'x'.isDigit) = true := rfl",
        "theorem t (f : ℕ → ℕ) (s : Set ℕ) : f ⁻¹' s = f ⁻¹' s := rfl",
    ):
        assert mask(fine).ambiguous is None, fine


# ------------------------------------------------------------------ against recorded Lean errors
def _offset(program: str, line: int, column: int) -> int | None:
    lines = program.split("\n")
    if not 1 <= line <= len(lines):
        return None
    if column > len(lines[line - 1]):
        return None
    return sum(len(x) + 1 for x in lines[: line - 1]) + column


_APOLLO_ERROR = re.compile(r"\.lean:(\d+):(\d+): error")


def _recorded_errors(shared_data):
    """(source, program, Lean version, [(line, column)]) for every recorded program with errors."""
    for source in SOURCE_ALIASES:
        try:
            recordings = load_recordings(source)
        except FileNotFoundError:
            continue
        for recording in recordings:
            errors = [
                (m.pos.line, m.pos.column)
                for m in recording.response.messages
                if m.severity == "error" and m.pos is not None
            ]
            if errors:
                yield source, recording.program, recording.response.lean_version, errors
    apollo = shared_data / "candidates/apollo_deepseek_v2_split_prover_minif2f_test.jsonl.gz"
    with gzip.open(apollo, "rt", encoding="utf-8") as handle:
        for row in map(json.loads, handle):
            errors = [(int(a), int(b)) for a, b in _APOLLO_ERROR.findall(row.get("messages") or "")]
            if errors:
                yield "apollo", row["program"], row.get("lean_version"), errors


def test_no_recorded_lean_error_sits_inside_blanked_text(shared_data):
    """Lean reports an error at a token it read as code; the masker must never have blanked it."""
    checked = programs = 0
    bad = []
    for source, program, version, errors in _recorded_errors(shared_data):
        programs += 1
        masked = mask(program, keep_interpolations=True, lean_version=version)
        for line, column in errors:
            at = _offset(program, line, column)
            if at is None or at >= len(program) or program[at] in " \n\t":
                continue
            checked += 1
            if masked.text[at] == " ":
                bad.append((source, line, column, program[at : at + 30]))
    assert programs > 1000 and checked > 3000, (programs, checked)
    assert not bad, bad[:5]


@pytest.mark.lean
def test_real_lean_errors_never_sit_in_blanked_text_of_confusable_programs():
    """Runs only with a real Lean (LEANLOOP_LEAN_PROJECT): programs built from the confusable
    alphabet that the masker does not refuse; wherever Lean reports an error, the masker showed
    code (Lean's own lexer is the reference here)."""
    import asyncio
    import os
    import random

    from leanloop.lean.local import LocalBackend, LocalBackendConfig

    if not os.environ.get("LEANLOOP_LEAN_PROJECT"):
        pytest.skip("set LEANLOOP_LEAN_PROJECT to a built Lean project")
    rng = random.Random(0)
    programs = []
    while len(programs) < 40:
        text = "def z := 0\n" + "".join(rng.choice(_PIECES) for _ in range(20))
        if not (lambda m: m.ambiguous or m.unterminated)(mask(text, lean_version="v4.15.0")):
            programs.append(text)
    backend = LocalBackend(
        LocalBackendConfig(
            project_dir=os.environ["LEANLOOP_LEAN_PROJECT"],
            workers=1,
            timeout=60,
            all_tactics=False,
            require_mathlib=False,
        )
    )

    async def run_all():
        return [await backend.run(p) for p in programs]

    for program, response in zip(programs, asyncio.run(run_all())):
        masked = mask(program, lean_version=response.lean_version).text
        for message in response.errors:
            at = _offset(program, message.pos.line, message.pos.column) if message.pos else None
            if at is not None and at < len(program) and program[at] not in " \n":
                assert masked[at] != " ", (program, message)


def test_word_boundaries_are_leans_not_pythons(accepted, statements):
    """`ᶜ` is a word character to Python and a symbol to Lean: `xᶜLean.Elab…` is `x`, `ᶜ` and the
    name `Lean.Elab…`, so the word rules must see `Elab`; `h'sorry` / `x!sorry` stay identifiers."""
    from leanloop.lean.acceptance.prechecks import continues_name

    assert not continues_name("hᶜsorry", 2) and not continues_name("!sorry", 1) and not continues_name("2sorry", 1)
    assert not continues_name("#checksorry", 6) and not continues_name("''sorry", 2)
    assert continues_name("h'sorry", 2) and continues_name("x!sorry", 2) and continues_name("h₁sorry", 2)
    for glued, code in [
        ("example := Set.univᶜLean.Elab.Term.elabTerm", R.METAPROGRAM),
        ("example := xᶜsorry", R.FORBIDDEN),
        ("#checkby_elab pure ()", R.METAPROGRAM),
    ]:
        program = accepted["code"] + "\n" + glued + "\n"
        outcome = AcceptancePolicy("rl").prepare(request_for(accepted, statements, program))
        assert outcome.category is Category.PRECHECK_REJECTED and code in codes(outcome.reasons), (glued, outcome)
