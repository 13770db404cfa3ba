"""The body-line shift of Kimina-style replies, pinned on the real recordings through the backends'
own paths: the same program shape (``import Mathlib\\nimport Aesop\\n\\n...``) needs 3 lines in the
kimina_match replies and 2 in the Kimina demo notebook and the RL-Lean records, and after the
detected shift every message that names its tactic or token points at it in the program."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from dataclasses import replace

import pytest

from leanloop.lean.kimina import KiminaBackend, KiminaBackendConfig
from leanloop.lean.line_shift import header_line_counts
from leanloop.lean.replies import response_from_kimina_result, response_from_rl_lean
from leanloop.lean.standins.kimina_server import KiminaStandIn
from leanloop.lean.types import LeanMessage, ResponseStatus
from leanloop.traces.reference_pairs import iter_kimina_demo


def named_tokens(data: str) -> tuple[str, ...] | None:
    """The token a message says it is about (its span starts there), for the kinds that say one."""
    if data.startswith("linarith failed"):
        return ("linarith", "nlinarith")
    if data.startswith("omega could not"):
        return ("omega",)
    for pattern in (
        r"'([^'\s]+)[^']*' tactic does nothing",
        r"`([^`]+)` has been deprecated",
        r"unused variable `([^`]+)`",
    ):
        if found := re.match(pattern, data):
            return (found.group(1),)
    return None


def landings(program: str, messages: list[LeanMessage]) -> list[bool]:
    """For each message naming a token: whether its span starts at that token in ``program``."""
    lines = program.split("\n")
    out = []
    for message in messages:
        tokens = named_tokens(message.data)
        if tokens is None or message.pos is None:
            continue
        row = message.pos.line - 1
        out.append(0 <= row < len(lines) and lines[row][message.pos.column :].startswith(tokens))
    return out


def applied_shift(raw: list[LeanMessage], placed: list[LeanMessage]) -> set[int]:
    return {p.pos.line - r.pos.line for r, p in zip(raw, placed) if r.pos and p.pos}


def moved(messages: list[LeanMessage], lines: int) -> list[LeanMessage]:
    return [replace(m, pos=replace(m.pos, line=m.pos.line + lines)) for m in messages if m.pos]


@pytest.fixture(scope="module")
def match_rows(shared_data):
    with open(shared_data / "lean_repl/kimina_match_pairs.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_kimina_match_replies_count_from_after_the_blank_line(match_rows):
    """No errors were recorded here (the Goedel proofs compile): the linter and deprecation warnings
    name their tactic or constant instead."""
    hits, misses_with_imports_only, shifted = [], 0, 0
    for row in match_rows:
        result = row["server_response"]["results"][0]
        placed = response_from_kimina_result(result, row["code"])  # what KiminaBackend returns
        if placed.status is not ResponseStatus.OK or not placed.messages:
            continue
        imports, header = header_line_counts(row["code"])
        assert (imports, header) == (2, 3)  # the two rules disagree on every program here
        raw = response_from_kimina_result(result, row["code"], line_offset=0)
        assert applied_shift(raw.messages, placed.messages) == {header}, row["id"]
        shifted += 1
        hits += landings(row["code"], placed.messages)
        misses_with_imports_only += landings(row["code"], moved(raw.messages, imports)).count(False)
    assert shifted >= 40 and len(hits) >= 100 and all(hits)
    assert misses_with_imports_only > 0.75 * len(hits)  # the other rule misplaces most of them


def test_kimina_demo_reply_counts_from_after_the_imports(shared_data, tmp_path):
    """The notebook's failing attempt, answered over HTTP by the stand-in server and read by the
    real KiminaBackend: the linarith error lands on the program's ``nlinarith``, which the fixed
    3-line shift of the match replies would put past the end of the file."""
    (record,) = iter_kimina_demo(shared_data / "lean_repl/kimina_lean_server_demo")
    pairs = tmp_path / "demo_pairs.jsonl"
    pairs.write_text(json.dumps({"code": record.program, "server_response": record.reply}) + "\n", encoding="utf-8")

    async def ask():
        server = KiminaStandIn(pairs=[pairs])
        backend = KiminaBackend(KiminaBackendConfig(url=await server.start(), timeout=5.0))
        try:
            return await backend.run(record.program)
        finally:
            await backend.aclose()
            await server.stop()

    response = asyncio.run(ask())
    assert response.status is ResponseStatus.OK
    raw = response_from_kimina_result(record.reply["results"][0], record.program, line_offset=0)
    imports, header = header_line_counts(record.program)
    assert (imports, header) == (2, 3)
    assert applied_shift(raw.messages, response.messages) == {imports}
    (error,) = response.errors
    assert error.data.startswith("linarith failed")
    lines = record.program.split("\n")
    assert lines[error.pos.line - 1][error.pos.column :].startswith("nlinarith")
    assert landings(record.program, response.messages) == [True, True]  # the deprecation warning too
    assert landings(record.program, moved(raw.messages, header)) == [False, False]


def test_rl_lean_records_count_from_after_the_imports(shared_data):
    hits, misses_with_blank_line, shifted = [], 0, 0
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as handle:
        for line in handle:
            row = json.loads(line)
            placed = response_from_rl_lean(row["compilation_result"], row["code"])  # what the replay backend holds
            if placed.status is not ResponseStatus.OK or not placed.errors:
                continue
            imports, header = header_line_counts(row["code"])
            raw = response_from_rl_lean(row["compilation_result"], row["code"], line_offset=0)
            assert applied_shift(raw.messages, placed.messages) == {imports}, row["custom_id"]
            shifted += 1
            hits += landings(row["code"], placed.errors)
            if header != imports:
                misses_with_blank_line += landings(row["code"], moved(raw.errors, header)).count(False)
    assert shifted > 1000 and len(hits) > 1500 and all(hits)
    assert misses_with_blank_line > 0.75 * len(hits)
