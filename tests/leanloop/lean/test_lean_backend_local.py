"""LocalBackend through lean-interact's own AutoLeanServer, against the stand-in REPL executable.

The stand-in replays the recorded v4.15.0 REPL transcripts; every expected answer below is read
from those transcripts, so process handling, framing, timeouts, restarts and reply parsing are
lean-interact's real code and the verdicts are Lean's.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from leanloop.lean.local import LocalBackend, LocalBackendConfig, split_header, standin_config
from leanloop.lean.line_shift import shift_messages
from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.lean.reply_rows import messages_from_json, tactics_from_json
from leanloop.lean.standins.repl import prepare_repl_dir
from leanloop.lean.types import ResponseStatus

VERSION = "v4.15.0"


@pytest.fixture(scope="module")
def sessions(shared_data):
    path = shared_data / "lean_repl" / "repl_io_pairs.jsonl"
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    return [list(zip(r["inputs"], r["outputs"])) for r in rows if r["lean_toolchain"].endswith(VERSION)]


def _is_answer(reply: dict) -> bool:
    return "env" in reply and "message" not in reply


@pytest.fixture(scope="module")
def standalone(sessions):
    """program -> recorded reply, for commands run in a fresh REPL (no env), first recording wins."""
    cases: dict[str, dict] = {}
    for pairs in sessions:
        for request, reply in pairs:
            if set(request) == {"cmd"} and _is_answer(reply):
                cases.setdefault(request["cmd"], reply)
    return cases


@pytest.fixture(scope="module")
def with_header(sessions):
    """program -> (recorded reply, lines before the body), for bodies run in an import-only header's env."""
    cases: dict[str, tuple[dict, int]] = {}
    for pairs in sessions:
        (first, first_reply), rest = pairs[0], pairs[1:]
        header = first.get("cmd", "")
        if set(first) != {"cmd"} or not all(line.startswith("import ") for line in header.split("\n")):
            continue
        for request, reply in rest:
            if set(request) == {"cmd", "env"} and request["env"] == first_reply["env"] and _is_answer(reply):
                program = header + "\n" + request["cmd"]
                offset = header.count("\n") + 1
                assert split_header(program) == (header, request["cmd"], offset)
                cases.setdefault(program, (reply, offset))
    return cases


@pytest.fixture(scope="module")
def repl_dir(tmp_path_factory, shared_data):
    return prepare_repl_dir(
        tmp_path_factory.mktemp("repl"), [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], lean_version=VERSION
    )


def _faulty_dir(tmp_path, shared_data, faults):
    return prepare_repl_dir(
        tmp_path / "repl", [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], lean_version=VERSION, faults=faults
    )


def _pick_unrelated(candidates, count, taken):
    """Programs none of which contains another (faults are keyed on a substring of the command)."""
    chosen = list(taken)
    for program in candidates:
        if all(program not in other and other not in program for other in chosen):
            chosen.append(program)
        if len(chosen) == len(taken) + count:
            return chosen[len(taken) :]
    raise AssertionError("not enough unrelated recorded programs")


async def _run_all(backend, programs, timeout=None):
    try:
        return await backend.run_many(programs, timeout=timeout)
    finally:
        await backend.aclose()


def test_recorded_programs_come_back_as_recorded(repl_dir, standalone, with_header):
    plain = [p for p in standalone if not split_header(p)[0]]
    programs = plain + list(with_header)
    assert len(plain) > 20 and len(with_header) >= 3
    backend = LocalBackend(standin_config(repl_dir, workers=2, all_tactics=False, timeout=10))
    responses = asyncio.run(_run_all(backend, programs))
    assert len(responses) == len(programs)
    for program, response in zip(programs, responses):
        reply, offset = with_header[program] if program in with_header else (standalone[program], 0)
        assert response.status is ResponseStatus.OK, (program, response.detail)
        assert response.messages == shift_messages(messages_from_json(reply.get("messages")), offset)
        assert response.lean_version == VERSION
    # header lines were added back: a body-line-1 message sits below the imports
    shifted = [r for p, r in zip(programs, responses) if p in with_header and r.messages]
    assert shifted and all(
        m.pos.line > with_header[p][1]
        for p, r in zip(programs, responses)
        if p in with_header
        for m in r.messages
        if m.pos
    )


