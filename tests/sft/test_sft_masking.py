"""Completion-only SFT examples: labels are -100 exactly on the prompt tokens, the proof (and the
stop token) is trained, packing keeps it so; and training is theorem-disjoint from held-out splits."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest

from leanloop.paths import resolve_shared
from leanloop.training.models import load_tokenizer
from leanloop.training.packing import IGNORE, PackedCollator, pack_examples
from sft.data import ProofSource, ProverSFTData, read_proof_source
from sft.examples import split_program, target_theorem
from leanloop.prover.prompt import CHATML_TEMPLATE, PromptConfig

RL_LEAN = ProofSource(
    path="shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz",
    program_field="code",
    valid_field="verdict_pass",
)
KIMINA = ProofSource(
    path="shared://candidates/kimina_prover_preview_minif2f_test_solved.jsonl", program_field="correct_proof"
)


def _module(style: str, **kwargs) -> ProverSFTData:
    data = ProverSFTData(extra_proofs=[RL_LEAN], prompt=PromptConfig(style=style), max_length=1024, **kwargs)
    data.tokenizer = load_tokenizer(data.base)
    return data


@pytest.mark.parametrize("style", ["raw", "chat"])
def test_labels_mask_exactly_the_prompt(style):
    data = _module(style)
    proofs = read_proof_source(RL_LEAN, Counter())[:6]
    examples = data.examples(proofs, Counter(), "train")
    assert len(examples) == len(proofs)
    tokenizer = data.tokenizer
    for proof, example in zip(proofs, examples):
        statement, body = split_program(proof.program, target_theorem(proof.program, proof.name))
        prompt = (
            statement
            if style == "raw"
            else tokenizer.apply_chat_template(
                [{"role": "user", "content": f"{data.prompt.instruction}\n\n```lean4\n{statement}\n```"}],
                chat_template=None if tokenizer.chat_template else CHATML_TEMPLATE,
                tokenize=False,
                add_generation_prompt=True,
            )
        )
        n = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        labels, ids = example["labels"], example["input_ids"]
        assert labels[:n] == [IGNORE] * n
        assert labels[n:] == ids[n:] and IGNORE not in labels[n:]
        target = tokenizer.decode(ids[n:])
        if style == "raw":
            assert target == body + tokenizer.eos_token  # the proof, then stop
        else:
            assert target == f"```lean4\n{proof.program.rstrip()}\n```<|im_end|>"

    # packed rows keep every trained token and train nothing else (plus the boundary rule: the first
    # token of an example is never a target, and it is a prompt token here anyway)
    rows = pack_examples([{"input_ids": e["input_ids"], "labels": e["labels"]} for e in examples], 1024)
    batch = PackedCollator(tokenizer.eos_token_id)(rows)
    trained = sum(sum(label != IGNORE for label in e["labels"]) for e in examples)
    assert int((batch["labels"] != IGNORE).sum()) == trained


def test_training_is_theorem_disjoint_from_the_held_out_splits(debug_corpus):
    data = ProverSFTData(corpus=str(debug_corpus), extra_proofs=[KIMINA], max_length=2048)
    data.setup()
    table = pq.read_table(debug_corpus / "final" / "corpus.parquet", columns=["name", "split", "label"]).to_pylist()
    held_out = {r["name"] for r in table if r["split"] != "train"}
    trained = set(data.counts["train_theorems"])
    assert trained and not trained & held_out
    kimina_names = [json.loads(line)["name"] for line in open(resolve_shared(KIMINA.path), encoding="utf-8")]
    assert data.counts["extra_held_out"] == sum(name in held_out for name in kimina_names)
    valid_train = sum(r["label"] is True and r["split"] == "train" for r in table)
    counted = sum(
        v
        for k, v in data.counts.items()
        if k.startswith("train_")
        and k not in ("train_tokens", "train_target_tokens", "train_rows", "train_row_fill", "train_theorems")
    )
    # every valid train program of the corpus plus every kept Kimina proof is accounted for
    assert counted == valid_train + len(kimina_names) - data.counts["extra_held_out"]
    assert data.val_rows  # the corpus's valid split gives a validation loss
