"""Feedback metrics (seed App. D): invariants by property tests, and behaviour on real traces."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from leanloop.metrics.feedback import (
    FEEDBACK_METRICS,
    anchored_block_keys,
    block_keys,
    feedback_metrics,
    feedback_scores,
    multiset_f1,
    trace_tokens,
)
from leanloop.traces.annotate import annotate
from leanloop.traces.reference_pairs import iter_recorded
from leanloop.lean.replies import parse_response

WORDS = st.sampled_from(["x", "h₁", "⊢", "x + 0 = x", "exact h", "simp", "ℝ", "0 < a", "rfl", "(", "·"])
SOURCE_LINE = st.lists(WORDS, min_size=0, max_size=4).map(lambda ws: " ".join(ws))
PAYLOAD = st.one_of(
    st.lists(WORDS, min_size=1, max_size=3).map(lambda ws: ["-- proof state:", *ws]),
    st.tuples(st.sampled_from(["error", "info"]), WORDS).map(lambda t: [f"-- type: {t[0]}, msg: {t[1]}"]),
)


@st.composite
def traces(draw):
    lines: list[str] = []
    for item in draw(
        st.lists(st.one_of(SOURCE_LINE.map(lambda s: ("src", s)), PAYLOAD.map(lambda p: ("blk", p))), max_size=10)
    ):
        kind, value = item
        if kind == "src":
            lines.append(value)
        else:
            indent = draw(st.sampled_from(["", "  "]))
            lines += [indent + "/- <feedback>", *[indent + v for v in value], indent + "</feedback> -/"]
    return "\n".join(lines)


@settings(max_examples=60, deadline=None)
@given(traces())
def test_identical_traces_score_one(trace):
    assert feedback_scores(trace, trace).to_dict() == {name: 1.0 for name in FEEDBACK_METRICS}


@settings(max_examples=60, deadline=None)
@given(traces(), traces())
def test_bounds_and_symmetry(reference, prediction):
    forward, backward = feedback_scores(reference, prediction), feedback_scores(prediction, reference)
    for name in FEEDBACK_METRICS:
        assert 0.0 <= getattr(forward, name) <= 1.0
        assert getattr(forward, name) == pytest.approx(getattr(backward, name))  # F is symmetric
    assert forward.anchored_block_f1 <= forward.block_f1 + 1e-12  # anchoring can only remove matches


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=12), st.lists(st.integers(0, 5), max_size=12))
def test_multiset_f1(reference, prediction):
    value = multiset_f1(reference, prediction)
    assert value == multiset_f1(prediction, reference)
    assert 0.0 <= value <= 1.0
    if not reference and not prediction:
        assert value == 1.0  # both empty
    elif not reference or not prediction:
        assert value == 0.0  # exactly one empty
    overlap = sum((Counter(reference) & Counter(prediction)).values())
    if reference or prediction:
        assert value == pytest.approx(2 * overlap / (len(reference) + len(prediction)))
    if Counter(reference) == Counter(prediction):
        assert value == 1.0


def test_multiset_counts_repeats():
    assert multiset_f1(["a", "a"], ["a"]) == pytest.approx(2 / 3)
    assert multiset_f1(["a", "b"], ["a", "a"]) == pytest.approx(0.5)


def test_anchor_counts_source_lines_only():
    block = "/- <feedback>\n-- proof state:\n⊢ p\n</feedback> -/"
    left = "theorem t : p := by\n\n" + block + "\n  exact h\n" + block
    right = "theorem t : p := by\n" + block + "\n\n  exact h\n\n" + block
    # Blank lines and earlier blocks do not move the anchor; only non-empty source lines do.
    assert (
        anchored_block_keys(left)
        == anchored_block_keys(right)
        == [(1, "-- proof state: ⊢ p"), (2, "-- proof state: ⊢ p")]
    )
    moved = "theorem t : p := by\n  exact h\n" + block + "\n" + block
    assert feedback_scores(left, moved).block_f1 == 1.0
    assert feedback_scores(left, moved).anchored_block_f1 == 0.5


def test_block_content_collapses_every_whitespace_run():
    """LLF App. D: each block is stripped and every internal whitespace run becomes one space, so a
    block reflowed over other line breaks (or indented differently) still matches."""
    reference = "theorem t : p := by\n/- <feedback>\n-- proof state:\nh : a  = b\n⊢ p\n</feedback> -/\n  exact h"
    reflowed = "theorem t : p := by\n/- <feedback>\n  -- proof state: h : a = b\n\t⊢   p\n</feedback> -/\n  exact h"
    assert block_keys(reference) == block_keys(reflowed) == ["-- proof state: h : a = b ⊢ p"]
    assert feedback_scores(reference, reflowed).block_f1 == 1.0
    assert feedback_scores(reference, reflowed).anchored_block_f1 == 1.0


def test_tokens_are_unicode_and_case_sensitive():
    trace = "/- <feedback>\n-- type: error, msg: h₁ : x ≤ Y\n</feedback> -/"
    assert trace_tokens(trace) == ["-", "-", "type", ":", "error", ",", "msg", ":", "h₁", ":", "x", "≤", "Y"]
    other = trace.replace("Y", "y")
    assert feedback_scores(trace, other).token_f1 == pytest.approx(2 * 12 / 26)


def test_missing_and_blank_references_are_excluded():
    block = "/- <feedback>\n-- type: error, msg: boom\n</feedback> -/"
    result = feedback_metrics([block, None, "  \n", block], [block, block, block, None])
    assert result["n"] == 2 and result["n_excluded"] == 2
    assert result["per_program"][1] is None and result["per_program"][2] is None
    # Per-program averaging: a perfect row and an empty prediction (error disagreement).
    assert result["block_f1"] == pytest.approx(0.5)
    assert result["error_agreement"] == pytest.approx(0.5)
    assert math.isnan(feedback_metrics([None], ["x"])["block_f1"])
    with pytest.raises(ValueError, match="pair up"):
        feedback_metrics(["a"], [])


def test_on_real_reference_traces(shared_data):
    """Reference traces of real replies against themselves and against the copy-the-input baseline
    (the program with no feedback)."""
    references, copies = [], []
    for record in iter_recorded(shared_data, ("repl", "kimina_match", "kimina_demo")):
        response = parse_response(record.reply, record.program)
        if response.status.value == "ok":
            references.append(annotate(record.program, response.messages, response.tactics))
            copies.append(record.program)
    assert len(references) > 200
    itself = feedback_metrics(references, references)
    assert all(itself[name] == 1.0 for name in FEEDBACK_METRICS)
    baseline = feedback_metrics(references, copies)
    with_blocks = [ref for ref in references if block_keys(ref)]
    expected_block = 1 - len(with_blocks) / len(references)  # no blocks predicted: 1 only where none exist
    assert baseline["block_f1"] == pytest.approx(expected_block)
    assert baseline["token_f1"] == pytest.approx(expected_block)
    has_error = sum(1 for ref in references if "-- type: error" in ref)
    assert baseline["error_agreement"] == pytest.approx(1 - has_error / len(references))
