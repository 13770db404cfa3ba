"""The statement reader on NuminaMath-LEAN's published format (parquet shards of rows keyed by uuid,
``formal_statement`` with its imports, ``problem`` the informal text): the set NanoProof's RL searches."""

from __future__ import annotations

import pandas as pd
import pytest

from leanloop.prover.statements import read_statements
from leanloop.tool import parse_config
from search.expert_iteration import ExpertIterationConfig, rl_statements

ROWS = [  # the dataset card's columns; statements in its miniF2F-like layout
    {
        "uuid": "0a1b",
        "problem": "Show that 2 + 2 = 4.",
        "question_type": "proof",
        "answer": "proof",
        "author": "human",
        "formal_statement": "import Mathlib\n\ntheorem algebra_1 : (2 : ℕ) + 2 = 4 := by sorry",
        "formal_ground_truth": "import Mathlib\n\ntheorem algebra_1 : (2 : ℕ) + 2 = 4 := by norm_num",
        "ground_truth_type": "complete",
        "formal_proof": None,
        "rl_data": {"n_correct_proofs": 3, "n_proofs": 4, "win_rate": 0.75},
        "source": "olympiads",
        "problem_type": "Algebra",
        "exam": None,
    },
    {
        "uuid": "0a1c",
        "problem": "Find x with x + 1 = 3.",
        "question_type": "math-word-problem",
        "answer": "2",
        "author": "autoformalizer",
        "formal_statement": "import Mathlib\n\ntheorem algebra_1 (x : ℝ) (h : x + 1 = 3) :\n    x = 2 := by sorry",
        "formal_ground_truth": None,
        "ground_truth_type": "statement",
        "formal_proof": None,
        "rl_data": {"n_correct_proofs": 0, "n_proofs": 0, "win_rate": 0.0},
        "source": "cn_k12",
        "problem_type": "Algebra",
        "exam": None,
    },
    {"uuid": "0a1d", "problem": "broken", "formal_statement": "import Mathlib\n-- no declaration"},
]


@pytest.fixture
def shards(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    pd.DataFrame(ROWS[:2]).to_parquet(folder / "train-00000-of-00002.parquet")
    pd.DataFrame(ROWS[2:]).to_parquet(folder / "train-00001-of-00002.parquet")
    return folder


def test_numinamath_lean_shards_are_read_by_uuid(shards):
    read = read_statements(shards)
    assert [s.name for s in read.statements] == ["0a1b", "0a1c"]  # the theorem names repeat; uuids do not
    first, second = read.statements
    assert first.theorem == second.theorem == "algebra_1" and first.header == "import Mathlib\n\n"
    assert first.statement.endswith(":= by") and first.informal == "Show that 2 + 2 = 4."
    assert read.skipped == [{"line": 3, "name": None, "reason": read.skipped[0]["reason"]}]
    assert len(read_statements(shards / "train-00000-of-00002.parquet")) == 2


def test_nanoproof_rl_searches_numinamath_statements_with_lean(shards, tmp_path):
    config, _ = parse_config(ExpertIterationConfig, ["--config", "configs/search/expert_iteration/nanoproof.yaml"])
    assert config.environment == "repl" and "NuminaMath-LEAN" in config.statements and config.budget == 256
    config.statements = str(shards)
    roots = rl_statements(config)
    assert len(roots) == 2 and roots[0].startswith("import Mathlib") and roots[0].endswith(":= by")
    bad = tmp_path / "bad.yaml"
    bad.write_text("environment: repl\n")
    with pytest.raises(ValueError, match="environment repl searches `statements`"):
        parse_config(ExpertIterationConfig, ["--config", str(bad)])
