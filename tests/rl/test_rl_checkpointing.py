"""rl's policy trains in train mode whatever its rollouts use: loaded with from_pretrained (eval mode)
and never toggled on the vLLM path, transformers would skip the checkpointing the config turns on."""

from __future__ import annotations

import torch

from leanloop.plan import SavedBytes
from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from rl.config import AdapterConfig, PolicyConfig
from rl.policy import build_policy


def test_checkpointed_lora_update_from_a_checkpoint_saves_fewer_bytes(tmp_path):
    load_model(ModelSpec("qwen3-tiny")).save_pretrained(tmp_path)
    spec = ModelSpec(str(tmp_path), tokenizer="qwen3")
    tokenizer = load_tokenizer(spec)
    ids = torch.randint(0, 1000, (2, 128))
    saved = {}
    for checkpointing in (False, True):
        policy = build_policy(
            spec,
            tokenizer,
            PolicyConfig(base=spec, adapter=AdapterConfig(kind="lora", r=4), gradient_checkpointing=checkpointing),
            beta=0.0,
        )
        assert policy.model.get_base_model().training  # what the update runs in; no rollout toggles it
        with SavedBytes(policy.model) as measured:
            hidden = policy.model.get_base_model().model(input_ids=ids, use_cache=False).last_hidden_state
        hidden.float().pow(2).mean().backward()
        saved[checkpointing] = measured.total
    assert saved[True] < 0.5 * saved[False], saved
