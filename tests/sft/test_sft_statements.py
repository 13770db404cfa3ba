"""One reader for the shipped statement sets (six layouts), and the program split SFT trains on."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from sft.examples import SplitError, split_program, target_theorem
from leanloop.prover.statements import StatementError, read_statements, split_statement

SETS = [
    "minif2f_goedel_prover_v2_repaired.jsonl",
    "minif2f_deepseek_prover_v1.5.jsonl",
    "minif2f_yangky11_lean4.jsonl",
    "proofnet_deepseek_prover_v1.5.jsonl",
    "proofnet_lean4_rahul3613.jsonl",
    "matholympiadbench_goedel_prover_v2.jsonl",
]


@pytest.mark.parametrize("name", SETS)
def test_every_shipped_row_becomes_a_statement(shared_data, name):
    rows = [json.loads(line) for line in (shared_data / "statements" / name).open(encoding="utf-8")]
    statements = read_statements(f"shared://statements/{name}")
    assert len(statements) == len(rows) and not statements.skipped
    assert len({s.name for s in statements.statements}) == len(rows)  # duplicates disambiguated
    for row, statement in zip(rows, statements.statements):
        assert statement.name.split("#")[0] == row["name"]
        assert re.search(r":=\s*by$", statement.statement)
        assert "sorry" not in statement.statement
        assert statement.header.strip().startswith("import")
        # the declared theorem is the one the row's own Lean text declares last
        text = row.get("lean4_code") or row.get("lean_file") or row["formal_statement"]
        assert statement.theorem in text
        assert statement.prompt.endswith(statement.statement)


def test_rl_lean_programs_extend_the_deepseek_prompts_and_split_back(shared_data):
    statements = {
        s.name: s for s in read_statements("shared://statements/minif2f_deepseek_prover_v1.5.jsonl").statements
    }
    path = shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    for row in rows:
        prompt, proof = split_program(row["code"], target_theorem(row["code"], row["name"]))
        assert prompt == statements[row["name"]].prompt  # the prompt the prover was given
        assert prompt + proof == row["code"]


def test_mobench_problem_ids_differ_from_theorem_names():
    statements = read_statements("shared://statements/matholympiadbench_goedel_prover_v2.jsonl")
    renamed = [s for s in statements.statements if s.name != s.theorem]
    assert renamed  # e.g. problem Usa2005P2 declares usa2005_p2
    for statement in renamed:
        assert re.search(rf"theorem\s+{re.escape(statement.theorem)}\b", statement.statement)


def test_bad_statements_fail_clearly():
    with pytest.raises(StatementError, match="no theorem"):
        split_statement("import Mathlib\n\n-- nothing here\n")
    with pytest.raises(StatementError, match="does not end"):
        split_statement("import Mathlib\ntheorem t : True")
    with pytest.raises(SplitError) as error:
        split_program("import Mathlib\ntheorem t : True := trivial", "t")
    assert error.value.kind == "term_mode"
    # a ':=' inside a comment or the docstring is not the statement's end
    program = "import Mathlib\n/-- a := b -/\ntheorem t (h : 1 = 1 -- x := y\n) : True := by\n  trivial"
    prompt, proof = split_program(program, "t")
    assert prompt.endswith(") : True := by") and proof == "\n  trivial"


def test_offline_pass_rate_filter_keeps_zero_exclusive_to_three_quarters(shared_data, artifacts):
    """LLF Section 6's RL problems: 0 < p <= 0.75 from sampled attempts (an sft_eval run's results)."""
    from leanloop.artifacts import Manifest
    from leanloop.prover.pass_rate import PassRateFilter
    from leanloop.prover.statements import StatementsConfig, load_statement_set

    path = "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl"
    names = [s.name for s in read_statements(path).statements[:5]]
    correct = dict(zip(names, [0, 1, 3, 4, 2]))  # of 4 attempts: p = 0, .25, .75, 1, .5
    run = artifacts / "sft_eval" / "probe"
    run.mkdir(parents=True)
    Manifest(stage="sft_eval", run="probe").write(run)
    (run / "results.json").write_text(
        json.dumps(
            {
                "statements": [
                    {"name": n, "attempts": 4, "verified": 4, "correct": c, "categories": {}}
                    for n, c in correct.items()
                ]
            }
        )
    )
    chosen = load_statement_set(StatementsConfig(path=path, pass_rate=PassRateFilter("artifacts://sft_eval/probe")))
    assert [s.name for s in chosen] == [names[1], names[2], names[4]]  # not p = 0, not p = 1, not unmeasured
    with pytest.raises(ValueError, match="low < high"):
        load_statement_set(
            StatementsConfig(path=path, pass_rate=PassRateFilter("artifacts://sft_eval/probe", 0.8, 0.5))
        )
    with pytest.raises(FileNotFoundError, match="sft-eval"):
        load_statement_set(StatementsConfig(path=path, pass_rate=PassRateFilter("artifacts://sft_eval/missing")))
