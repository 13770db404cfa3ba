"""Packing is exact: a packed batch gives every example the same logits and loss as running it alone."""

from __future__ import annotations

import json

import pytest
import torch

from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from leanloop.training.packing import (
    IGNORE,
    PackedCollator,
    PaddedCollator,
    TooLongError,
    collator_for,
    completion_example,
    lm_examples,
    pack_examples,
    pack_lengths,
    pad_token_id,
)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("qwen3")


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    model = load_model(ModelSpec("qwen3-tiny"), tokenizer=tokenizer)
    return model.eval()


@pytest.fixture(scope="module")
def examples(tokenizer, shared_data):
    """Real Lean text: the starts of accepted proofs cut into chunks, plus prompt/completion pairs
    (kept small: every position carries 151,936 logits)."""
    rows = [
        json.loads(line) for line in (shared_data / "candidates/kimina_prover_preview_minif2f_test_solved.jsonl").open()
    ][:3]
    out = [e for row in rows for e in lm_examples(tokenizer, row["correct_proof"][:180], max_length=24)]
    statements = [json.loads(line) for line in (shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl").open()][
        :2
    ]
    out += [
        completion_example(tokenizer, s["informal_prefix"][-60:], s["formal_statement"][:90], max_length=128)
        for s in statements
    ]
    return out


def _token_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-position next-token loss, HF's shift convention, 0 where the label is ignored."""
    shifted = torch.nn.functional.pad(labels, (0, 1), value=IGNORE)[..., 1:]
    return torch.nn.functional.cross_entropy(
        logits.float().transpose(1, 2), shifted, ignore_index=IGNORE, reduction="none"
    )


@pytest.fixture(scope="module")
def alone(model, examples):
    """Each example run by itself: its logits, and the mean loss over all trained tokens."""
    logits, total, count = [], 0.0, 0
    with torch.no_grad():
        for example in examples:
            labels = torch.tensor([example["labels"]])
            out = model(input_ids=torch.tensor([example["input_ids"]]))
            logits.append(out.logits[0])
            total += float(_token_losses(out.logits, labels).sum())
            count += int((labels[0, 1:] != IGNORE).sum())
    return logits, total / count


@pytest.fixture(scope="module")
def rows(examples):
    packed = pack_examples(examples, max_length=128)
    assert len(packed) < len(examples) and sum(len(e["input_ids"]) for e in examples) < 400
    assert any(len(row) >= 3 for row in packed)  # several examples really share a row
    return packed


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_logits_and_loss_equal_unpacked(model, tokenizer, examples, rows, alone, attn):
    alone_logits, alone_loss = alone
    index = {id(e): i for i, e in enumerate(examples)}
    model.config._attn_implementation = attn
    try:
        with torch.no_grad():
            packed = model(**PackedCollator(tokenizer.pad_token_id)(rows))
    finally:
        model.config._attn_implementation = "sdpa"
    for r, row in enumerate(rows):
        offset = 0
        for example in row:
            n = len(example["input_ids"])
            # the example's logits inside the pack are those it has alone
            torch.testing.assert_close(
                packed.logits[r, offset : offset + n], alone_logits[index[id(example)]], atol=1e-4, rtol=1e-4
            )
            offset += n
    # the batch loss is the mean over exactly the tokens trained when each example runs alone
    assert packed.loss.item() == pytest.approx(alone_loss, rel=1e-5)


def test_flattened_batch_and_padded_baseline_give_the_same_loss(model, tokenizer, examples, rows, alone):
    flat_batch = PackedCollator(tokenizer.pad_token_id, flatten=True)(rows)
    assert flat_batch["input_ids"].shape == (1, sum(len(e["input_ids"]) for e in examples))
    with torch.no_grad():
        flat = model(**flat_batch).loss
        padded = model(**PaddedCollator(tokenizer.pad_token_id)(examples)).loss
    assert flat.item() == pytest.approx(alone[1], rel=1e-5)
    assert padded.item() == pytest.approx(alone[1], rel=1e-5)


def test_without_use_cache_false_packing_leaks(model, tokenizer, rows):
    """Why the collator sends use_cache=False: with the config default (a cache), transformers 5.24
    ignores the packed segments and later examples attend to earlier ones. (If a transformers
    upgrade makes this fail, packing has become cache-safe and the note in packing.py can go.)"""
    batch = PackedCollator(tokenizer.pad_token_id)(rows)
    assert batch["use_cache"] is False and "attention_mask" not in batch
    with torch.no_grad():
        exact = model(**batch).logits
        leaky = model(**{**batch, "use_cache": True}).logits
    first = len(rows[0][0]["input_ids"])
    # the first example is unaffected (up to kernel rounding: a cache run takes sdpa's is_causal
    # path, the packed run an explicit mask)
    torch.testing.assert_close(leaky[0, :first], exact[0, :first], atol=1e-4, rtol=1e-4)
    assert (leaky[0, first:] - exact[0, first:]).abs().max() > 0.1  # the next ones see it


def test_collator_layout(tokenizer):
    a = {"input_ids": [5, 6, 7], "labels": [5, 6, 7]}
    b = {"input_ids": [8, 9], "labels": [IGNORE, 9]}
    batch = PackedCollator(pad_token_id=0, pad_to_multiple_of=8)([[a, b], [b]])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9, 0, 0, 0], [8, 9, 0, 0, 0, 0, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 0, 1, 2, 3, 4, 5]]
    # first token of every example and all padding carry no loss
    assert batch["labels"].tolist() == [[IGNORE, 6, 7, IGNORE, 9] + [IGNORE] * 3, [IGNORE, 9] + [IGNORE] * 6]


