"""Greedy step-label answers of a verifier model for many prompts (validation and prm-eval)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from prm.step_labels import END_OF_TURN, LabelGrammar


@torch.no_grad()
def greedy_answers(model: Any, tokenizer: Any, prompts: Sequence[str], counts: Sequence[int],
                   batch_size: int = 8, progress: bool = False) -> list[str]:
    """Greedy answers under the label grammar: ``counts[i]`` labels for prompt i, then end of turn."""
    from transformers import LogitsProcessorList

    from tqdm import tqdm

    stop_ids = [i for i in {tokenizer.convert_tokens_to_ids(END_OF_TURN), tokenizer.eos_token_id}
                if i is not None and i != tokenizer.unk_token_id]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    answers: list[str] = []
    try:
        for start in tqdm(range(0, len(prompts), batch_size), desc="[prm] verifier answers", disable=not progress):
            batch = tokenizer(list(prompts[start:start + batch_size]), add_special_tokens=False, padding=True,
                              padding_side="left", return_tensors="pt").to(device)
            counts_here = list(counts[start:start + batch_size])
            grammar = LabelGrammar(tokenizer, batch["input_ids"].shape[1], counts_here)
            out = model.generate(**batch, do_sample=False, max_new_tokens=max(counts_here) + 1, eos_token_id=stop_ids,
                                 pad_token_id=pad, logits_processor=LogitsProcessorList([grammar]))
            for row in out[:, batch["input_ids"].shape[1]:].tolist():
                cut = next((i for i, t in enumerate(row) if t in stop_ids), len(row))
                answers.append(tokenizer.decode(row[:cut], skip_special_tokens=True))
    finally:
        model.train(was_training)
    return answers
