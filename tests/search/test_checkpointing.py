"""search's gradient_checkpointing really recomputes: a checkpointed step saves fewer activation bytes."""

from __future__ import annotations

import torch

from leanloop.plan import SavedBytes
from search.module import SearchModule


def _saved_bytes(checkpointing: bool) -> int:
    module = SearchModule(gradient_checkpointing=checkpointing)
    ids = torch.randint(0, 1000, (2, 128))
    with SavedBytes(module.model) as saved:
        # the body alone: the loss head over the vocabulary is the same either way
        hidden = module.model.model(input_ids=ids, use_cache=False).last_hidden_state
    hidden.float().pow(2).mean().backward()
    return saved.total


def test_checkpointed_step_saves_fewer_bytes():
    unchecked, checked = _saved_bytes(False), _saved_bytes(True)
    assert checked < 0.5 * unchecked, (checked, unchecked)
