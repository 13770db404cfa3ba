"""Block extraction, the verdict rule and source preservation (seed App. B), on real traces."""

from __future__ import annotations

import gzip
import json

import pytest

from leanloop.traces.annotate import annotate_reply
from leanloop.traces.source import source_preservation
from leanloop.traces.parse import (
    BLOCK_RE,
    extract_blocks,
    parse_payload,
    strip_eos,
    strip_feedback,
    trace_verdict,
    validity_tag,
)


@pytest.fixture(scope="module")
def rl_rows(shared_data):
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line, _ in zip(handle, range(400))]


@pytest.fixture(scope="module")
def failing(rl_rows):
    """A real failing candidate whose error is not on its last line, and its reference trace."""
    for row in rl_rows:
        errors = row["compilation_result"]["errors"]
        if errors and max(e["endPos"]["line"] for e in errors) + 2 < row["code"].rstrip().count("\n") - 2:
            return row, annotate_reply(row["code"], row)
    raise AssertionError("no suitable failing candidate in the first 400 rows")


@pytest.fixture(scope="module")
def state_trace(shared_data):
    """A real valid trace with proof states (REPL v4.15 ``file.lean`` with allTactics)."""
    folder = shared_data / "lean_repl/repl_tests_v4.15.0"
    program = (folder / "file.lean").read_text()
    reply = json.loads((folder / "file.expected.out").read_text())
    return program, annotate_reply(program, reply)


def test_blocks_tags_are_case_insensitive_and_allow_whitespace(state_trace):
    program, trace = state_trace
    block = extract_blocks(trace)[0]
    variants = [
        trace.replace("/- <feedback>", "/-<FEEDBACK>").replace("</feedback> -/", "</Feedback>   -/"),
        trace.replace("/- <feedback>", "/-\n  <feedback>").replace("</feedback> -/", "</feedback>\n-/"),
    ]
    for text in variants:
        blocks = extract_blocks(text)
        assert len(blocks) == 1 and blocks[0].key == block.key
        assert blocks[0].has_state
        assert strip_feedback(text).replace("\n", "").replace(" ", "") == program.replace("\n", "").replace(" ", "")


def test_unclosed_blocks_are_not_blocks(state_trace):
    _, trace = state_trace
    block = extract_blocks(trace)[0]
    cut = trace[: block.end - len("</feedback> -/")]  # generation stopped inside the block
    assert extract_blocks(cut) == []
    assert strip_feedback(cut) == cut
    # An opener with no closer before another complete block: only the complete one counts.
    doubled = trace[: block.start] + "/- <feedback>\n-- proof state:\n" + trace[block.start :]
    blocks = extract_blocks(doubled)
    assert len(blocks) == 1 and blocks[0].key == block.key
    assert [m.span() for m in BLOCK_RE.finditer(doubled)] == [(b.start, b.end) for b in blocks]


def test_payload_round_trip(failing):
    row, trace = failing
    payload = parse_payload(extract_blocks(trace)[-1].body)
    errors = [e for e in row["compilation_result"]["errors"]]
    assert payload.state is None and payload.messages
    assert all(m.severity == "error" for m in payload.messages)
    assert {m.text for m in payload.messages} <= {e["data"].rstrip() for e in errors}


def test_verdict_error_anywhere(failing, rl_rows):
    row, trace = failing
    assert trace_verdict(trace).to_dict() == {"valid": False, "reason": "error_message"}
    # The rule is a regex on the whole text, whatever the spacing and case.
    assert not trace_verdict(row["code"] + "\n-- TYPE :ERROR, msg: x").valid
    assert not trace_verdict(row["code"] + "\n--type: error").valid
    assert trace_verdict(row["code"] + "\n-- type: errors").valid  # \b: "errors" is not "error"
    passing = next(r for r in rl_rows if r["verdict_pass"])
    assert trace_verdict(annotate_reply(passing["code"], passing)).to_dict() == {"valid": True, "reason": "no_error"}


def test_verdict_ends_in_proof_state(state_trace):
    program, trace = state_trace
    block = extract_blocks(trace)[-1]
    ended = trace[: block.end]  # the model announced a goal and stopped
    assert trace_verdict(ended).to_dict() == {"valid": False, "reason": "ends_in_proof_state"}
    assert trace_verdict(ended + "\n\n  <|endoftext|>").reason == "ends_in_proof_state"  # EOS removed first
    assert trace_verdict(ended + "<|im_end|></s>").reason == "ends_in_proof_state"
    assert trace_verdict(ended + "\n  exact rfl\n<|endoftext|>").valid
    assert strip_eos("x\n<|endoftext|>\n") == "x"


def test_output_limit_and_validity_tags(failing, state_trace):
    _, bad = failing
    _, good = state_trace
    assert trace_verdict(good, truncated=True).to_dict() == {"valid": False, "reason": "output_limit"}
    assert trace_verdict(bad + "\n<valid>true</valid>").to_dict() == {"valid": True, "reason": "validity_tag"}
    # The last tag wins; the output limit still beats any tag.
    assert not trace_verdict(good + "<verdict>valid</verdict> <VALID> false </VALID>").valid
    assert trace_verdict(bad + "<valid>false</valid><verdict> Valid </verdict>").valid
    assert trace_verdict(bad + "<valid>true</valid>", truncated=True).reason == "output_limit"
    assert validity_tag(good) is None


def test_source_preservation(failing, state_trace):
    row, trace = failing
    assert source_preservation(trace, row["code"]) == "prefix"
    assert source_preservation(strip_feedback(trace), row["code"]) == "changed"  # no predicted error
    program, good = state_trace
    assert source_preservation(good, program) == "full"
    assert source_preservation(program, program) == "full"  # a copy is full (and predicts valid)
    assert source_preservation(good.replace("exact rfl", "exact (rfl)"), program) == "changed"
    # The inline form and the split form are the same program.
    assert (
        source_preservation("theorem h : f + g = 39 := by\n  exact rfl", "theorem h : f + g = 39 := by exact rfl")
        == "full"
    )