def test_tactic_records_only_when_recorded_with_all_tactics(repl_dir, sessions, standalone):
    recorded = {
        req["cmd"]: rep
        for pairs in sessions
        for req, rep in pairs
        if set(req) == {"cmd", "allTactics"} and "tactics" in rep
    }
    assert recorded
    without = next(p for p in standalone if not split_header(p)[0] and p not in recorded)
    backend = LocalBackend(standin_config(repl_dir, all_tactics=True, timeout=10))
    programs = list(recorded) + [without]
    responses = asyncio.run(_run_all(backend, programs))
    for program, response in zip(programs[:-1], responses[:-1]):
        assert response.tactics == tactics_from_json(recorded[program]["tactics"])
        assert response.tactics
    # recorded only without tactic records: no reply is made up for the richer request
    assert responses[-1].status is ResponseStatus.UNAVAILABLE
    assert NO_RECORDED_ANSWER in responses[-1].detail


def test_header_reuse_changes_what_is_sent(repl_dir, standalone, with_header):
    whole = next(p for p in standalone if split_header(p)[0])  # recorded as one command, imports included
    split = next(iter(with_header))  # recorded only as header, then body in its environment
    reuse = LocalBackend(standin_config(repl_dir, all_tactics=False, reuse_header=True))
    single = LocalBackend(standin_config(repl_dir, all_tactics=False, reuse_header=False))
    with_reuse = asyncio.run(_run_all(reuse, [whole, split]))
    without_reuse = asyncio.run(_run_all(single, [whole, split]))
    assert [r.status for r in with_reuse] == [ResponseStatus.UNAVAILABLE, ResponseStatus.OK]
    assert [r.status for r in without_reuse] == [ResponseStatus.OK, ResponseStatus.UNAVAILABLE]
    assert without_reuse[0].messages == messages_from_json(standalone[whole].get("messages"))


def test_faults_mid_batch_lose_nothing(tmp_path, shared_data, standalone, with_header):
    plain = [p for p in standalone if not split_header(p)[0] and len(p) > 25]
    crash_once = next(iter(with_header))  # restart must rebuild the header environment too
    body = split_header(crash_once)[1]
    crash_always, hang, garbage, *normal = _pick_unrelated(plain, 7, [crash_once])
    unknown = "theorem not_recorded_anywhere : 2 + 2 = 4 := rfl"
    programs = [normal[0], crash_once, normal[1], crash_always, hang, normal[2], garbage, unknown, normal[3]]
    for text in (body, crash_always, hang, garbage):
        assert sum(text in p for p in programs) == 1
    faults = [
        {"when": body, "action": "crash", "once": True},
        {"when": crash_always, "action": "crash"},
        {"when": hang, "action": "hang"},
        {"when": garbage, "action": "garbage", "once": True},
    ]
    backend = LocalBackend(
        standin_config(_faulty_dir(tmp_path, shared_data, faults), workers=2, all_tactics=False, crash_retries=1)
    )
    responses = asyncio.run(_run_all(backend, programs, timeout=1.5))
    assert len(responses) == len(programs)
    by_program = dict(zip(programs, responses))
    assert by_program[crash_once].status is ResponseStatus.OK  # retried after the restart
    assert by_program[crash_once].messages == shift_messages(
        messages_from_json(with_header[crash_once][0].get("messages")), with_header[crash_once][1]
    )
    assert by_program[garbage].messages == messages_from_json(standalone[garbage].get("messages"))
    # died every time AFTER the program was sent: the program's doing (hardened policies score 0)
    assert by_program[crash_always].status is ResponseStatus.CANDIDATE_FAILURE
    assert "failed 2 times" in by_program[crash_always].detail
    assert by_program[hang].status is ResponseStatus.TIMEOUT
    assert by_program[unknown].status is ResponseStatus.UNAVAILABLE
    for program in normal[:4]:
        assert by_program[program].status is ResponseStatus.OK
        assert by_program[program].messages == messages_from_json(standalone[program].get("messages"))


