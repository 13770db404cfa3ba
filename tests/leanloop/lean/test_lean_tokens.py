"""The token table the masker lexes with: where the shipped one comes from, what the extractor
reads from Lean sources, and the table checked against every recorded real program."""

from __future__ import annotations

import gzip
import json
import re

from leanloop.lean.acceptance import mask
from leanloop.lean.acceptance.tokens import TokenTable, extract_atoms, shipped, token_start
from leanloop.lean.acceptance.lexing import CLASSIC


def test_the_shipped_table_names_its_sources():
    table = shipped()
    assert table.origin == "shipped" and {"[MOD", "[ZMOD", "(", "⟨", "∑'", "⁻¹'"} <= table.tokens
    for part in table.parts:
        assert re.fullmatch(r"[0-9a-f]{40}", part["commit"]) and part["source"] and part["paths"]
        assert not any(not t or t != t.strip() or " " in t for t in part["tokens"]), part["source"]
    manifest = table.manifest()
    assert manifest["sha256"] == table.sha256 and manifest["tokens"] == len(table.tokens)
    assert "tokens" not in manifest["sources"][0]  # the manifest names the sources, not every token


def test_atoms_are_extracted_from_notation_declarations():
    source = (
        'notation:50 a " ≡ " b " [MOD " n "]" => Nat.ModEq n a b\n'
        'infixl:65 " +ᵥ " => HVAdd.hVAdd\n'
        '@[inherit_doc] prefix:max "√" => Real.sqrt\n'
        'syntax (name := foo) "foo! " term : tactic\n'
        'syntax "(" &"proofs" " := " term ")" : term\n'
        'def notation_free := "not an atom"\n'
    )
    assert extract_atoms(source) == {"≡", "[MOD", "]", "+ᵥ", "√", "foo!", "(", ":=", ")"}


def test_maximal_munch_decides_where_a_token_starts():
    table = TokenTable(frozenset({"[", "[MOD", "(", "!", "ᶜ"}), origin="test")
    text = "[MOD'x' (!'y' hᶜ'z' [M'q'"
    at = {c: text.index(c) for c in "xyzq"}
    assert token_start(text, at["x"] - 1, 0, CLASSIC, table) is True  # `[MOD` then a char literal
    assert token_start(text, at["y"] - 1, 8, CLASSIC, table) is True  # `(` `!` then a char literal
    assert token_start(text, at["z"] - 1, 14, CLASSIC, table) is True  # `h` `ᶜ` then a char literal
    assert token_start(text, at["q"] - 1, 20, CLASSIC, table) is False  # `[` then the identifier `M'q'`
    assert token_start("xж'a'", 2, 0, CLASSIC, table) is None  # no token starts with ж: not settled


def _recorded_programs(shared_data):
    """(program, Lean version) of every recorded real program in ../shared/data."""
    candidates = shared_data / "candidates"
    with gzip.open(candidates / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as handle:
        yield from ((r["code"], "v4.9.0-rc1") for r in map(json.loads, handle))
    for name, key in (
        ("kimina_prover_preview_minif2f_test_solved.jsonl", "correct_proof"),
        ("kimina_prover_72b_minif2f_test_solved_0710_additional.jsonl", "lean_file"),
    ):
        with open(candidates / name, encoding="utf-8") as handle:
            yield from ((r.get(key) or r["correct_proof"], "v4.15.0") for r in map(json.loads, handle))
    for name in ("apollo_deepseek_v2_split_prover_minif2f_test.jsonl.gz", "seed_prover_solved.jsonl.gz"):
        with gzip.open(candidates / name, "rt") as handle:
            yield from ((r["program"], r.get("lean_version")) for r in map(json.loads, handle))
    with open(shared_data / "lean_repl/kimina_match_pairs.jsonl", encoding="utf-8") as handle:
        yield from ((r["code"], "v4.15.0") for r in map(json.loads, handle))


def test_no_recorded_real_program_is_refused_and_the_table_has_their_glued_tokens(shared_data):
    """The masker under the shipped table refuses none of the recorded real programs, and every
    Mathlib token of the `[MOD` family (an ASCII symbol running into capitals) that they use is in
    the table."""
    refused, glued = [], set()
    programs = 0
    for program, version in _recorded_programs(shared_data):
        programs += 1
        masked = mask(program, keep_interpolations=True, lean_version=version)
        if masked.ambiguous:
            refused.append(masked.ambiguous)
        glued |= set(re.findall(r"\[[A-Z]*MOD\b", masked.text))
    assert programs > 3500 and not refused, refused[:5]
    assert glued and glued <= shipped().tokens, glued - shipped().tokens
