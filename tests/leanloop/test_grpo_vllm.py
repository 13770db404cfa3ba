"""vLLM rollouts through TRL's own ``VLLMGeneration``, against a stand-in for vLLM's API: only what the
real engine cannot show on CPU, and what the main venv (no vLLM) must still check.

The real engine (vLLM's CPU build) runs colocated GRPO in ``make test-vllm``
(``tests/rl/test_vllm_grpo.py``: on-policy after every sync and optimizer step, tied and untied,
the rl stage's steps on a preset policy). Kept here: sleep mode, which is CUDA-only (vLLM's CPU
platform refuses it; ``FakeLLM.sleep`` discards the weights as level 2 does, so a missed re-sync
shows), the sync cadence, and the preset policy's engine folder, in the main suite. ``FakeLLM`` answers
the few calls TRL's helper makes (``LLM(...)``, ``generate``, ``sleep``/``wake_up``,
``reset_prefix_cache`` and the colocated model runner's ``load_weights``) with a real copy of the tiny
model, so TRL's weight sync (PEFT merge, parameter names) and this project's layout of its output are
exercised for real.
"""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from leanloop.grpo.objective import GRPOConfig, completion_logps, per_token_loss, sampling_correction
from leanloop.grpo.rollout import RolloutGenerationConfig, VLLMRollout, VLLMRolloutConfig
from leanloop.vllm_engine import VLLMEngineConfig, engine_args


class FakeLLM:
    """vLLM's ``LLM`` as TRL's colocate mode uses it, sampling from a real model it loads itself."""

    instances: list["FakeLLM"] = []

    def __init__(self, **kwargs):
        from transformers import AutoModelForCausalLM

        self.kwargs = kwargs
        self.model = AutoModelForCausalLM.from_pretrained(kwargs["model"]).eval()
        self.loaded: list[str] = []
        self.resets = 0
        self.calls: list[str] = []  # sleep / wake_up, in order
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(
                driver_worker=SimpleNamespace(
                    model_runner=SimpleNamespace(
                        model=SimpleNamespace(load_weights=self.load_weights, parameters=self.model.parameters)
                    )
                )
            )
        )
        FakeLLM.instances.append(self)

    def load_weights(self, weights):
        state = self.model.state_dict()
        for name, tensor in weights:
            state[name].copy_(tensor)  # KeyError = a name vLLM would not know
            self.loaded.append(name)

    def reset_prefix_cache(self):
        self.resets += 1

    def sleep(self, level=1):
        self.calls.append(f"sleep{level}")
        if level == 2:  # level 2 discards the weights: only a re-sync brings them back
            with torch.no_grad():
                for param in self.model.parameters():
                    param.normal_()

    def wake_up(self, tags=None):
        self.calls.append("wake:" + ",".join(tags or ["all"]))

    @torch.no_grad()
    def generate(self, prompts, sampling_params=None, use_tqdm=False):
        p = sampling_params
        g = torch.Generator().manual_seed(0)
        results = []
        for prompt in prompts:
            ids = list(prompt["prompt_token_ids"])
            tokens, logprobs = [], []
            for _ in range(p.max_tokens):
                logits = self.model(torch.tensor([ids + tokens])).logits[0, -1].float() / p.temperature
                logp = torch.log_softmax(logits, -1)
                token = int(torch.multinomial(logp.exp(), 1, generator=g))
                tokens.append(token)
                logprobs.append({token: SimpleNamespace(logprob=float(logp[token]), rank=1)})
                if token in p.stop_token_ids:
                    break
            results.append(
                SimpleNamespace(prompt_token_ids=ids, outputs=[SimpleNamespace(token_ids=tokens, logprobs=logprobs)])
            )
        return results


