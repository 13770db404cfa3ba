"""Sequence packing for causal LMs, exact: several examples per row, no cross-example attention.

Used by pretraining, prover SFT, feedback-trace SFT and autoformalizer SFT.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from typing import Any

import torch

IGNORE = -100
Example = dict[str, list[int]]


class TooLongError(ValueError):
    """An example does not fit in ``max_length`` tokens."""


def lm_examples(tokenizer: Any, text: str, max_length: int, add_eos: bool = True) -> list[Example]:
    """A document as causal-LM examples: all tokens trained, cut into ``max_length`` chunks."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if add_eos and tokenizer.eos_token_id is not None:
        ids = ids + [tokenizer.eos_token_id]
    return [
        {"input_ids": ids[i : i + max_length], "labels": ids[i : i + max_length]}
        for i in range(0, len(ids), max_length)
        if ids[i : i + max_length]
    ]


def completion_example(
    tokenizer: Any,
    prompt: str,
    completion: str,
    max_length: int | None = None,
    add_eos: bool = True,
) -> Example:
    """Prompt + completion with the loss on the completion only (prompt labels -100).

    Prompt and completion are tokenized separately, so the boundary is exact in token space.
    """
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    if add_eos and tokenizer.eos_token_id is not None:
        completion_ids = completion_ids + [tokenizer.eos_token_id]
    if not completion_ids:
        raise ValueError("empty completion: nothing to train on")
    total = len(prompt_ids) + len(completion_ids)
    if max_length is not None and total > max_length:
        raise TooLongError(
            f"example has {total} tokens ({len(prompt_ids)} prompt + {len(completion_ids)} completion), "
            f"more than max_length={max_length}"
        )
    return {"input_ids": prompt_ids + completion_ids, "labels": [IGNORE] * len(prompt_ids) + completion_ids}


def pack_lengths(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing: indices of ``lengths`` grouped into bins of total <= ``capacity``.

    Deterministic; O(n log n) searches (plus list inserts), fine for millions of examples.
    """
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (remaining capacity, bin index), sorted
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        size = lengths[index]
        if size > capacity:
            raise TooLongError(f"example {index} has {size} tokens, more than the row length {capacity}")
        if size <= 0:
            raise ValueError(f"example {index} is empty")
        slot = bisect_left(free, (size, -1))
        if slot < len(free):
            remaining, b = free.pop(slot)
        else:
            remaining, b = capacity, len(bins)
            bins.append([])
        bins[b].append(index)
        if remaining - size > 0:
            insort(free, (remaining - size, b))
    return bins


def pack_examples(examples: Sequence[Example], max_length: int) -> list[list[Example]]:
    """Examples grouped into rows of at most ``max_length`` tokens (see :func:`pack_lengths`)."""
    bins = pack_lengths([len(e["input_ids"]) for e in examples], max_length)
    return [[examples[i] for i in b] for b in bins]


def needs_flattening(attn_implementation: str | None) -> bool:
    """FlashAttention kernels detect packing only in a single flattened row."""
    return bool(attn_implementation) and "flash" in attn_implementation


def _round_up(n: int, multiple: int | None) -> int:
    return n if not multiple else -(-n // multiple) * multiple


class PackedCollator:
    """Rows (lists of examples) -> ``input_ids``, ``labels``, ``position_ids`` (no attention mask)."""

    def __init__(self, pad_token_id: int, flatten: bool = False, pad_to_multiple_of: int | None = None):
        if pad_token_id is None:
            raise ValueError("PackedCollator needs a pad token id (e.g. the tokenizer's eos id)")
        self.pad_token_id = pad_token_id
        self.flatten = flatten
        self.pad_to_multiple_of = pad_to_multiple_of

    @staticmethod
    def _row(examples: Iterable[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids, labels, positions = [], [], []
        for example in examples:  # lists or integer arrays (large corpora keep numpy arrays)
            tokens = torch.as_tensor(example["input_ids"], dtype=torch.long)
            targets = torch.as_tensor(example["labels"], dtype=torch.long).clone()
            if tokens.numel() == 0 or targets.shape != tokens.shape:
                raise ValueError(f"malformed example: {tokens.numel()} input ids, {targets.numel()} labels")
            targets[0] = IGNORE  # never predict across a boundary
            ids.append(tokens)
            labels.append(targets)
            positions.append(torch.arange(tokens.numel()))
        return torch.cat(ids), torch.cat(labels), torch.cat(positions)

    def __call__(self, rows: Sequence[Sequence[Example]]) -> dict[str, torch.Tensor]:
        if self.flatten:
            rows = [[example for row in rows for example in row]]
        built = [self._row(row) for row in rows]
        width = _round_up(max(len(ids) for ids, _, _ in built), self.pad_to_multiple_of)
        input_ids = torch.full((len(built), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(built), width), IGNORE, dtype=torch.long)
        position_ids = torch.zeros((len(built), width), dtype=torch.long)
        for r, (ids, labs, pos) in enumerate(built):
            n = len(ids)
            input_ids[r, :n] = ids
            labels[r, :n] = labs
            position_ids[r, :n] = pos
            position_ids[r, n:] = torch.arange(width - n)  # padding: a segment of its own
        # use_cache=False is part of the batch because packing is only honoured without a cache
        return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids, "use_cache": False}


def pad_token_id(tokenizer: Any) -> int:
    """The tokenizer's pad id, or its eos id when it has none. A pad id of 0 is a pad id (MiniLM's
    ``[PAD]``): ``pad_token_id or eos_token_id`` would silently pad with eos."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def collator_for(tokenizer: Any, attn_implementation: str | None = None) -> PackedCollator:
    """The stages' collate: packed rows padded with the tokenizer's pad id, flattened into one row
    for FlashAttention kernels (:func:`needs_flattening`)."""
    return PackedCollator(pad_token_id(tokenizer), flatten=needs_flattening(attn_implementation))


class PaddedCollator:
    """Naive baseline: one example per row, right-padded, with a 2-D attention mask."""

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int | None = None):
        self.pad_token_id = pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, examples: Sequence[Example]) -> dict[str, torch.Tensor]:
        width = _round_up(max(len(e["input_ids"]) for e in examples), self.pad_to_multiple_of)
        input_ids = torch.full((len(examples), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
        attention_mask = torch.zeros((len(examples), width), dtype=torch.long)
        for r, example in enumerate(examples):
            n = len(example["input_ids"])
            input_ids[r, :n] = torch.tensor(example["input_ids"])
            labels[r, :n] = torch.tensor(example["labels"])
            attention_mask[r, :n] = 1
        return {"input_ids": input_ids, "labels": labels, "attention_mask": attention_mask}