def test_cancel_kills_the_repl_and_frees_the_worker(tmp_path, shared_data, standalone):
    plain = [p for p in standalone if not split_header(p)[0] and len(p) > 25]
    hang, fine = _pick_unrelated(plain, 2, [])
    backend = LocalBackend(
        standin_config(
            _faulty_dir(tmp_path, shared_data, [{"when": hang, "action": "hang"}]), workers=1, all_tactics=False
        )
    )

    async def scenario():
        task = asyncio.create_task(backend.run(hang, timeout=60))
        while backend.worker_pids() == [None]:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        hung_pid = backend.worker_pids()[0]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # one worker only: this would wait the full 60 s if the cancelled job still held it
        after = await asyncio.wait_for(backend.run(fine, timeout=10), timeout=15)
        pids = backend.worker_pids()
        await backend.aclose()
        return hung_pid, after, pids

    hung_pid, after, pids = asyncio.run(scenario())
    assert hung_pid is not None and pids[0] not in (None, hung_pid)
    assert after.status is ResponseStatus.OK
    assert after.messages == messages_from_json(standalone[fine].get("messages"))


def test_memory_cap_restarts_the_repl_between_programs(repl_dir, standalone):
    program = next(p for p in standalone if not split_header(p)[0])
    # a cap every process exceeds: AutoLeanServer restarts the REPL before each program
    backend = LocalBackend(standin_config(repl_dir, all_tactics=False, memory_limit_mb=4096, max_process_memory=0.001))

    async def twice():
        first = await backend.run(program, timeout=10)
        pid = backend.worker_pids()[0]
        second = await backend.run(program, timeout=10)
        pids = backend.worker_pids()
        await backend.aclose()
        return first, pid, second, pids[0]

    first, pid, second, pid_after = asyncio.run(twice())
    assert first.messages == second.messages == messages_from_json(standalone[program].get("messages"))
    assert pid is not None and pid_after is not None and pid_after != pid


def test_split_header_and_configuration_errors(tmp_path):
    assert split_header("import Mathlib\n\nimport Aesop\n\ntheorem x : True := trivial") == (
        "import Mathlib\nimport Aesop",
        "theorem x : True := trivial",
        4,
    )
    assert split_header("theorem x : True := trivial") == ("", "theorem x : True := trivial", 0)
    assert split_header("import Mathlib\n") == ("", "import Mathlib\n", 0)
    assert split_header("-- comment\nimport Mathlib\ntheorem x : True := trivial")[0] == ""
    with pytest.raises(ValueError, match="workers"):
        LocalBackend(workers=0)
    broken = LocalBackend(
        LocalBackendConfig(repl_path=str(tmp_path / "missing"), require_mathlib=False, build_repl=False)
    )
    with pytest.raises(RuntimeError, match="Lean backends"):
        asyncio.run(broken.run("theorem x : True := trivial"))


@pytest.mark.lean
def test_real_lean_agrees_with_the_recorded_kimina_replies(shared_data):
    """Runs only with a real Lean + Mathlib project (LEANLOOP_LEAN_PROJECT): the same programs the
    Kimina server checked (Lean v4.15.0) get the same errors, and positions in full-program lines."""
    import os

    from leanloop.lean.replay import ReplayBackend

    if not os.environ.get("LEANLOOP_LEAN_PROJECT"):
        pytest.skip("set LEANLOOP_LEAN_PROJECT to a built Lean v4.15.0 + Mathlib project")
    rows = [json.loads(line) for line in (shared_data / "lean_repl" / "kimina_match_pairs.jsonl").open()]
    programs = [r["code"] for r in rows if not r["server_response"]["results"][0]["error"]][:4]
    backend = LocalBackend(
        LocalBackendConfig(project_dir=os.environ["LEANLOOP_LEAN_PROJECT"], workers=2, timeout=300, all_tactics=True)
    )
    responses = asyncio.run(_run_all(backend, programs))
    replay = ReplayBackend(["kimina_match"])
    for program, response in zip(programs, responses):
        recorded = replay.answer(program)
        assert response.status is ResponseStatus.OK, response.detail
        assert [m.data for m in response.errors] == [m.data for m in recorded.errors]
        if response.lean_version == VERSION:
            assert [(m.data, m.pos) for m in response.messages] == [(m.data, m.pos) for m in recorded.messages]


