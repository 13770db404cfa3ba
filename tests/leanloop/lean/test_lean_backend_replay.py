"""ReplayBackend on the real recordings: every expectation is computed from the shipped files."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from dataclasses import replace

import pytest

from leanloop.lean.recordings import SOURCE_ALIASES, load_recordings, normalize_program
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.line_shift import header_line_counts
from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.lean.types import LeanBackend, Position, ResponseStatus


@pytest.fixture(scope="module")
def backend():
    replay = ReplayBackend()
    replay.index  # load once for the module
    return replay


@pytest.fixture(scope="module")
def rl_rows(shared_data):
    path = shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def kimina_rows(shared_data):
    with open(shared_data / "lean_repl" / "kimina_match_pairs.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_every_rl_lean_row_replays_its_recorded_verdict(backend, rl_rows):
    counts = {"pass": 0, "fail": 0, "system": 0}
    assert asyncio.run(backend.run(rl_rows[0]["code"])).status is ResponseStatus.OK
    for line, row in enumerate(rl_rows, 1):
        recordings = backend.lookup(row["code"])
        # duplicates across rounds are all kept; this row is one of them
        (mine,) = [r for r in recordings if r.record_id == f"{row['custom_id']} (line {line})"]
        response = mine.response
        assert backend.answer(row["code"]) == recordings[0].response
        result = row["compilation_result"]
        assert response.lean_version == "v4.9.0-rc1"
        if result.get("system_errors"):
            counts["system"] += 1
            assert response.status is ResponseStatus.TIMEOUT, row["custom_id"]
            assert response.detail == result["system_messages"]
            continue
        assert response.status is ResponseStatus.OK
        recorded = result["errors"] + result["warnings"] + result["infos"]
        assert [m.data for m in response.messages] == [m["data"] for m in recorded]
        assert response.time_s == pytest.approx(result["verify_time"])
        if row["verdict_pass"]:
            counts["pass"] += 1
            assert not response.errors
        else:
            counts["fail"] += 1
            assert response.errors, row["custom_id"]
            # errors come first, in Lean's order: the first error is Lean's first error
            assert response.messages[0].data == result["errors"][0]["data"]
    assert counts["pass"] == sum(r["verdict_pass"] for r in rl_rows)
    assert counts["system"] == sum(bool(r["compilation_result"].get("system_errors")) for r in rl_rows)
    assert sum(counts.values()) == len(rl_rows)


def _lands_on_name(program: str, message) -> bool | None:
    """For messages naming the token they point at, whether the position really points at it."""
    found = re.match(r"unused variable `([^`]+)`", message.data)
    name = found.group(1) if found else ("omega" if message.data.startswith("omega could not") else None)
    if name is None or message.pos is None:
        return None
    lines = program.split("\n")
    line = message.pos.line - 1
    return 0 <= line < len(lines) and lines[line][message.pos.column :].startswith(name)


def test_positions_are_shifted_back_into_the_full_program(backend, rl_rows, kimina_rows):
    """The servers reported body-relative lines; the replayed positions point at the named token."""
    checked = {"rl_lean": [], "kimina": []}
    raw_hits = 0
    # the 2024 server (RL-Lean) left out the import lines, the match-set server also the blank line
    for source, rows, header_part in (("rl_lean", rl_rows, 0), ("kimina", kimina_rows, 1)):
        for row in rows:
            for message in backend.answer(row["code"]).messages:
                hit = _lands_on_name(row["code"], message)
                if hit is None:
                    continue
                checked[source].append(hit)
                recorded = Position(message.pos.line - header_line_counts(row["code"])[header_part], message.pos.column)
                raw_hits += bool(_lands_on_name(row["code"], replace(message, pos=recorded)))
    assert len(checked["rl_lean"]) > 500 and all(checked["rl_lean"])
    assert len(checked["kimina"]) > 20 and all(checked["kimina"])
    # the positions as recorded mostly miss: the shift is what makes them right
    assert raw_hits < 0.2 * (len(checked["rl_lean"]) + len(checked["kimina"]))


def test_kimina_replies_timeouts_and_times(backend, kimina_rows):
    timeouts = 0
    for row in kimina_rows:
        result = row["server_response"]["results"][0]
        response = backend.answer(row["code"])
        assert response.lean_version == "v4.15.0"
        if result["error"]:
            timeouts += 1
            assert response.status is ResponseStatus.TIMEOUT and response.detail == result["error"]
        else:
            assert response.status is ResponseStatus.OK
            assert response.time_s == pytest.approx(result["response"]["time"])
            assert [m.data for m in response.messages] == [m["data"] for m in result["response"].get("messages", [])]
    assert timeouts == sum("timed out" in (r["server_response"]["results"][0]["error"] or "") for r in kimina_rows)
    assert timeouts > 0


def test_repl_transcripts_give_tactic_records_and_versions(backend, shared_data):
    rows = [json.loads(line) for line in open(shared_data / "lean_repl" / "repl_io_pairs.jsonl", encoding="utf-8")]
    seen_tactics = 0
    for row in rows:
        for index, (request, reply) in enumerate(zip(row["inputs"], row["outputs"])):
            if set(request) != {"cmd", "allTactics"} or "tactics" not in reply:
                continue
            (mine,) = [
                r for r in backend.lookup(request["cmd"]) if r.record_id == f"{row['repl_tag']}:{row['test']}#{index}"
            ]
            assert mine.response.lean_version == row["lean_toolchain"].split(":")[-1]
            tactics = mine.response.tactics
            assert [(t.tactic, t.goals, t.pos.line, t.pos.column) for t in tactics] == [
                (t["tactic"], t["goals"], t["pos"]["line"], t["pos"]["column"]) for t in reply["tactics"]
            ]
            seen_tactics += len(tactics)
    assert seen_tactics > 0


def test_conflicting_recordings_are_all_kept_in_source_order(backend, shared_data):
    rows = [json.loads(line) for line in open(shared_data / "lean_repl" / "repl_io_pairs.jsonl", encoding="utf-8")]
    by_program: dict[str, set] = {}
    for row in rows:
        for request, reply in zip(row["inputs"], row["outputs"]):
            if set(request) == {"cmd"}:
                by_program.setdefault(normalize_program(request["cmd"]), set()).add(
                    json.dumps(reply.get("messages", []), sort_keys=True)
                )
    disagreeing = [program for program, replies in by_program.items() if len(replies) > 1]
    assert disagreeing, "the REPL tests record some commands differently across Lean versions"
    program = disagreeing[0]
    recordings = backend.lookup(program)
    assert len({json.dumps([m.to_dict() for m in r.response.messages]) for r in recordings}) > 1
    assert len({r.response.lean_version for r in recordings}) > 1
    fresh = ReplayBackend()
    assert [r.record_id for r in fresh.lookup(program)] == [r.record_id for r in recordings]  # deterministic
    assert backend.answer(program).messages == recordings[0].response.messages
    assert backend.index.conflicting() >= len(disagreeing)


def test_unrecorded_programs_are_unavailable_and_normalization_is_narrow(backend, rl_rows):
    program = rl_rows[0]["code"]
    recorded = backend.answer(program)
    assert backend.answer(program.replace("\n", "   \r\n") + "\n\n").messages == recorded.messages
    missing = backend.answer("theorem never_recorded : 1 + 1 = 2 := by norm_num")
    assert missing.status is ResponseStatus.UNAVAILABLE and missing.detail == NO_RECORDED_ANSWER
    # a leading blank line moves every position: a different program, so no answer
    assert backend.answer("\n" + program).status is ResponseStatus.UNAVAILABLE


def test_returned_responses_are_copies(backend, rl_rows):
    code = next(r["code"] for r in rl_rows if r["compilation_result"].get("errors"))
    first = backend.answer(code)
    count = len(first.messages)
    first.messages.clear()
    assert len(backend.answer(code).messages) == count


def test_honor_timeout_uses_the_recorded_time(rl_rows):
    replay = ReplayBackend(["rl_lean"], honor_timeout=True)
    row = max(
        (r for r in rl_rows if r["compilation_result"].get("verify_time")),
        key=lambda r: r["compilation_result"]["verify_time"],
    )
    recorded = row["compilation_result"]["verify_time"]
    assert replay.answer(row["code"], timeout=recorded / 2).status is ResponseStatus.TIMEOUT
    assert replay.answer(row["code"], timeout=recorded * 2).status is ResponseStatus.OK
    assert replay.answer(row["code"]).status is ResponseStatus.OK


def test_run_many_keeps_order_and_one_answer_each(backend, kimina_rows):
    programs = [r["code"] for r in kimina_rows[:20]] + ["def unknown_program := 0"]
    responses = asyncio.run(backend.run_many(programs, concurrency=4))
    assert isinstance(backend, LeanBackend) and len(responses) == len(programs)
    assert [r.status for r in responses[:-1]] == [backend.answer(p).status for p in programs[:-1]]
    assert responses[-1].status is ResponseStatus.UNAVAILABLE


def test_sources_by_path_and_bad_sources(tmp_path, kimina_rows, shared_data):
    own = tmp_path / "mine.jsonl"
    own.write_text("".join(json.dumps(r) + "\n" for r in kimina_rows[:3]), encoding="utf-8")
    replay = ReplayBackend([str(own)])
    assert len(replay.index) == len({normalize_program(r["code"]) for r in kimina_rows[:3]})
    assert replay.answer(kimina_rows[5]["code"]).status is ResponseStatus.UNAVAILABLE
    assert len(load_recordings(SOURCE_ALIASES["kimina_match"])) == len(kimina_rows)
    with pytest.raises(FileNotFoundError, match="rl_lean"):
        ReplayBackend(["no_such_source"])
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"foo": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="unknown recording format"):
        ReplayBackend([str(odd)]).answer("x")