@pytest.fixture()
def fake_vllm(monkeypatch):
    import trl.generation.vllm_generation as trl_vllm

    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(trl_vllm, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(trl_vllm, "SamplingParams", lambda **kw: SimpleNamespace(**kw), raising=False)
    FakeLLM.instances.clear()
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    return FakeLLM


@pytest.fixture()
def lora_policy(tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    tokenizer = load_tokenizer("qwen3")
    torch.manual_seed(0)
    load_model(ModelSpec("qwen3-tiny"), tokenizer=tokenizer).save_pretrained(tmp_path / "base")
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base")
    # non-zero B matrices: the merged policy differs from the base the engine starts from
    policy = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    return policy, tokenizer


def trainer_logps(policy, rollouts, temperature):
    ids = torch.cat([rollouts.prompt_ids, rollouts.completion_ids], 1)
    mask = torch.cat([rollouts.prompt_mask, rollouts.completion_mask], 1)
    with torch.no_grad():
        return completion_logps(policy, ids, mask, rollouts.completion_ids.size(1), temperature, compute_entropy=False)[
            0
        ]


def test_engine_args_follow_trl_colocate_rules_inside_a_training_process(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    config = VLLMEngineConfig(gpu_memory_utilization=0.35, max_model_len=4096, extra={"enforce_eager": True})
    plain = engine_args("/m", config, dtype="bfloat16")
    assert "distributed_executor_backend" not in plain  # an inference-only process: vLLM's own engine process
    assert plain["gpu_memory_utilization"] == 0.35 and plain["max_model_len"] == 4096
    assert plain["logprobs_mode"] == "processed_logprobs" and plain["enforce_eager"] is True
    colocated = engine_args("/m", config, in_process=True, seed=3)
    assert colocated["distributed_executor_backend"] == "external_launcher"
    assert colocated["max_num_batched_tokens"] == 4096 and colocated["seed"] == 3
    import os

    assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("0", "1") and os.environ["MASTER_PORT"]
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMEngineConfig(gpu_memory_utilization=1.5)


def test_sleep_mode_rollouts_are_on_policy_after_every_weight_sync(fake_vllm, lora_policy):
    policy, tokenizer = lora_policy
    engine = VLLMEngineConfig(gpu_memory_utilization=0.3, enable_sleep_mode=True)
    config = RolloutGenerationConfig(
        backend="vllm", max_new_tokens=6, temperature=0.8, vllm=VLLMRolloutConfig(mode="colocate", engine=engine)
    )
    rollout = VLLMRollout(tokenizer, config, [tokenizer.eos_token])
    rollout.bind(SimpleNamespace(global_rank=0, local_rank=0, world_size=1, strategy=SimpleNamespace()))
    prompts = ["theorem t : 1 + 1 = 2 := by", "theorem u (a : Nat) : a = a := by"]

    first = rollout.generate(policy, prompts, 2)
    llm = fake_vllm.instances[0]
    assert llm.kwargs["distributed_executor_backend"] == "external_launcher"
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs" and llm.kwargs["gpu_memory_utilization"] == 0.3
    assert not any("lora" in name for name in llm.loaded) and "model.layers.0.self_attn.q_proj.weight" in llm.loaded
    assert llm.resets == 1 and len(first) == 4 and first.sampling_logps.shape == first.completion_ids.shape
    # asleep from the start, weights woken for the sync, KV cache for the rollouts, asleep again after
    assert llm.calls == ["sleep2", "wake:weights", "wake:kv_cache", "sleep2"]
    mask = first.completion_mask.bool()
    assert torch.allclose(first.sampling_logps[mask], trainer_logps(policy, first, 0.8)[mask], atol=1e-4)

    with torch.no_grad():  # an optimizer step moves the adapters; the next sync must carry it
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.add_(2.0)
    second = rollout.generate(policy, prompts, 2)
    mask = second.completion_mask.bool()
    assert llm.resets == 2 and len(fake_vllm.instances) == 1  # one engine for the run
    assert llm.calls[4:] == ["wake:weights", "wake:kv_cache", "sleep2"]
    assert torch.allclose(second.sampling_logps[mask], trainer_logps(policy, second, 0.8)[mask], atol=1e-4)
    # the check has teeth: an engine left on the base weights would be off by far more than the tolerance
    with policy.disable_adapter():
        base = trainer_logps(policy, second, 0.8)
    assert float((trainer_logps(policy, second, 0.8) - base)[mask].abs().max()) > 1e-2

    second.replace(0, [1, 2], "x")  # a replayed completion was not sampled now: no correction for it
    assert torch.isnan(second.sampling_logps[0]).all()
    assert not torch.isnan(second.sampling_logps[1][second.completion_mask[1].bool()]).any()


def test_truncated_importance_sampling_weights():
    config = GRPOConfig(num_generations=2, vllm_importance_sampling_clip_max=2.0)
    trainer = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
    sampler = torch.tensor([[-1.0, -3.0, math.nan], [-0.2, -1.0, -1.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    c = sampling_correction(trainer, sampler, mask, config)
    expected = torch.tensor([[1.0, 2.0, 1.0], [math.exp(-0.8), 1.0, 1.0]])  # e^1 capped at 2; NaN and pad -> 1
    assert torch.allclose(c.weights, expected, atol=1e-6)
    assert c.stats["sampling/sampling_logp_difference/max"] == pytest.approx(1.0)
    assert c.stats["sampling/sampling_logp_difference/mean"] == pytest.approx((0 + 1 + 0.8 + 0) / 4)
    masked = sampling_correction(
        trainer,
        sampler,
        mask,
        GRPOConfig(
            num_generations=2, vllm_importance_sampling_mode="token_mask", vllm_importance_sampling_clip_max=2.0
        ),
    )
    assert masked.weights[0, 1] == 0.0 and masked.weights[0, 0] == 1.0
    sequence = sampling_correction(
        trainer,
        sampler,
        mask,
        GRPOConfig(
            num_generations=2, vllm_importance_sampling_mode="sequence_truncate", vllm_importance_sampling_clip_max=5.0
        ),
    )
    assert sequence.weights.shape == (2, 1)
    assert torch.allclose(sequence.weights[:, 0], torch.tensor([math.e, math.exp(-0.8)]), atol=1e-6)
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode"):
        GRPOConfig(vllm_importance_sampling_mode="token")


def test_importance_weights_scale_the_surrogate_not_the_kl_term():
    config = GRPOConfig(num_generations=2, beta=0.1)
    logps = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -1.0]])
    adv, mask = torch.tensor([1.0]), torch.ones(1, 2)
    plain = per_token_loss(logps, None, ref, adv, mask, config)
    weighted = per_token_loss(logps, None, ref, adv, mask, config, torch.tensor([[0.5, 2.0]]))
    surrogate = plain.per_token_loss - 0.1 * plain.per_token_kl
    assert torch.allclose(weighted.per_token_loss, surrogate * torch.tensor([[0.5, 2.0]]) + 0.1 * plain.per_token_kl)


def test_weights_are_synced_once_per_optimizer_step(fake_vllm, lora_policy):
    policy, tokenizer = lora_policy
    rollout = VLLMRollout(tokenizer, RolloutGenerationConfig(backend="vllm", max_new_tokens=2), [tokenizer.eos_token])
    trainer = SimpleNamespace(global_rank=0, local_rank=0, world_size=1, strategy=SimpleNamespace(), global_step=0)
    rollout.bind(trainer)
    rollout.generate(policy, ["theorem t : True := by"], 2)
    rollout.generate(policy, ["theorem t : True := by"], 2)  # same step (pass@k batches): no second push
    llm = fake_vllm.instances[0]
    assert llm.resets == 1
    trainer.global_step = 1
    rollout.generate(policy, ["theorem t : True := by"], 2)
    assert llm.resets == 2


@pytest.mark.parametrize("env", [{"SLURM_LOCALID": "1"}, {"LOCAL_RANK": "1", "SLURM_LOCALID": "1"}, {}])
def test_second_node_rank_exports_its_local_rank_not_the_global_one(monkeypatch, env):
    """Rank 9 of 16 on two 8-GPU nodes is GPU 1 of its node: under srun Lightning sets no LOCAL_RANK,
    and the global rank (9) used to be exported to vLLM as the local one."""
    import os

    import torch.distributed as dist

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_LOCALID"):
        monkeypatch.setenv(name, "")  # recorded, so what engine_args exports is undone after the test
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 9)
    monkeypatch.setattr(dist, "get_world_size", lambda: 16)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    args = engine_args("/m", VLLMEngineConfig(), seed=3)
    assert (os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"]) == ("9", "1", "16")
    assert args["distributed_executor_backend"] == "external_launcher" and args["seed"] == 3 + 9


def test_a_preset_policy_reaches_the_engine_as_a_saved_folder(fake_vllm):
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    tokenizer = load_tokenizer("qwen3")
    torch.manual_seed(0)
    policy = load_model(ModelSpec("qwen3-tiny"), tokenizer=tokenizer)
    assert policy.name_or_path == ""  # built from a config: no folder vLLM could load (and Path('') is '.')
    rollout = VLLMRollout(tokenizer, RolloutGenerationConfig(backend="vllm", max_new_tokens=4), [tokenizer.eos_token])
    rollout.bind(SimpleNamespace(global_rank=0, local_rank=0, world_size=1, strategy=SimpleNamespace()))
    out = rollout.generate(policy, ["theorem t : True := by"], 2)
    llm = fake_vllm.instances[0]
    folder = llm.kwargs["model"]
    assert folder and (Path(folder) / "config.json").is_file() and llm.kwargs["tokenizer"] == folder
    mask = out.completion_mask.bool()  # the saved layout took the policy's weights at the first sync
    assert torch.allclose(out.sampling_logps[mask], trainer_logps(policy, out, 1.0)[mask], atol=1e-4)