def test_completion_only_labels(tokenizer):
    example = completion_example(tokenizer, "Prove: ", "theorem t : True := trivial")
    prompt_len = len(tokenizer("Prove: ", add_special_tokens=False)["input_ids"])
    assert example["labels"][:prompt_len] == [IGNORE] * prompt_len
    assert example["labels"][prompt_len:] == example["input_ids"][prompt_len:]
    assert example["input_ids"][-1] == tokenizer.eos_token_id
    with pytest.raises(TooLongError, match="more than max_length=4"):
        completion_example(tokenizer, "Prove: ", "theorem t : True := trivial", max_length=4)


def test_lm_examples_chunk_without_loss_of_tokens(tokenizer, shared_data):
    text = (shared_data / "lean_text/tpil_book_verso_sources/Conv.lean").read_text()
    chunks = lm_examples(tokenizer, text, max_length=100)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert [t for c in chunks for t in c["input_ids"]] == ids
    assert all(len(c["input_ids"]) <= 100 for c in chunks)


def test_pack_lengths_is_a_partition_within_capacity():
    lengths = [97, 3, 50, 50, 100, 1, 64, 36, 99, 2, 70, 30]
    bins = pack_lengths(lengths, capacity=100)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 100 for b in bins)
    assert len(bins) == -(-sum(lengths) // 100)  # this instance packs perfectly (602 tokens, 7 rows)
    with pytest.raises(TooLongError):
        pack_lengths([101], capacity=100)


def test_the_stages_collate_keeps_a_pad_id_of_0():
    """MiniLM's [PAD] is id 0: padding stays 0 (``pad_token_id or eos_token_id`` made it eos)."""
    minilm = load_tokenizer("minilm")
    assert minilm.pad_token_id == 0 and pad_token_id(minilm) == 0
    rows = [
        [{"input_ids": [101, 7592, 102], "labels": [101, 7592, 102]}],
        [{"input_ids": [101, 102], "labels": [101, 102]}],
    ]
    batch = collator_for(minilm)(rows)
    assert batch["input_ids"][1].tolist() == [101, 102, 0]
    qwen = load_tokenizer("qwen3")
    assert collator_for(qwen, "flash_attention_2").flatten and collator_for(qwen).pad_token_id == pad_token_id(qwen)
