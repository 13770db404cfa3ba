"""KiminaBackend (aiohttp) against the home-made stand-in Kimina server replaying the recorded
/verify replies: only where the real server (test_lean_backend_kimina_real.py) cannot go. The
stand-in counts the HTTP batches the client sends, and on demand drops a connection mid-batch,
answers 429/500, hangs a request, dies and comes back on the same port; the real server does none
of that on request. Everything Lean-side (verdicts, header reuse, timeouts, REPL restarts, API
keys) is tested against the real server.

Expected answers are the recorded replies, read independently through the replay backend.
"""

from __future__ import annotations

import asyncio

import pytest

from leanloop.lean.kimina import KiminaBackend, KiminaBackendConfig
from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.lean.standins.kimina_server import KiminaStandIn
from leanloop.lean.types import ResponseStatus


def _fast(url: str, **options) -> KiminaBackend:
    settings = dict(url=url, timeout=1.0, http_slack_s=0.5, retries=2, backoff_s=0.05, batch_window_s=0.01)
    settings.update(options)
    return KiminaBackend(KiminaBackendConfig(**settings))


async def _serve_and_run(server: KiminaStandIn, programs, concurrency=16, **options):
    url = await server.start()
    backend = _fast(url, **options)
    try:
        return await backend.run_many(programs, concurrency=concurrency), backend
    finally:
        await backend.aclose()
        await server.stop()


def test_every_recorded_reply_matches_the_replay_path(kimina_rows, kimina_replay):
    programs = [r["code"] for r in kimina_rows] + ["theorem unrecorded_here : 3 = 3 := rfl"]
    server = KiminaStandIn()
    responses, backend = asyncio.run(_serve_and_run(server, programs, concurrency=32, batch_size=8))
    assert len(responses) == len(programs)
    for program, response in zip(programs[:-1], responses[:-1]):
        assert response == kimina_replay.answer(program)
    timeouts = [r for r in responses if r.status is ResponseStatus.TIMEOUT]
    assert len(timeouts) == sum(bool(r["server_response"]["results"][0]["error"]) for r in kimina_rows)
    assert responses[-1].status is ResponseStatus.UNAVAILABLE and NO_RECORDED_ANSWER in responses[-1].detail
    # concurrent runs were batched, never above batch_size, nothing sent twice
    assert max(server.batch_sizes) <= 8 and sum(server.batch_sizes) == len(programs)
    assert len(server.batch_sizes) < len(programs) and backend.requests_sent == len(server.batch_sizes)


def test_faults_mid_batch_lose_nothing(kimina_rows, kimina_replay):
    recorded = [r["code"] for r in kimina_rows if not r["server_response"]["results"][0]["error"]][:12]
    dropped, refused, stuck = recorded[1], recorded[5], recorded[8]
    unknown = "theorem unrecorded_here : 3 = 3 := rfl"
    programs = recorded + [unknown]
    server = KiminaStandIn(
        faults=[
            {"when": dropped, "action": "drop", "once": True},
            {"when": refused, "action": "http_429", "once": True},
            {"when": stuck, "action": "hang"},
        ]
    )
    responses, backend = asyncio.run(_serve_and_run(server, programs, batch_size=3, timeout=0.5))
    assert len(responses) == len(programs)
    by_program = dict(zip(programs, responses))
    assert by_program[stuck].status is ResponseStatus.TIMEOUT
    for program in recorded:
        if program != stuck:  # retried (drop, 429) or split out of the stuck batch: Lean's answer
            assert by_program[program] == kimina_replay.answer(program)
    assert by_program[unknown].status is ResponseStatus.UNAVAILABLE
    # the drop and the 429 were re-sent, and the stuck batch was split into single programs
    assert len(server.batch_sizes) > -(-len(programs) // 3) + 2 and 1 in server.batch_sizes


def test_server_restart_is_ridden_out_and_a_dead_server_is_infra_error(kimina_rows, kimina_replay):
    programs = [r["code"] for r in kimina_rows[:6]]

    async def scenario():
        first = KiminaStandIn()
        url = await first.start()
        await first.stop()  # the server dies ...
        backend = _fast(url, retries=5, backoff_s=0.1, batch_size=4)
        batch = asyncio.create_task(backend.run_many(programs))
        await asyncio.sleep(0.3)
        second = KiminaStandIn()  # ... and comes back on the same port
        await second.start(port=int(url.rsplit(":", 1)[1]))
        answered = await batch
        await second.stop()
        await backend.aclose()
        impatient = _fast(url, retries=1, backoff_s=0.01)
        dead = await impatient.run_many(programs[:2])  # nobody listening any more
        await impatient.aclose()
        return answered, dead

    answered, dead = asyncio.run(scenario())
    assert answered == [kimina_replay.answer(p) for p in programs]
    assert [r.status for r in dead] == [ResponseStatus.INFRA_ERROR] * 2
    assert all("talking to" in r.detail for r in dead)


def test_cancel_abandons_the_request_and_the_backend_stays_usable(kimina_rows, kimina_replay):
    stuck, fine = kimina_rows[0]["code"], kimina_rows[2]["code"]

    async def scenario():
        server = KiminaStandIn(faults=[{"when": stuck, "action": "hang"}])
        backend = _fast(await server.start(), timeout=30.0)
        task = asyncio.create_task(backend.run(stuck))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after = await asyncio.wait_for(backend.run(fine), timeout=5)
        await asyncio.sleep(0.05)
        in_flight = len(backend._tasks)
        await backend.aclose()
        await server.stop()
        return after, in_flight

    after, in_flight = asyncio.run(scenario())
    assert after == kimina_replay.answer(fine)
    assert in_flight == 0  # the abandoned HTTP request was cancelled, not left waiting for 30 s


def test_config_errors():
    with pytest.raises(ValueError, match="http"):
        KiminaBackend(url="localhost:12332")
    with pytest.raises(ValueError, match="batch_size"):
        KiminaBackend(batch_size=0)
    with pytest.raises(TypeError):
        KiminaBackend(KiminaBackendConfig(), url="http://x")