def test_a_crash_before_the_program_was_sent_stays_infrastructure(tmp_path, shared_data, with_header):
    """The import header's command crashes every time: the program never ran, so the failure is
    the infrastructure's (retryable INFRA_ERROR), not CANDIDATE_FAILURE."""
    program = next(iter(with_header))
    header = split_header(program)[0]
    backend = LocalBackend(
        standin_config(
            _faulty_dir(tmp_path, shared_data, [{"when": header, "action": "crash"}]),
            all_tactics=False,
            crash_retries=1,
        )
    )
    response = asyncio.run(_run_all(backend, [program], timeout=5))[0]
    assert response.status is ResponseStatus.INFRA_ERROR and "failed 2 times" in response.detail


# ------------------------------------------------------------------ fresh_process: one REPL per candidate
# Recorded v4.15.0 REPL sessions Mathlib/test/H20231215 (elaborate the header, pickleTo
# test/H20231215.olean) and H20231215_2 (a NEW REPL: unpickleEnvFrom that file, then a theorem in
# the restored environment): exactly what fresh_process does per program.
PICKLED_HEADER = "import Mathlib\nopen BigOperators\nopen Real\nopen Nat"
PICKLE_PATH = "test/H20231215.olean"


@pytest.fixture(scope="module")
def pickled_body(sessions):
    for pairs in sessions:
        if pairs[0][0] == {"unpickleEnvFrom": PICKLE_PATH}:
            request, reply = pairs[1]
            return request["cmd"], reply
    raise AssertionError("no recorded session restoring the pickled header")


def test_fresh_process_restores_the_header_from_a_pickle_and_keeps_no_process(tmp_path, shared_data, pickled_body):
    from leanloop.lean.local import split_pickled_header

    body, recorded = pickled_body
    program = PICKLED_HEADER + "\n" + body
    assert split_pickled_header(program) == (PICKLED_HEADER, body, 4)
    root = prepare_repl_dir(tmp_path / "repl", [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], VERSION)
    backend = LocalBackend(
        standin_config(root, all_tactics=False, fresh_process=True, header_pickles={PICKLED_HEADER: PICKLE_PATH})
    )

    async def scenario():
        first = await backend.run(program, timeout=10)
        alive_after_first = backend.worker_pids()
        second = await backend.run(program, timeout=10)  # a new process again, from the same pickle
        return first, alive_after_first, second

    first, alive, second = asyncio.run(scenario())
    assert alive == [None]  # the process that ran the program is gone
    expected = shift_messages(messages_from_json(recorded.get("messages")), 4)
    for response in (first, second):
        assert response.status is ResponseStatus.OK, response.detail
        assert response.messages == expected  # Lean's recorded reply, positions in the full program
    assert (root / PICKLE_PATH).exists()  # written once by the builder REPL's pickleTo


def test_fresh_process_without_a_recorded_pickle_is_unavailable(tmp_path, shared_data, pickled_body):
    body, _ = pickled_body
    root = prepare_repl_dir(tmp_path / "repl", [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], VERSION)
    # pickled under a path no recording used: the stand-in cannot answer; never a verdict, never
    # the candidate's failure
    backend = LocalBackend(
        standin_config(root, all_tactics=False, fresh_process=True, pickle_dir=str(tmp_path / "pickles"))
    )
    response = asyncio.run(backend.run(PICKLED_HEADER + "\n" + body, timeout=10))
    assert response.status is ResponseStatus.UNAVAILABLE and NO_RECORDED_ANSWER in response.detail


def test_fresh_process_a_program_that_kills_its_repl_is_a_candidate_failure(tmp_path, shared_data, pickled_body):
    body, _ = pickled_body
    root = _faulty_dir(tmp_path, shared_data, [{"when": body, "action": "crash"}])
    backend = LocalBackend(
        standin_config(
            root, all_tactics=False, fresh_process=True, crash_retries=1, header_pickles={PICKLED_HEADER: PICKLE_PATH}
        )
    )
    response = asyncio.run(backend.run(PICKLED_HEADER + "\n" + body, timeout=10))
    assert response.status is ResponseStatus.CANDIDATE_FAILURE and "failed 2 times" in response.detail
    assert backend.worker_pids() == [None]


