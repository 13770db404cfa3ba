"""Packing is exact: a packed batch gives every example the same logits and loss as running it alone."""

from __future__ import annotations

import json

import pytest
import torch

from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from leanloop.training.packing import (
    IGNORE, PackedCollator, PaddedCollator, TooLongError, completion_example, lm_examples,
    pack_examples, pack_lengths,
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
    rows = [json.loads(line) for line in
            (shared_data / "candidates/kimina_prover_preview_minif2f_test_solved.jsonl").open()][:3]
    out = [e for row in rows for e in lm_examples(tokenizer, row["correct_proof"][:180], max_length=24)]
    statements = [json.loads(line) for line in
                  (shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl").open()][:2]
    out += [completion_example(tokenizer, s["informal_prefix"][-60:], s["formal_statement"][:90], max_length=128)
            for s in statements]
    return out


def _token_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-position next-token loss, HF's shift convention, 0 where the label is ignored."""
    shifted = torch.nn.functional.pad(labels, (0, 1), value=IGNORE)[..., 1:]
    return torch.nn.functional.cross_entropy(
        logits.float().transpose(1, 2), shifted, ignore_index=IGNORE, reduction="none")


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_logits_and_loss_equal_unpacked(model, tokenizer, examples, attn):
    model.config._attn_implementation = attn
    rows = pack_examples(examples, max_length=128)
    assert len(rows) < len(examples) and sum(len(e["input_ids"]) for e in examples) < 400
    assert any(len(row) >= 3 for row in rows)  # several examples really share a row
    batch = PackedCollator(tokenizer.pad_token_id)(rows)
    with torch.no_grad():
        packed = model(**batch)
        total, count = 0.0, 0
        for r, row in enumerate(rows):
            offset = 0
            for example in row:
                n = len(example["input_ids"])
                ids = torch.tensor([example["input_ids"]])
                labels = torch.tensor([example["labels"]])
                alone = model(input_ids=ids, labels=labels)
                # the example's logits inside the pack are those it has alone
                torch.testing.assert_close(packed.logits[r, offset:offset + n], alone.logits[0],
                                           atol=1e-4, rtol=1e-4)
                losses = _token_losses(alone.logits, labels)
                total += float(losses.sum())
                count += int((labels[0, 1:] != IGNORE).sum())
                offset += n
    # the batch loss is the mean over exactly the tokens trained when each example runs alone
    assert packed.loss.item() == pytest.approx(total / count, rel=1e-5)
    model.config._attn_implementation = "sdpa"


def test_flattened_batch_equals_rows(model, tokenizer, examples):
    rows = pack_examples(examples, max_length=128)
    with torch.no_grad():
        as_rows = model(**PackedCollator(tokenizer.pad_token_id)(rows)).loss
        flat_batch = PackedCollator(tokenizer.pad_token_id, flatten=True)(rows)
        flat = model(**flat_batch).loss
    assert flat_batch["input_ids"].shape == (1, sum(len(e["input_ids"]) for e in examples))
    assert flat.item() == pytest.approx(as_rows.item(), rel=1e-5)


def test_padded_baseline_gives_the_same_loss(model, tokenizer, examples):
    rows = pack_examples(examples, max_length=128)
    with torch.no_grad():
        packed = model(**PackedCollator(tokenizer.pad_token_id)(rows)).loss
        padded = model(**PaddedCollator(tokenizer.pad_token_id)(examples)).loss
    assert packed.item() == pytest.approx(padded.item(), rel=1e-5)


def test_without_use_cache_false_packing_leaks(model, tokenizer, examples):
    """Why the collator sends use_cache=False: with the config default (a cache), transformers
    ignores the packed segments and the second example attends to the first."""
    rows = pack_examples(examples, max_length=128)
    batch = PackedCollator(tokenizer.pad_token_id)(rows)
    assert batch["use_cache"] is False and "attention_mask" not in batch
    with torch.no_grad():
        exact = model(**batch).logits
        leaky = model(**{**batch, "use_cache": True}).logits
    assert not torch.allclose(exact, leaky, atol=1e-3)


def test_collator_layout(tokenizer):
    a = {"input_ids": [5, 6, 7], "labels": [5, 6, 7]}
    b = {"input_ids": [8, 9], "labels": [IGNORE, 9]}
    batch = PackedCollator(pad_token_id=0, pad_to_multiple_of=8)([[a, b], [b]])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9, 0, 0, 0], [8, 9, 0, 0, 0, 0, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 0, 1, 2, 3, 4, 5]]
    # first token of every example and all padding carry no loss
    assert batch["labels"].tolist() == [[IGNORE, 6, 7, IGNORE, 9] + [IGNORE] * 3,
                                        [IGNORE, 9] + [IGNORE] * 6]


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
