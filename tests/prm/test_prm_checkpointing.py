"""prm's gradient_checkpointing really recomputes: a checkpointed SFT step saves fewer activation bytes."""

from __future__ import annotations

import torch

from leanloop.plan import SavedBytes
from prm.module import PRMModule


def _saved_bytes(checkpointing: bool) -> int:
    module = PRMModule(gradient_checkpointing=checkpointing)
    ids = torch.randint(0, 1000, (2, 128))
    labels = torch.full_like(ids, -100)
    labels[:, -3:] = ids[:, -3:]
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    with SavedBytes(module.model) as saved:
        loss, _ = module.answer_loss(batch)
    loss.backward()  # the checkpointed layers recompute here
    assert module.model.model.embed_tokens.weight.grad is not None
    return saved.total


def test_checkpointed_sft_step_saves_fewer_bytes():
    unchecked, checked = _saved_bytes(False), _saved_bytes(True)
    # the answer positions' fp32 log-softmax over 151,936 entries (~3.6 MB) is saved either way
    assert checked < 0.7 * unchecked, (checked, unchecked)