def test_fresh_process_a_forged_reply_before_the_real_one_is_a_candidate_failure(tmp_path, shared_data, pickled_body):
    """The program's code writes a clean-looking reply to stdout; lean-interact reads it as THE
    reply, the REPL's real reply follows it on the channel: not Lean's answer to the request."""
    body, _ = pickled_body
    root = _faulty_dir(tmp_path, shared_data, [{"when": body, "action": "forge"}])
    backend = LocalBackend(
        standin_config(root, all_tactics=False, fresh_process=True, header_pickles={PICKLED_HEADER: PICKLE_PATH})
    )
    response = asyncio.run(backend.run(PICKLED_HEADER + "\n" + body, timeout=10))
    assert response.status is ResponseStatus.CANDIDATE_FAILURE and "more than one reply" in response.detail


def _fresh_run(tmp_path, shared_data, body, faults, **options):
    """One program in a fresh_process backend over the recorded pickle, with stand-in faults."""
    backend = LocalBackend(
        standin_config(
            _faulty_dir(tmp_path, shared_data, faults),
            all_tactics=False,
            fresh_process=True,
            header_pickles={PICKLED_HEADER: PICKLE_PATH},
            **options,
        )
    )
    return asyncio.run(backend.run(PICKLED_HEADER + "\n" + body, timeout=10))


def test_fresh_process_a_forged_reply_then_exit_is_a_candidate_failure(tmp_path, shared_data, pickled_body):
    """The program's code writes a clean-looking reply and ends the process (`IO.Process.exit 0`):
    lean-interact returns the forged bytes at end of file and nothing follows them on the channel.
    The channel probe (a `#print` of a fresh nonce) gets no reply: not Lean's answer."""
    body, _ = pickled_body
    response = _fresh_run(tmp_path, shared_data, body, [{"when": body, "action": "forge_exit"}], reply_drain_timeout=5)
    assert response.status is ResponseStatus.CANDIDATE_FAILURE and "probe" in response.detail, response.detail


def test_fresh_process_a_refusal_after_the_program_was_sent_is_a_candidate_failure(tmp_path, shared_data, pickled_body):
    """A REPL-level refusal of the program (an exception its code threw out of the REPL's command
    loop) scores 0: it is not retried, not UNAVAILABLE, not re-run verbatim."""
    body, _ = pickled_body
    # ASSUMED REPLY: the REPL refusing this program with a recorded v4.15.0 refusal text (recorded
    # for a tactic request, not for this program)
    refusal = "Lean error:\n`exact?` could not close the goal. Try `apply?` to see partial suggestions."
    response = _fresh_run(tmp_path, shared_data, body, [{"when": body, "action": "refuse", "message": refusal}])
    assert response.status is ResponseStatus.CANDIDATE_FAILURE and "exact?" in response.detail, response.detail


def test_fresh_process_a_timeout_before_the_program_was_sent_stays_infrastructure(tmp_path, shared_data, pickled_body):
    """Unpickling the header hangs: the program never ran, so the timeout is the infrastructure's
    (retryable INFRA_ERROR), not TIMEOUT (which scores 0 under the lean protocol)."""
    body, _ = pickled_body
    response = _fresh_run(tmp_path, shared_data, body, [{"when": PICKLE_PATH, "action": "hang"}], header_timeout=2)
    assert response.status is ResponseStatus.INFRA_ERROR and "before the program was sent" in response.detail


def test_the_token_table_is_read_only_from_a_real_answer(repl_dir):
    """The stand-in has no recording of the token-table command: no table (the harness keeps the
    shipped one and says so), never a guessed one."""
    backend = LocalBackend(standin_config(repl_dir, all_tactics=False))
    assert backend.token_table("import Mathlib") is None


@pytest.mark.lean
def test_real_lean_reports_a_token_table_the_masker_can_use():
    """With a real Lean + Mathlib project: the live table has Mathlib's `[MOD` and core's `(`."""
    import os

    if not os.environ.get("LEANLOOP_LEAN_PROJECT"):
        pytest.skip("set LEANLOOP_LEAN_PROJECT to a built Lean + Mathlib project")
    backend = LocalBackend(
        LocalBackendConfig(project_dir=os.environ["LEANLOOP_LEAN_PROJECT"], workers=1, timeout=300, all_tactics=False)
    )
    table = backend.token_table("import Mathlib")
    assert table is not None and table.origin == "live" and {"[MOD", "(", "⟨"} <= table.tokens
