"""The verifier's answers for many prompts: greedy step labels under the label grammar (validation
and prm-eval), and its P(step wrong) for every step (prm-eval's decision rules)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from prm.verifier_io import END_OF_TURN, LabelGrammar


@torch.no_grad()
def greedy_answers(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    counts: Sequence[int],
    batch_size: int = 8,
    progress: bool = False,
) -> list[str]:
    """Greedy answers under the label grammar: ``counts[i]`` labels for prompt i, then end of turn."""
    from transformers import LogitsProcessorList

    from tqdm import tqdm

    stop_ids = [
        i
        for i in {tokenizer.convert_tokens_to_ids(END_OF_TURN), tokenizer.eos_token_id}
        if i is not None and i != tokenizer.unk_token_id
    ]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    answers: list[str] = []
    try:
        for start in tqdm(range(0, len(prompts), batch_size), desc="[prm] verifier answers", disable=not progress):
            batch = tokenizer(
                list(prompts[start : start + batch_size]),
                add_special_tokens=False,
                padding=True,
                padding_side="left",
                return_tensors="pt",
            ).to(device)
            counts_here = list(counts[start : start + batch_size])
            grammar = LabelGrammar(tokenizer, batch["input_ids"].shape[1], counts_here)
            out = model.generate(
                **batch,
                do_sample=False,
                max_new_tokens=max(counts_here) + 1,
                eos_token_id=stop_ids,
                pad_token_id=pad,
                logits_processor=LogitsProcessorList([grammar]),
            )
            for row in out[:, batch["input_ids"].shape[1] :].tolist():
                cut = next((i for i, t in enumerate(row) if t in stop_ids), len(row))
                answers.append(tokenizer.decode(row[:cut], skip_special_tokens=True))
    finally:
        model.train(was_training)
    return answers


@torch.no_grad()
def wrong_probabilities(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    counts: Sequence[int],
    batch_size: int = 8,
    progress: bool = False,
    cumulative: bool = True,
) -> list[list[float]]:
    """P(step k is wrong) for every step of every prompt: one forward pass over the prompt followed by
    `` +`` for each step gives the verifier's hazard h_j = P(`` -`` at j | steps before j correct);
    a step is wrong when it or any earlier step is (Lean's labels are first-error shaped), so
    P(wrong at k) = 1 - prod_{j <= k} (1 - h_j), which never falls along a proof. ``cumulative=False``:
    the hazards h_k themselves (bench.prm_rules compares rules on them)."""
    from tqdm import tqdm

    grammar = LabelGrammar(tokenizer, 0, [])
    plus, minus = grammar.labels
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[list[float]] = []
    try:
        for start in tqdm(range(0, len(prompts), batch_size), desc="[prm] step scores", disable=not progress):
            texts = list(prompts[start : start + batch_size])
            counts_here = list(counts[start : start + batch_size])
            prompt_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
            rows = [p + [plus] * n for p, n in zip(prompt_ids, counts_here)]
            width = max(map(len, rows))
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else plus
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, row in enumerate(rows):  # left padding: the label positions line up at the end
                ids[i, width - len(row) :], mask[i, width - len(row) :] = torch.tensor(row), 1
            causal = model.get_base_model() if hasattr(model, "get_base_model") else model
            positions = (mask.cumsum(-1) - 1).clamp(min=0)  # each row counts from its first real token
            hidden = causal.base_model(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                use_cache=False,
            ).last_hidden_state
            # only the two label tokens' logits: the full vocabulary at every position would be gigabytes
            head = causal.get_output_embeddings().weight[[plus, minus]]
            for i, n in enumerate(counts_here):
                # the hidden state at position p predicts token p + 1: the n label slots start at width - n
                logits = hidden[i, width - n - 1 : width - 1].float() @ head.float().T
                hazard = torch.softmax(logits, -1)[:, 1]
                out.append((1 - torch.cumprod(1 - hazard, 0) if cumulative else hazard).tolist())
    finally:
        model.train(was_training)
    return out
