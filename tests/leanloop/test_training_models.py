"""``attn_implementation: flash_attention_2`` where flash-attn (or CUDA) is missing: sdpa, one warning
line, and the packing collators follow the model (no flattened rows without flash-attn)."""

from __future__ import annotations

import logging

import transformers.utils


def test_flash_attention_falls_back_to_sdpa_with_one_warning(caplog, monkeypatch):
    from leanloop.training import models
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from leanloop.training.packing import collator_for

    models.flash_attention_available.cache_clear()
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: False)  # as on any CPU machine
    with caplog.at_level(logging.WARNING, logger=models.__name__):
        specs = [ModelSpec("qwen3-tiny", attn_implementation="flash_attention_2") for _ in range(3)]
        tokenizer = load_tokenizer("qwen3")
        model = load_model(specs[0], tokenizer=tokenizer)  # used to raise ImportError at load
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "flash_attention_2" in r.getMessage()]
    assert len(warnings) == 1 and "using sdpa" in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage()
    assert [s.attn_implementation for s in specs] == ["sdpa"] * 3
    assert model.config._attn_implementation == "sdpa"
    assert not collator_for(tokenizer, specs[0].attn_implementation).flatten  # padded rows: sdpa cannot unpack
    assert ModelSpec("qwen3-tiny", attn_implementation="eager").attn_implementation == "eager"

    models.flash_attention_available.cache_clear()
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: True)
    assert ModelSpec("qwen3-tiny", attn_implementation="flash_attention_2").attn_implementation == "flash_attention_2"
    models.flash_attention_available.cache_clear()
