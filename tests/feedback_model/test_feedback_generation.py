"""Greedy generation with and without copy-drafting, the output limit, the input limit, the deadline."""

from __future__ import annotations

import importlib.util
import time

import pytest

from feedback_model.config import TraceFormat, TraceGenerationConfig
from feedback_model.evaluator import FeedbackEvaluator
from feedback_model.generate import HFTraceGenerator, split_completion
from leanloop.traces import trace_verdict


def evaluator(model, tokenizer, **options) -> FeedbackEvaluator:
    config = TraceGenerationConfig(**options)
    return FeedbackEvaluator(HFTraceGenerator(model, tokenizer, config), tokenizer, TraceFormat(), config)


def short_programs(rows, count):
    labelled = [r for r in rows if r["label"] is not None]
    return [r["program"] for r in sorted(labelled, key=lambda r: len(r["program"]))[:count]]


def test_greedy_is_identical_with_and_without_prompt_lookup(tiny_model, qwen_tokenizer, corpus_rows):
    programs = short_programs(corpus_rows, 3)
    forwards = [0]
    hook = tiny_model.register_forward_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    try:
        runs = {}
        for drafts in (0, 8):
            forwards[0] = 0
            runs[drafts] = (
                evaluator(tiny_model, qwen_tokenizer, max_new_tokens=48, draft_tokens=drafts).score(programs),
                forwards[0],
            )
    finally:
        hook.remove()
    (plain, plain_forwards), (drafted, drafted_forwards) = runs[0], runs[8]
    for a, b in zip(plain, drafted):
        assert a.trace == b.trace and a.new_tokens == b.new_tokens and a.truncated == b.truncated
        assert a.verdict == b.verdict and a.reason == b.reason
    # the drafted run really verified drafts: fewer forward passes for the same tokens
    assert drafted_forwards < plain_forwards


def test_reaching_the_output_limit_makes_the_trace_invalid(tiny_model, qwen_tokenizer, corpus_rows):
    programs = short_programs(corpus_rows, 2)
    predictions = evaluator(tiny_model, qwen_tokenizer, max_new_tokens=6).score(programs)
    for prediction in predictions:
        assert prediction.truncated and prediction.new_tokens == 6
        assert prediction.verdict is False and prediction.score == 0.0 and prediction.reason == "output_limit"
    # the text alone would pass the rule: the limit is what made these traces invalid
    assert any(trace_verdict(p.trace).valid for p in predictions)


def test_split_completion_tells_finished_from_truncated():
    eos = 7
    assert split_completion([1, 2, 7], eos, 3) == ([1, 2], True, False)  # ended exactly at the limit
    assert split_completion([1, 2, 3], eos, 3) == ([1, 2, 3], False, True)  # cut by the limit
    assert split_completion([1, 2], eos, 3) == ([1, 2], False, False)  # stopped early (deadline)


def test_over_length_programs_are_rejected_with_a_reason_not_truncated(tiny_model, qwen_tokenizer, corpus_rows):
    programs = short_programs(corpus_rows, 1) + [max((r["program"] for r in corpus_rows), key=len)]
    fmt = TraceFormat()
    lengths = [len(qwen_tokenizer(fmt.prompt(p), add_special_tokens=False)["input_ids"]) for p in programs]
    limit = lengths[0] + 1
    assert lengths[1] > limit
    judged = evaluator(tiny_model, qwen_tokenizer, max_input_tokens=limit, max_new_tokens=8)
    short, long = judged.score(programs)
    assert long.verdict is None and long.score is None and long.trace is None
    assert long.reason.startswith("input_too_long") and str(lengths[1]) in long.reason and str(limit) in long.reason
    assert short.verdict is not None and short.trace is not None
    alone = judged.score(programs[:1])[0]
    assert alone.trace == short.trace  # the rejected neighbour changed nothing


def test_a_passed_deadline_leaves_programs_unscored(tiny_model, qwen_tokenizer, corpus_rows):
    predictions = evaluator(tiny_model, qwen_tokenizer, max_new_tokens=8).score(
        short_programs(corpus_rows, 2), deadline=time.monotonic() - 1.0
    )
    assert all(p.verdict is None and p.reason.startswith("deadline") for p in predictions)


def test_limits_must_fit_the_model_context(tiny_model, qwen_tokenizer):
    context = tiny_model.config.max_position_embeddings
    with pytest.raises(ValueError, match="context"):
        evaluator(tiny_model, qwen_tokenizer, max_input_tokens=context, max_new_tokens=1)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_the_gpu_extra_says_how_to_get_it(saved_feedback_model):
    with pytest.raises(ImportError, match=r"gpu.*extra"):
        FeedbackEvaluator.load(saved_feedback_model, TraceGenerationConfig(backend="vllm", device="cuda", fp8=True))
    with pytest.raises(ValueError, match="fp8"):  # FP8 is a vLLM option, refused on the transformers path
        TraceGenerationConfig(fp8=True)
