"""LeanSession, state by state, through lean-interact's real AutoLeanServer against the stand-in REPL
replaying the recorded HEAD (v4.33.0-rc2) REPL test transcripts; every expected answer is read from
those transcripts (the pinned lean-interact reads ``proofStatus``, which only HEAD recordings carry).
"""

from __future__ import annotations

import json
import time

import psutil
import pytest

from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.lean.session import LeanSession, by_sorry, launch_repl, standin_session_config
from leanloop.lean.standins.repl import prepare_repl_dir
from leanloop.lean.types import ResponseStatus

HEAD = "v4.33.0-rc2"
README = "def f (x : Unit) : Nat := by sorry"  # repl test "readme": then `apply Int.natAbs`, `exact -37`
HEADER = "import Mathlib.Tactic.Cases"  # repl test "Mathlib/test/H20231115"
IN_HEADER = "example {x : Nat} : x + 1 > x := by sorry"


@pytest.fixture(scope="module")
def recorded(shared_data):
    """requests -> the [(request, reply), ...] of the recorded HEAD session that starts with them."""
    sessions = []
    for line in (shared_data / "lean_repl" / "repl_io_pairs.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        if row["lean_toolchain"].endswith(HEAD):
            sessions.append(list(zip(row["inputs"], row["outputs"])))

    def find(*requests):
        return next(pairs for pairs in sessions if [request for request, _ in pairs[: len(requests)]] == list(requests))

    return find


def _session(tmp_path, shared_data, faults=None, **options) -> LeanSession:
    root = prepare_repl_dir(
        tmp_path / "repl", [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], lean_version=HEAD, faults=faults
    )
    options.setdefault("timeout", 20)
    return LeanSession(standin_session_config(root, lean_version=HEAD, parallel_elaboration=False, **options))


def _messages(answer):
    return [m.model_dump(by_alias=True, exclude_none=True) for m in answer.messages]


def test_a_new_session_starts_nothing_then_answers_commands_and_steps_as_recorded(tmp_path, shared_data, recorded):
    pairs = recorded({"cmd": README})
    launched = []

    def launcher(repl_config, config):  # the hook a sandbox wraps: every REPL process starts here
        launched.append(config)
        return launch_repl(repl_config, config)

    session = _session(tmp_path, shared_data)
    session.launcher = launcher
    try:
        assert session.server is None and session.pid() is None
        start = session.command(README)
        assert start.ok and start.generation == 0 and session.pid() is not None and launched == [session.config]
        assert _messages(start.answer) == pairs[0][1]["messages"]
        sorry = start.answer.sorries[0]
        assert (sorry.proof_state, sorry.goal) == (0, pairs[0][1]["sorries"][0]["goal"])
        first = session.step(sorry.proof_state, start.generation, "apply Int.natAbs")
        assert first.ok and first.errors() == [] and first.answer.goals == pairs[1][1]["goals"]
        done = session.step(first.answer.proof_state, first.generation, "exact -37")
        assert done.ok and done.answer.proof_status == pairs[2][1]["proofStatus"] == "Completed"
        assert done.answer.goals == [] and len(launched) == 1 and session.generation == 0
    finally:
        session.close()


def test_a_lean_error_reply_is_leans_verdict_on_the_tactic(tmp_path, shared_data, recorded):
    # repl test "unknown_tactic": {"message": "Lean error:\n<input>:1:1: unknown tactic"}
    pairs = recorded({"cmd": "def f : Nat := by sorry"}, {"tactic": "exat 42", "proofState": 0})
    session = _session(tmp_path, shared_data)
    try:
        start = session.command("def f : Nat := by sorry")
        reply = session.step(start.answer.sorries[0].proof_state, start.generation, "exat 42")
        assert reply.status is ResponseStatus.OK and reply.answer is None
        assert reply.lean_error == pairs[1][1]["message"] and reply.errors() == [pairs[1][1]["message"]]
    finally:
        session.close()


def test_refusals_are_no_verdict(tmp_path, shared_data, recorded):
    from lean_interact.interface import LeanError

    session = _session(tmp_path, shared_data)
    try:
        unknown = session.command("theorem not_recorded_anywhere : 2 + 2 = 4 := rfl")
        assert unknown.status is ResponseStatus.UNAVAILABLE and NO_RECORDED_ANSWER in unknown.detail
        # repl test "unknown_environment": the REPL's refusal of an env id it does not have
        refusal = recorded({"cmd": "def f : Nat := by sorry", "env": 5})[0][1]
        assert refusal == {"message": "Unknown environment."}
        assert session.classify(LeanError.model_validate(refusal)).status is ResponseStatus.INFRA_ERROR
    finally:
        session.close()


def test_the_header_is_elaborated_once_per_process_and_survives_a_restart(tmp_path, shared_data, recorded):
    pairs = recorded({"cmd": HEADER})
    session = _session(tmp_path, shared_data)
    try:
        first = session.command(IN_HEADER, header=HEADER)
        second = session.command(IN_HEADER, header=HEADER)
        # the stand-in numbers envs as the REPL does: header 0, first body 1; had the header been
        # sent again it would be env 2 and the second body env 3
        assert first.ok and second.ok and (first.answer.env, second.answer.env) == (1, 2)
        assert first.answer.sorries[0].goal == pairs[1][1]["sorries"][0]["goal"] and len(session.headers) == 1
        session.kill()  # a new process: lean-interact's session cache elaborates the header in it again
        after = session.command(IN_HEADER, header=HEADER)
        assert after.ok and after.generation == 1 and after.answer.env == 1
        split = session.step(after.answer.sorries[0].proof_state, after.generation, "induction' x with x hx")
        assert split.ok and split.answer.goals == pairs[2][1]["goals"]
    finally:
        session.close()


def test_a_header_with_errors_is_leans_answer_and_is_not_cached(tmp_path, shared_data, recorded):
    # a recorded command whose reply has an error, used as the header text
    header = "def f : Nat := by apply Nat.succ"
    reply = recorded({"cmd": header})[0][1]
    session = _session(tmp_path, shared_data)
    try:
        answer = session.command("theorem never_sent : True := trivial", header=header)
        assert answer.ok and answer.header_failed and not session.sent_program
        assert answer.errors() == [m["data"] for m in reply["messages"] if m["severity"] == "error"]
        assert session.headers == {}
    finally:
        session.close()


def test_a_timeout_starts_a_new_generation_and_older_proof_states_are_refused(tmp_path, shared_data):
    session = _session(tmp_path, shared_data, faults=[{"when": "hang_probe", "action": "hang"}], timeout=2)
    try:
        before = session.command(README)
        hung = session.command("theorem hang_probe : True := by sorry")
        assert hung.status is ResponseStatus.TIMEOUT and session.generation == 1
        stale = session.step(before.answer.sorries[0].proof_state, before.generation, "apply Int.natAbs")
        assert stale.status is ResponseStatus.INFRA_ERROR and "restarted" in stale.detail
        again = session.command(README)  # the new process answers
        assert again.ok and again.generation == 1
        assert session.step(again.answer.sorries[0].proof_state, again.generation, "apply Int.natAbs").ok
    finally:
        session.close()


def test_crashes_are_retried_and_then_blamed_on_what_was_sent(tmp_path, shared_data):
    faults = [
        {"when": "(x : Unit)", "action": "crash", "once": True},
        {"when": "Nat.succ", "action": "crash"},
        {"when": "Mathlib.Tactic.Cases", "action": "crash"},
        {"when": "exat", "action": "crash"},
    ]
    session = _session(tmp_path, shared_data, faults=faults, crash_retries=1)
    try:
        once = session.command(README)  # the REPL died once: restarted, the command sent again
        assert once.ok and once.generation == 1
        always = session.command("def f : Nat := by apply Nat.succ")  # dies every time after it was sent
        assert always.status is ResponseStatus.CANDIDATE_FAILURE and "failed 2 times" in always.detail
        header = session.command(IN_HEADER, header=HEADER)  # dies on the header: the body never ran
        assert header.status is ResponseStatus.INFRA_ERROR and "failed 2 times" in header.detail
        start = session.command("def f : Nat := by sorry")
        step = session.step(start.answer.sorries[0].proof_state, start.generation, "exat 42")
        assert step.status is ResponseStatus.INFRA_ERROR and session.generation == start.generation + 1
    finally:
        session.close()


def test_a_restart_by_lean_interacts_memory_guard_is_seen(tmp_path, shared_data):
    # a cap every process exceeds: lean-interact kills and restarts the REPL inside every call,
    # without telling its caller
    session = _session(tmp_path, shared_data, memory_limit_mb=4096, max_process_memory=0.001)
    try:
        assert session.repl_config().memory_hard_limit_mb == 4096
        first = session.command(README)
        start = session.command(README)  # a command needs no state of the old process: its reply stands
        assert first.ok and start.ok and start.generation == first.generation + 1
        assert session.server._max_process_memory == 0.001
        step = session.step(start.answer.sorries[0].proof_state, start.generation, "apply Int.natAbs")
        assert step.status is ResponseStatus.INFRA_ERROR and "replaced during the request" in step.detail
        assert session.generation == start.generation + 1
    finally:
        session.close()


def test_a_repl_killed_from_outside_is_restarted_silently_and_seen(tmp_path, shared_data):
    session = _session(tmp_path, shared_data)
    try:
        start = session.command(README)
        process = psutil.Process(session.pid())
        for victim in [*process.children(recursive=True), process]:  # what the kernel's OOM killer does
            victim.kill()
        process.wait(10)
        deadline = time.time() + 10
        while session.server.is_alive() and time.time() < deadline:
            time.sleep(0.05)
        step = session.step(start.answer.sorries[0].proof_state, start.generation, "apply Int.natAbs")
        assert step.status is ResponseStatus.INFRA_ERROR and "replaced during the request" in step.detail
        assert session.generation == start.generation + 1 and session.pid() not in (None, process.pid)
    finally:
        session.close()


def test_close_ends_the_process_and_its_proof_states(tmp_path, shared_data):
    session = _session(tmp_path, shared_data)
    start = session.command(README)
    pid = session.pid()
    session.close()
    assert session.pid() is None and not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    stale = session.step(start.answer.sorries[0].proof_state, start.generation, "apply Int.natAbs")
    assert stale.status is ResponseStatus.INFRA_ERROR
    try:
        assert session.command(README).ok and session.pid() not in (None, pid)
    finally:
        session.close()


def test_by_sorry_takes_the_statement_as_it_is_given():
    expected = "theorem t (x : Nat) : x = x := by sorry"
    for given in (
        "theorem t (x : Nat) : x = x",
        "theorem t (x : Nat) : x = x :=",
        "theorem t (x : Nat) : x = x := by",
        "theorem t (x : Nat) : x = x := by sorry\n",
        "theorem t (x : Nat) : x = x :=\n  by",
    ):
        assert by_sorry(given) == expected, given
