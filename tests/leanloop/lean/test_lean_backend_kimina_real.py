"""KiminaBackend against the REAL Kimina Lean Server (``kimina-ast-server`` 2.1.3 from PyPI) with the
stand-in REPL behind it: batching inside the server, header reuse, health checks, timeouts, REPL
kills and restarts are the server's own code (``leanloop.lean.standins.real_kimina``).

The REPL replays REPL-level sessions derived from the shipped /verify replies
(``kimina_match_pairs.jsonl``, Lean v4.15.0) with the server's own header split; expected answers
are the same replies read independently through the replay backend. A recorded timeout is a REPL
that never answers, so the server's timeout decides it. Skipped only when ``.venv-kimina`` is absent
(``make test`` creates it: ``python -m leanloop.lean.standins.real_kimina setup``).

The home-made stand-in server (test_lean_backend_kimina.py) stays only for what the real one
cannot be made to do on demand: drop a connection mid-batch, answer 429/500, hang an HTTP request,
die and come back on the same port, and count the HTTP batches the client sends.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from leanloop.lean.kimina import KiminaBackend, KiminaBackendConfig
from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.lean.standins.real_kimina import RealKiminaServer, derive_repl_sessions, installed
from leanloop.lean.standins.repl import prepare_repl_dir
from leanloop.lean.types import ResponseStatus

pytestmark = pytest.mark.skipif(
    not installed(),
    reason="the real Kimina server's venv (.venv-kimina) is absent: "
    "run `python -m leanloop.lean.standins.real_kimina setup` (make test does)",
)

CRASH_PROBE = "theorem leanloop_crash_probe : 1 = 1 := rfl"  # the stand-in REPL dies on this command
MAX_REPLS = 2


@pytest.fixture(scope="session")
def recorded_repl(tmp_path_factory):
    """A stand-in REPL directory answering the derived sessions; recorded timeouts hang."""
    root = tmp_path_factory.mktemp("kimina_real")
    sessions, timeouts = derive_repl_sessions(root / "sessions.jsonl")
    faults = [{"when": body, "action": "hang"} for body in timeouts] + [{"when": CRASH_PROBE, "action": "crash"}]
    return prepare_repl_dir(root / "repl", [sessions], faults=faults), root


@pytest.fixture(scope="session")
def real_server(recorded_repl):
    """One server for the session (start-up is seconds); stopped with every REPL it started."""
    repl, root = recorded_repl
    server = RealKiminaServer(repl, root / "server", max_repls=MAX_REPLS)
    server.start()
    yield server
    server.stop()


def _backend(url: str, **options) -> KiminaBackend:
    # 3 s: the server's timeout covers a new REPL's start-up too (a loaded 2-core CI box); each
    # recorded timeout costs this much
    settings = dict(url=url, timeout=3.0, http_slack_s=10.0, retries=1, backoff_s=0.05, batch_window_s=0.01)
    settings.update(options)
    return KiminaBackend(KiminaBackendConfig(**settings))


async def _run(url: str, programs: list[str], concurrency: int = 16, **options):
    backend = _backend(url, **options)
    try:
        return await backend.run_many(programs, concurrency=concurrency)
    finally:
        await backend.aclose()


def _verdict(response):
    """What Lean said (the server's own stopwatch differs from the recorded one)."""
    return response.status, response.messages, response.tactics


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _reuses(server: RealKiminaServer) -> int:
    """REPLs the server handed out again for the same header (health-checked first), from its log."""
    return server.log_path.read_text(errors="replace").count("Reusing (started) REPL")


def _settles(condition, seconds: float = 5.0) -> bool:
    """The server closes replaced REPLs in background tasks: give them a moment."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_every_recorded_reply_through_the_real_server(real_server, kimina_rows, kimina_replay):
    recorded = [r["code"] for r in kimina_rows]
    unrecorded = "import Mathlib\nimport Aesop\n\ntheorem unrecorded_here : 3 = 3 := rfl\n"
    headerless = "theorem unrecorded_headerless : 3 = 3 := rfl\n"
    started_before = len(real_server.worker_pids())
    reused_before = _reuses(real_server)
    responses = asyncio.run(_run(real_server.url, recorded + [unrecorded, headerless], batch_size=8))
    assert len(responses) == len(recorded) + 2
    timeouts = sum(bool(r["server_response"]["results"][0]["error"]) for r in kimina_rows)
    for program, response in zip(recorded, responses):
        expected = kimina_replay.answer(program)
        assert _verdict(response) == _verdict(expected)
        if expected.status is ResponseStatus.TIMEOUT:  # decided by the server's own timeout, in its words
            assert response.detail == "Lean REPL command timed out in 3.0 seconds"
    assert sum(r.status is ResponseStatus.TIMEOUT for r in responses) == timeouts > 0
    assert sum(bool(r.messages) for r in responses) > 30  # real errors and warnings came through
    for response in responses[-2:]:
        assert response.status is ResponseStatus.UNAVAILABLE and NO_RECORDED_ANSWER in response.detail
    # REPLs were reused across programs with the same header (a timeout, or a program with another
    # header while MAX_REPLS are busy, costs the server a new one), and never more than MAX_REPLS live
    started = len(real_server.worker_pids()) - started_before
    assert timeouts <= started and 4 * started < len(responses)
    assert _reuses(real_server) - reused_before >= len(recorded) // 2  # the server's own log says so
    assert _settles(lambda: sum(map(_alive, real_server.worker_pids())) <= MAX_REPLS)  # the rest were ended


def test_a_crashed_repl_is_replaced_and_nothing_else_is_lost(real_server, kimina_rows, kimina_replay):
    header = "import Mathlib\nimport Aesop\n\n"
    fine = [r["code"] for r in kimina_rows if not r["server_response"]["results"][0]["error"]][:4]
    before = set(real_server.worker_pids())
    responses = asyncio.run(_run(real_server.url, [header + CRASH_PROBE + "\n", *fine], batch_size=5))
    crashed = responses[0]
    assert crashed.status is ResponseStatus.INFRA_ERROR and "Snippet execution failed" in crashed.detail
    assert [_verdict(r) for r in responses[1:]] == [_verdict(kimina_replay.answer(p)) for p in fine]
    after = asyncio.run(_run(real_server.url, fine[:1]))  # the server still answers with fresh REPLs
    assert _verdict(after[0]) == _verdict(kimina_replay.answer(fine[0]))
    assert set(real_server.worker_pids()) - before  # a replacement REPL was started


def test_api_key_is_checked_by_the_real_server(recorded_repl, kimina_rows, kimina_replay, monkeypatch):
    repl, root = recorded_repl
    server = RealKiminaServer(repl, root / "server_with_key", max_repls=1, api_key="s3cret")
    server.start()
    try:
        program = next(r["code"] for r in kimina_rows if not r["server_response"]["results"][0]["error"])
        monkeypatch.delenv("LEAN_SERVER_API_KEY", raising=False)
        without = _backend(server.url)

        async def refused():
            try:
                return await without.run_many([program])
            finally:
                await without.aclose()

        missing = asyncio.run(refused())
        monkeypatch.setenv("LEAN_SERVER_API_KEY", "s3cret")
        ok = asyncio.run(_run(server.url, [program]))
    finally:
        server.stop()
    assert missing[0].status is ResponseStatus.INFRA_ERROR and "401" in missing[0].detail
    assert without.requests_sent == 1  # an auth refusal is not retried
    assert _verdict(ok[0]) == _verdict(kimina_replay.answer(program))
    assert server.worker_pids() and not any(map(_alive, server.worker_pids()))  # stop() ended what it started
