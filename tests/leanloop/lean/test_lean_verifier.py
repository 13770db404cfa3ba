"""The Verifier over the replay backend: both profiles on real programs, concurrency bound,
cancellation (the RL hybrid cut-off), timeouts and backend failures."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from leanloop.lean.acceptance import reasons as R
from leanloop.lean import Verifier
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import Category, LeanBackend, LeanResponse, VerifyRequest


@pytest.fixture(scope="module")
def replay():
    backend = ReplayBackend(["rl_lean"])
    backend.index
    return backend


def recorded(row) -> str:
    if row["compilation_result"].get("system_errors"):
        return "system_error"
    return "pass" if row["verdict_pass"] else "fail"


class DelayedReplay(LeanBackend):
    """The real replay answers, after a delay; counts calls and concurrent calls."""

    name = "delayed-replay"

    def __init__(self, inner: ReplayBackend, delay: float):
        self.inner, self.delay = inner, delay
        self.calls = self.in_flight = self.max_in_flight = 0

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return self.inner.answer(program, timeout)
        finally:
            self.in_flight -= 1


def test_collection_profile_reproduces_recorded_verdicts(replay, rl_rows):
    rows = rl_rows[::7]
    outcomes = Verifier(replay, "collection", concurrency=8).check_sync(
        [VerifyRequest(program=r["code"], name=r["name"]) for r in rows]
    )
    for row, outcome in zip(rows, outcomes):
        kind = recorded(row)
        if kind == "system_error":
            assert outcome.category is Category.TIMEOUT and outcome.label is None
        elif outcome.category is Category.PRECHECK_REJECTED:
            assert kind == "fail"
        else:
            assert outcome.label == (kind == "pass"), (row["name"], outcome.reasons)
        if outcome.category is Category.INVALID:
            first = next(e["data"] for e in row["compilation_result"]["errors"])
            assert outcome.first_error == first  # Lean's first reported error


def test_rl_profile_through_replay_never_guesses(replay, rl_rows, statements):
    rows = rl_rows[:120]
    requests = [
        VerifyRequest(
            program=r["code"],
            name=r["name"],
            statement=statements[r["name"]]["formal_statement"],
            header=statements[r["name"]]["header"],
        )
        for r in rows
    ]
    outcomes = Verifier(replay, "rl", concurrency=8).check_sync(requests)
    seen = Counter()
    for row, outcome in zip(rows, outcomes):
        kind = recorded(row)
        seen[kind, outcome.category] += 1
        if kind == "pass":
            # recordings never include the harness trailer: no axiom reply, so no verdict
            assert outcome.category is Category.UNAVAILABLE
            assert R.code_of(outcome.reasons[0]) == R.NO_TRAILER_REPLY
        elif kind == "fail":
            assert outcome.category in (Category.INVALID, Category.PRECHECK_REJECTED)
        else:
            assert outcome.category is Category.TIMEOUT
    assert seen["pass", Category.UNAVAILABLE] and seen["fail", Category.INVALID]
    unrecorded = requests[0].__class__(**{**requests[0].__dict__, "program": rows[0]["code"] + "\n-- edited"})
    outcome = Verifier(replay, "rl").check_sync([unrecorded])[0]
    assert outcome.category is Category.UNAVAILABLE and R.code_of(outcome.reasons[0]) == R.NO_RECORDING


def test_concurrency_is_bounded_and_order_kept(replay, rl_rows):
    backend = DelayedReplay(replay, 0.01)
    rows = rl_rows[:40]
    outcomes = Verifier(backend, "collection", concurrency=3).check_sync(
        [VerifyRequest(program=r["code"], name=r["name"]) for r in rows]
    )
    assert backend.max_in_flight == 3 and backend.calls == len(rows)
    assert [o.category is Category.VALID for o in outcomes] == [recorded(r) == "pass" for r in rows]


def test_check_one_is_cancellable(replay, rl_rows):
    backend = DelayedReplay(replay, 10.0)
    verifier = Verifier(backend, "collection", concurrency=2)

    async def race():
        task = asyncio.create_task(verifier.check_one(VerifyRequest(program=rl_rows[0]["code"])))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the slot was released: a fast check still goes through on the same verifier
        backend.delay = 0.0
        return await verifier.check_one(VerifyRequest(program=rl_rows[0]["code"]))

    outcome = asyncio.run(race())
    assert outcome.category is Category.VALID and backend.in_flight == 0


def test_hung_or_broken_backend_keeps_the_item(replay, rl_rows, monkeypatch):
    import leanloop.lean.verifier as module

    monkeypatch.setattr(module, "TIMEOUT_GRACE_S", 0.0)
    hung = Verifier(DelayedReplay(replay, 5.0), "collection", timeout=0.05)
    assert hung.check_sync([VerifyRequest(program=rl_rows[0]["code"])])[0].category is Category.TIMEOUT

    class Broken(LeanBackend):
        name = "broken"

        async def run(self, program, timeout=None):
            raise ConnectionResetError("server went away")

    outcome = Verifier(Broken(), "collection").check_sync([VerifyRequest(program=rl_rows[0]["code"])])[0]
    assert outcome.category is Category.INFRA_ERROR and "server went away" in outcome.reasons[0]
    assert outcome.label is None


@pytest.mark.lean
def test_rl_harness_on_real_lean(rl_rows, statements):
    """On a machine with Lean + Mathlib (LEANLOOP_LEAN_PROJECT): the harness block and trailer
    compile, an accepted program is valid, and the same program against a changed trusted
    statement is rejected by the check theorem. Not run here (no Lean toolchain)."""
    import os
    from dataclasses import replace as dc_replace

    from leanloop.lean.backends import make_backend

    project = os.environ.get("LEANLOOP_LEAN_PROJECT")
    backend = make_backend("local", **({"project_dir": project} if project else {}))
    row = next(r for r in rl_rows if r["verdict_pass"] and r["name"] == "mathd_algebra_478")
    trusted = statements[row["name"]]
    request = VerifyRequest(
        program=row["code"], name=row["name"], statement=trusted["formal_statement"], header=trusted["header"]
    )
    changed = dc_replace(request, statement=trusted["formal_statement"].replace("v = 65", "v = 66"))
    assert changed.statement != request.statement
    valid, mismatch = Verifier(backend, "rl", concurrency=1, timeout=900).check_sync([request, changed])
    assert valid.category is Category.VALID, (valid.reasons, valid.first_error)
    assert mismatch.category is Category.INVALID and R.code_of(mismatch.reasons[0]) == R.STATEMENT_MISMATCH


@pytest.mark.lean
def test_rl_isolated_and_capture_proof_on_real_lean(rl_rows, statements):
    """On a machine with Lean + Mathlib: the same harness in a fresh REPL per program (header from
    a pickle) accepts the accepted program, and a program whose theorem sits in a namespace with a
    section variable of the target's name (a capture of the checked name) is rejected on the check line."""
    import os

    from leanloop.lean.backends import make_backend

    project = os.environ.get("LEANLOOP_LEAN_PROJECT")
    backend = make_backend("local", fresh_process=True, **({"project_dir": project} if project else {}))
    row = next(r for r in rl_rows if r["verdict_pass"] and r["name"] == "mathd_algebra_478")
    trusted = statements[row["name"]]
    request = VerifyRequest(
        program=row["code"], name=row["name"], statement=trusted["formal_statement"], header=trusted["header"]
    )
    at = row["code"].index(f"theorem {row['name']}")
    capture = (
        row["code"][:at]
        + "namespace Decoy\n"
        + row["code"][at:]
        + f"\nsection Inner\nvariable ({row['name']} : ∀ b h v : ℝ, False)\n"
    )
    valid, captured = Verifier(backend, "rl", concurrency=1, timeout=900).check_sync(
        [request, VerifyRequest(program=capture, name=row["name"], statement=request.statement, header=request.header)]
    )
    assert valid.category is Category.VALID, (valid.reasons, valid.first_error)
    assert captured.category is Category.INVALID
