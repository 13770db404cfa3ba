"""The feedback evaluator with ``backend: vllm`` on the real engine (vLLM's CPU build, ``make test-vllm``):
greedy traces with n-gram copy-drafting are token-identical to those without, and to the transformers
backend's, on real prover programs (the drafting speedup is ``make bench-feedback``'s to measure)."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def feedback_final(vllm_model, tmp_path_factory):
    """``vllm_model`` as a feedback run's final/ folder (weights, tokenizer, feedback.json)."""
    import shutil

    from feedback_model.config import FeedbackModelCard, TraceFormat

    folder = tmp_path_factory.mktemp("feedback_final") / "final"
    shutil.copytree(vllm_model, folder)
    FeedbackModelCard(TraceFormat(), max_length=1024, base="preset:qwen3-tiny-vllm").write(folder)
    return folder


def test_greedy_traces_are_identical_with_and_without_ngram_drafting(feedback_final, real_programs):
    from feedback_model.config import TraceGenerationConfig
    from feedback_model.evaluator import FeedbackEvaluator
    from feedback_model.speculative import VLLMTraceGenerator

    programs = sorted((p for _, p, _ in real_programs), key=len)[:3]
    options = dict(max_input_tokens=768, max_new_tokens=48)
    runs = {}
    for name, drafts, backend in (("hf", 0, "transformers"), ("plain", 0, "vllm"), ("drafted", 8, "vllm")):
        config = TraceGenerationConfig(
            draft_tokens=drafts,
            backend=backend,
            **options,
            **({"vllm_extra": {"enforce_eager": True}} if backend == "vllm" else {}),
        )
        evaluator = FeedbackEvaluator.load(feedback_final, config)
        if backend == "vllm":
            assert isinstance(evaluator.generator, VLLMTraceGenerator)
            speculative = evaluator.generator.llm.llm_engine.vllm_config.speculative_config
            assert (speculative is not None) == (drafts > 0)
            assert speculative is None or (speculative.method, speculative.num_speculative_tokens) == ("ngram", 8)
        runs[name] = evaluator.score(programs)
        del evaluator
        gc.collect()  # one engine at a time
    for hf, plain, drafted in zip(runs["hf"], runs["plain"], runs["drafted"]):
        assert plain.trace == drafted.trace == hf.trace and plain.new_tokens == drafted.new_tokens == hf.new_tokens
        assert plain.verdict == drafted.verdict == hf.verdict and plain.truncated == drafted.truncated
        assert plain.new_tokens > 0
