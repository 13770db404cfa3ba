"""Output extraction on real prover outputs: Kimina-Prover reasoning traces (```lean4 blocks among
```tactics blocks) and RL-Lean completions (DeepSeek-Prover-style continuations of the statement)."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from leanloop.lean.acceptance.masking import mask
from leanloop.prover.extract import extract_program, last_lean_block
from leanloop.prover.statements import read_statements


def _code(program: str) -> str:
    """Program text with comments blanked and whitespace collapsed (what Lean reads)."""
    return " ".join(mask(program).text.split())


@pytest.fixture(scope="module")
def kimina(shared_data):
    path = shared_data / "candidates" / "kimina_prover_preview_minif2f_test_solved.jsonl"
    return [json.loads(line) for line in path.open(encoding="utf-8")]


@pytest.fixture(scope="module")
def goedel():
    return {
        s.name: s for s in read_statements("shared://statements/minif2f_goedel_prover_v2_repaired.jsonl").statements
    }


@pytest.fixture(scope="module")
def dsp():
    return {s.name: s for s in read_statements("shared://statements/minif2f_deepseek_prover_v1.5.jsonl").statements}


def test_kimina_traces_yield_their_accepted_proof(kimina, goedel):
    verbatim = 0
    for row in kimina:
        statement = goedel[row["name"]]
        result = extract_program(
            row["cot"], statement.prompt, statement.header, statement.theorem, allow_continuation=False
        )
        assert result.method == "code_block", (row["name"], result.reason)
        if row["correct_proof"].strip() in row["cot"]:
            verbatim += 1
            assert result.program == row["correct_proof"].rstrip()
        else:  # the published proof differs from the trace's block only in comments / blank lines
            assert _code(result.program) == _code(row["correct_proof"])
    assert verbatim > len(kimina) // 2  # most traces contain the accepted proof verbatim


def test_tactics_blocks_and_drafts_are_not_taken(kimina, goedel):
    row = next(r for r in kimina if "```tactics" in r["cot"])
    statement = goedel[row["name"]]
    # everything before the final lean block: only ```tactics blocks and prose remain
    head = row["cot"][: row["cot"].rindex("```lean4")]
    assert "```tactics" in head and last_lean_block(head) is None
    result = extract_program(head, statement.prompt, statement.header, statement.theorem, allow_continuation=False)
    assert result.program is None and "no complete lean code block" in result.reason
    # two lean blocks: the last one wins
    first = extract_program(row["cot"], statement.prompt, statement.header, statement.theorem)
    twice = "```lean4\n" + statement.prompt + " sorry\n```\n" + row["cot"]
    assert extract_program(twice, statement.prompt, statement.header, statement.theorem).program == first.program


def test_truncated_block_is_reported_not_guessed(kimina, goedel):
    row = kimina[0]
    statement = goedel[row["name"]]
    cut = row["cot"][: row["cot"].rindex("```")]  # generation stopped before the closing fence
    result = extract_program(cut, statement.prompt, statement.header, statement.theorem)
    assert result.program is None
    assert "never closed" in result.reason


def test_block_without_header_gets_the_trusted_header(kimina, goedel):
    row = kimina[0]
    statement = goedel[row["name"]]
    program = last_lean_block(row["cot"]).rstrip()
    body = program[program.index("theorem") :]
    result = extract_program(f"```lean4\n{body}\n```", statement.prompt, statement.header, statement.theorem)
    assert result.program == statement.header + body
    other = extract_program(
        "```lean4\ntheorem other : True := trivial\n```", statement.prompt, statement.header, statement.theorem
    )
    assert other.program is None and statement.theorem in other.reason


def test_rl_lean_completions_continue_the_statement(shared_data, dsp):
    path = shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    for row in rows:
        statement = dsp[row["name"]]
        assert row["code"].startswith(statement.prompt)
        completion = row["code"][len(statement.prompt) :]
        result = extract_program(completion, statement.prompt, statement.header, statement.theorem)
        assert result.method == "continuation"
        assert result.program == row["code"].rstrip()
    # a continuation followed by a stray closing fence is cut at the fence
    statement = dsp[rows[0]["name"]]
    completion = rows[0]["code"][len(statement.prompt) :]
    fenced = extract_program(
        completion + "\n```\nThe proof is complete.", statement.prompt, statement.header, statement.theorem
    )
    assert fenced.program == rows[0]["code"].rstrip()


def test_nothing_to_extract_has_a_reason(goedel):
    statement = next(iter(goedel.values()))
    for completion in ["", "   \n", "```\nnot lean\n```"]:
        result = extract_program(completion, statement.prompt, statement.header, statement.theorem)
        assert result.program is None and result.reason
        assert re.search(r"empty|no lean|no proof", result.reason)
