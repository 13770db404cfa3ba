"""LLF's collection profile (Section 3, App. B): the collection prechecks, the candidate compiled with
800,000 heartbeats and the trusted statement's signature check. Real recorded Lean output only."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace

import pytest

from leanloop.lean.policy import reasons as R
from leanloop.lean.policy.axioms import parse_axioms_reply
from leanloop.lean.policy.policy import AcceptancePolicy
from leanloop.lean.types import Category, LeanMessage, LeanResponse, Position, ResponseStatus, VerifyRequest


@pytest.fixture(scope="module")
def rows(shared_data):
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def statements(shared_data):
    with open(shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl", encoding="utf-8") as fh:
        return {row["name"]: row for row in map(json.loads, fh)}


@pytest.fixture(scope="module")
def replies(shared_data):
    """Real ``#print axioms`` replies by kind (clean / sorry / native)."""
    out = {}
    for row in map(json.loads, open(shared_data / "lean_text/reference_manual_lean_outputs.jsonl")):
        target = re.findall(r"#print axioms (\S+)", row.get("code") or "")
        reply = parse_axioms_reply(row["output"]) if "axioms" in row["output"] and target else None
        if reply is None:
            continue
        kind = ("clean" if not reply.disallowed else "sorry" if "sorryAx" in reply.axioms else
                "native" if any("._native." in a or a == "Lean.ofReduceBool" for a in reply.axioms) else "other")
        out.setdefault(kind, (target[-1], row["output"]))
    return out


def _judge(policy, request, submission, recorded, extra):
    shift = submission.block_lines

    def at(pos):
        return None if pos is None else Position(pos.line + (shift if pos.line > submission.header_lines else 0),
                                                 pos.column)

    moved = [LeanMessage(m.severity, m.data, at(m.pos), at(m.end_pos)) for m in recorded.messages]
    return policy.judge(request, submission, LeanResponse(ResponseStatus.OK, messages=[*moved, *extra]), "test")


def test_collection_llf_compiles_with_800000_heartbeats_and_checks_the_statement(rows, statements, replies):
    from leanloop.lean.replay import ReplayBackend

    replay = ReplayBackend(["rl_lean"])
    row = next(r for r in rows if r["verdict_pass"] and r["name"] == "mathd_algebra_478")
    request = VerifyRequest(program=row["code"], name=row["name"], statement=statements[row["name"]]["formal_statement"],
                            header=statements[row["name"]]["header"])
    verbatim = AcceptancePolicy("collection").prepare(request)
    assert not verbatim.composed and "maxHeartbeats 800000" not in verbatim.program  # the old collection
    policy = AcceptancePolicy("collection_llf")
    submission = policy.prepare(request)
    lines = submission.program.splitlines()
    assert lines[submission.header_lines] == "set_option maxHeartbeats 800000"
    assert submission.trailer_line and submission.check_name
    recorded = replay.answer(row["code"])

    def reply(kind: str, line: int) -> list[LeanMessage]:
        target, output = replies[kind]
        return [LeanMessage("info", output, Position(line, 0), Position(line, 13))]

    sub = replace(submission, check_name=replies["clean"][0])
    assert _judge(policy, request, sub, recorded, reply("clean", sub.axioms_line)).category is Category.VALID
    # a proof of another statement: the check theorem fails on the trailer line -> invalid
    error = LeanMessage("error", "type mismatch", Position(sub.trailer_line, 0), Position(sub.trailer_line, 5))
    wrong = _judge(policy, request, sub, recorded, [error])
    assert wrong.category is Category.INVALID and {R.code_of(r) for r in wrong.reasons} == {R.STATEMENT_MISMATCH}
    # native_decide is on the seed's collection list: its axioms pass here (not under rl); sorryAx never does
    native = replace(submission, check_name=replies["native"][0])
    assert _judge(policy, request, native, recorded, reply("native", native.axioms_line)).category is Category.VALID
    rl = AcceptancePolicy("rl")
    assert _judge(rl, request, native, recorded, reply("native", native.axioms_line)).category is Category.INVALID
    sorry = replace(submission, check_name=replies["sorry"][0])
    assert _judge(policy, request, sorry, recorded, reply("sorry", sorry.axioms_line)).category is Category.INVALID
    # and it needs the trusted statement, like rl
    missing = policy.prepare(VerifyRequest(program=row["code"], name=row["name"]))
    assert missing.category is Category.INPUT_ERROR
