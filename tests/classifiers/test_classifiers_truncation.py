"""Head+tail truncation: the paper's 2,048 + 6,144 split, exact token windows, one function for both
classifiers (encoder [CLS]/[SEP] and the one-token prompt suffix around it)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from classifiers.model_io import EncoderInputs, OneTokenInputs
from classifiers.truncation import head_tail_sizes, truncate_head_tail


def test_paper_context_keeps_first_2048_and_last_6144():
    assert head_tail_sizes(8192) == (2048, 6144)
    ids = list(range(20_000))
    kept = truncate_head_tail(ids, 8192)
    assert kept[:2048] == ids[:2048] and kept[2048:] == ids[-6144:] and len(kept) == 8192


def test_minilm_context_budget_after_special_tokens():
    # 512 positions minus [CLS] and [SEP] = 510 = 127 head + 383 tail (the same 1:3 split)
    assert head_tail_sizes(510) == (127, 383)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), budget=st.integers(2, 1500))
def test_truncation_is_a_head_and_a_tail(n, budget):
    ids = list(range(n))
    kept = truncate_head_tail(ids, budget)
    if n <= budget:
        assert kept == ids
        return
    head, tail = head_tail_sizes(budget)
    assert len(kept) == budget and head + tail == budget
    assert kept == ids[:head] + ids[n - tail :]
    assert tail >= 3 * head - 3  # 1:3 up to rounding


def test_bad_budget_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        truncate_head_tail([1, 2, 3], 1)


@pytest.fixture(scope="module")
def long_program(real_programs):
    return max((p for _, p, _ in real_programs), key=len)


def test_encoder_input_is_cls_head_tail_sep(long_program):
    from leanloop.training.models import load_tokenizer

    tokenizer = load_tokenizer("minilm")
    inputs = EncoderInputs(tokenizer, max_length=64)
    content = tokenizer(long_program, add_special_tokens=False)["input_ids"]
    assert len(content) > 62  # the real program really is truncated here
    encoded = inputs.encode(long_program)
    head, tail = head_tail_sizes(62)
    assert encoded == [tokenizer.cls_token_id] + content[:head] + content[-tail:] + [tokenizer.sep_token_id]
    # a program that fits is the tokenizer's own encoding, untouched
    short = "theorem t : 1 + 1 = 2 := by norm_num"
    assert inputs.encode(short) == tokenizer(short)["input_ids"]


def test_onetoken_input_is_head_tail_then_suffix(long_program):
    from leanloop.training.models import load_tokenizer

    tokenizer = load_tokenizer("qwen3")  # the real Qwen3 vocabulary (cached per process)
    inputs = OneTokenInputs(tokenizer, max_length=96)
    content = tokenizer(long_program.rstrip(), add_special_tokens=False)["input_ids"]
    suffix = tokenizer(inputs.suffix, add_special_tokens=False)["input_ids"]
    budget = 96 - len(suffix)
    head, tail = head_tail_sizes(budget)
    assert len(content) > budget
    assert inputs.encode(long_program) == content[:head] + content[-tail:] + suffix
    # both verdict words are single tokens of the real Qwen vocabulary
    assert tokenizer.decode([inputs.true_id]) == " true" and tokenizer.decode([inputs.false_id]) == " false"


def test_program_tokens_keep_the_paper_head_and_tail_with_the_suffix_on_top(long_program):
    """LLF Section 4.1 keeps 2,048 + 6,144 PROGRAM tokens; the suffix comes on top (without
    program_tokens it eats into the budget: 2,047 + 6,143 and less). Scaled down: 16 + 48 of 64."""
    from leanloop.training.models import load_tokenizer

    tokenizer = load_tokenizer("qwen3")
    content = tokenizer(long_program.rstrip(), add_special_tokens=False)["input_ids"]
    plain = OneTokenInputs(tokenizer, max_length=64)
    paper = OneTokenInputs(tokenizer, max_length=64 + len(plain.suffix_ids), program_tokens=64)
    assert plain.budget < 64 and paper.budget == 64
    assert paper.encode(long_program) == content[:16] + content[-48:] + plain.suffix_ids
    assert head_tail_sizes(8192) == (2048, 6144)
    with pytest.raises(ValueError, match="must fit in max_length"):
        OneTokenInputs(tokenizer, max_length=64, program_tokens=64)
    encoder = EncoderInputs(load_tokenizer("minilm"), max_length=66, program_tokens=64)
    assert len(encoder.encode(long_program)) == 66
