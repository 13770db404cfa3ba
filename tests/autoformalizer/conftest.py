"""Fixtures of the autoformalizer tests: tiny Qwen3-MoE models, the replay backend, index subsets."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def replay_backend():
    """Real recorded Lean answers (REPL transcripts of v4.8 .. v4.33 and the Kimina replies)."""
    from leanloop.lean.replay import ReplayBackend

    return ReplayBackend(["repl_io", "repl_all_versions"])


@pytest.fixture(scope="session")
def recorded_checker(replay_backend):
    """Statement checks against the recordings: no header and no heartbeat line, so the programs
    Lean saw are exactly the recorded ones."""
    from autoformalizer.typecheck import StatementChecker
    from leanloop.lean.check import LeanConfig

    return StatementChecker(LeanConfig(profile="statement", heartbeats=None), header="", backend=replay_backend)


@pytest.fixture(scope="session")
def rl_lean_errors(shared_data):
    """Every recorded error message of the RL-Lean candidates (Lean v4.9, 2,196 programs)."""
    import ast
    import gzip
    import json

    errors = []
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as handle:
        for row in map(json.loads, handle):
            result = row["compilation_result"]
            result = ast.literal_eval(result) if isinstance(result, str) else result  # stored as a repr
            errors += result.get("errors", [])
    return errors
