"""The real vLLM engine as :mod:`leanloop.vllm_engine` starts it (vLLM's CPU build, ``make test-vllm``):
greedy tokens identical to transformers', and the log-probabilities it returns are those of the
distribution it sampled from (``processed_logprobs``: after temperature), which the GRPO update's
importance-sampling correction divides by."""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def engine(vllm_model):
    from leanloop.vllm_engine import VLLMEngineConfig, start_engine

    llm = start_engine(
        str(vllm_model), VLLMEngineConfig(max_model_len=256, extra={"enforce_eager": True}), dtype="float32"
    )
    yield llm
    del llm  # its engine process ends with it: the next module starts its own
    gc.collect()


@pytest.fixture(scope="module")
def reference(vllm_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(vllm_model, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(
        vllm_model
    )


PROMPTS = ["theorem t (a b : Nat) : a + b = b + a := by", "theorem u : (2 : Nat) + 2 = 4 := by\n  norm_num"]


def test_engine_args_reach_the_engine(engine):
    config = engine.llm_engine.model_config
    assert config.logprobs_mode == "processed_logprobs" and config.max_model_len == 256
    assert engine.llm_engine.vllm_config.cache_config.enable_prefix_caching


def test_greedy_tokens_equal_transformers_and_logprobs_are_after_temperature(engine, reference):
    from vllm import SamplingParams

    model, tokenizer = reference
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    greedy = engine.generate(
        [{"prompt_token_ids": p} for p in prompts],
        SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True),
        use_tqdm=False,
    )
    for ids, out in zip(prompts, greedy):
        with torch.no_grad():
            expected = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False, min_new_tokens=12)[
                0, len(ids) :
            ].tolist()
        assert list(out.outputs[0].token_ids) == expected
    sampled = engine.generate(
        [{"prompt_token_ids": p} for p in prompts],
        SamplingParams(max_tokens=12, temperature=0.7, logprobs=0, seed=3, ignore_eos=True),
        use_tqdm=False,
    )
    for ids, out in zip(prompts, sampled):
        tokens = list(out.outputs[0].token_ids)
        with torch.no_grad():
            logits = model(torch.tensor([ids + tokens])).logits[0, len(ids) - 1 : -1].float()
        ours = torch.log_softmax(logits / 0.7, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0]
        theirs = torch.tensor([lp[t].logprob for lp, t in zip(out.outputs[0].logprobs, tokens)])
        assert float((ours - theirs).abs().max()) < 1e-4  # fp32 both sides
        plain = torch.log_softmax(logits, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0]
        assert float((plain - theirs).abs().max()) > 1e-3  # the check has teeth: T=1 log-probs differ
