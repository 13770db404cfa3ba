"""Fixtures shared by the Kimina backend's tests (stand-in server and real server)."""

from __future__ import annotations

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
