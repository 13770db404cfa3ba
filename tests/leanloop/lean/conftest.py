"""Recorded Lean data shared by the Lean library's tests (Kimina replies, RL-Lean programs, statements)."""

from __future__ import annotations

import gzip
import json

import pytest

from leanloop.lean.replay import ReplayBackend


@pytest.fixture(scope="module")
def kimina_rows(shared_data):
    """The shipped /verify replies of the Kimina server: ``{id, code, server_response}`` rows."""
    with open(shared_data / "lean_repl" / "kimina_match_pairs.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def kimina_replay():
    """The same replies read through the replay backend: the expected answers."""
    return ReplayBackend(["kimina_match"])


@pytest.fixture(scope="session")
def rl_rows(shared_data):
    """RL-Lean's miniF2F programs with their recorded compilation results."""
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def statements(shared_data):
    """DeepSeek-Prover's miniF2F statements by name."""
    with open(shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl", encoding="utf-8") as fh:
        return {row["name"]: row for row in map(json.loads, fh)}


@pytest.fixture(scope="module")
def accepted(rl_rows):
    """A real program Lean accepted (RL-Lean's mathd_algebra_478), with no comment or string inside its proof."""
    return next(r for r in rl_rows if r["verdict_pass"] and r["name"] == "mathd_algebra_478")
