"""Stage 1 SFT: completion-only masks on real pairs and the loss (the debug run itself, and its
exported policy, are tested in test_autoformalizer_stages.py)."""

from __future__ import annotations

import pytest
import torch

from autoformalizer.config import PolicyConfig
from autoformalizer.data import END_OF_TURN, PairsConfig, load_pairs, sft_example
from autoformalizer.prompts import SYSTEM_PROMPT
from leanloop.training.packing import PackedCollator, pack_examples


@pytest.fixture(scope="module")
def train_pairs():
    return load_pairs(PairsConfig())[0]["train"]


@pytest.fixture(scope="module")
def tiny_policy():
    """The embedded policy (tiny unfused Qwen3-MoE, NF4, QLoRA) with one decoder layer, to stay small."""
    from autoformalizer.policy import build_policy

    config = PolicyConfig()
    config.arch.num_hidden_layers = 1
    return build_policy(config)


def test_loss_only_on_the_statement_and_end_of_turn(tiny_policy, train_pairs):
    _, tokenizer = tiny_policy
    for pair in train_pairs[:20]:
        example = sft_example(tokenizer, pair, max_length=1024)
        labels, ids = example["labels"], example["input_ids"]
        first = next(i for i, label in enumerate(labels) if label != -100)
        assert all(label == -100 for label in labels[:first]) and labels[first:] == ids[first:]
        prompt = tokenizer.decode(ids[:first])
        assert SYSTEM_PROMPT in prompt and pair.informal in prompt and prompt.endswith("<|im_start|>assistant\n")
        assert tokenizer.decode(ids[first:]) == pair.formal + END_OF_TURN
        assert ids[-1] == tokenizer.convert_tokens_to_ids(END_OF_TURN)
    longest = max(train_pairs, key=lambda p: len(p.formal) + len(p.informal))
    n = len(sft_example(tokenizer, longest, None)["input_ids"])
    from leanloop.training.packing import TooLongError

    with pytest.raises(TooLongError):
        sft_example(tokenizer, longest, max_length=n - 1)


def test_completion_loss_equals_the_hf_loss_on_packed_real_pairs(tiny_policy, train_pairs):
    from autoformalizer.module import completion_loss

    model, tokenizer = tiny_policy
    examples = [sft_example(tokenizer, p, 512) for p in train_pairs[:4]]
    rows = pack_examples(examples, 512)
    assert any(len(row) > 1 for row in rows)  # packing really put several pairs in a row
    batch = PackedCollator(tokenizer.pad_token_id)(rows)
    model.eval()  # no adapter dropout: both losses see the same function
    with torch.no_grad():
        ours = completion_loss(model, batch)
        reference = model(**batch).loss
        # and one pair alone: the packed loss is the token-weighted mean of the pairs' own losses
        alone = [
            (
                completion_loss(model, PackedCollator(tokenizer.pad_token_id)([[e]])),
                sum(label != -100 for label in e["labels"][1:]),
            )
            for e in examples
        ]
    model.train()
    assert float(ours) == pytest.approx(float(reference), rel=1e-5)
    mean = sum(float(loss) * n for loss, n in alone) / sum(n for _, n in alone)
    assert float(ours) == pytest.approx(mean, rel=1e-4)


def test_packing_is_optional_and_every_pair_is_counted(tiny_policy):
    from autoformalizer.data import AutoformalizerSFTData

    packed = AutoformalizerSFTData(max_examples=6, max_length=1024)
    single = AutoformalizerSFTData(max_examples=6, max_length=1024, packing=False)
    packed.setup()
    single.setup()
    assert len(single.train_rows) == 6 and all(len(row) == 1 for row in single.train_rows)
    assert len(packed.train_rows) < 6 and sum(len(row) for row in packed.train_rows) == 6
    counts = packed.counts
    assert counts["train_examples"] + counts["train_over_max_examples"] == counts["train_pairs"]
    batch = next(iter(single.train_dataloader()))
    assert batch["input_ids"].shape[0] == single.batch_size and batch["use_cache"] is False
