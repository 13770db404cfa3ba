"""The verifier's answers for many proofs: greedy step labels (validation and prm-eval), and its
P(step wrong) for every step (prm-eval's decision rules)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from prm.verifier_io import END_OF_TURN, EncodedProof, LabelGrammar, Layout, label_ids, parse_labels


@torch.no_grad()
def greedy_answers(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str] | Sequence[list[int]],
    counts: Sequence[int],
    batch_size: int = 8,
    progress: bool = False,
) -> list[str]:
    """Greedy answers under the label grammar: ``counts[i]`` labels for prompt i (text or token ids),
    then end of turn."""
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
            chunk = list(prompts[start : start + batch_size])
            if isinstance(chunk[0], str):
                chunk = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in chunk]
            batch = tokenizer.pad({"input_ids": chunk}, padding=True, padding_side="left", return_tensors="pt").to(
                device
            )
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
    proofs: Sequence[EncodedProof],
    batch_size: int = 8,
    progress: bool = False,
    cumulative: bool = True,
) -> list[list[float]]:
    """P(step k is wrong) for every step of every proof (encoded with every step labelled correct,
    :func:`prm.verifier_io.encode_proof` with ``labels=None``): one forward pass gives the verifier's
    hazard h_j = P(`` -`` at j | steps before j correct); a step is wrong when it or any earlier step
    is (Lean's labels are first-error shaped), so P(wrong at k) = 1 - prod_{j <= k} (1 - h_j), which
    never falls along a proof. ``cumulative=False``: the hazards h_k themselves."""
    from tqdm import tqdm

    plus, minus = label_ids(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else plus
    # only the two label tokens' logits: the full vocabulary at every position would be gigabytes
    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = causal.get_output_embeddings().weight[[plus, minus]].float()
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[list[float]] = []
    try:
        for start in tqdm(range(0, len(proofs), batch_size), desc="[prm] step scores", disable=not progress):
            batch = proofs[start : start + batch_size]
            width = max(len(p.ids) for p in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, p in enumerate(batch):  # left padding: each row's slots shift by its padding
                ids[i, width - len(p.ids) :], mask[i, width - len(p.ids) :] = torch.tensor(p.ids), 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)  # each row counts from its first real token
            hidden = causal.base_model(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                use_cache=False,
            ).last_hidden_state
            for i, p in enumerate(batch):
                # the hidden state at position s - 1 predicts the label token at slot s
                rows = torch.tensor([width - len(p.ids) + s - 1 for s in p.slots], device=device)
                hazard = torch.softmax(hidden[i, rows].float() @ head.T, -1)[:, 1]
                out.append((1 - torch.cumprod(1 - hazard, 0) if cumulative else hazard).tolist())
    finally:
        model.train(was_training)
    return out


def greedy_labels(
    model: Any,
    tokenizer: Any,
    proofs: Sequence[EncodedProof],
    layout: Layout,
    batch_size: int = 8,
    progress: bool = False,
) -> list[list[bool] | None]:
    """The verifier's greedy labels. ``after_proof``: decoded under the label grammar. ``after_each_step``:
    each label is read where its step ends, so greedy decoding is ``+`` while P(`` -`` | steps so far
    correct) < 0.5 and, from the first step where it is not, ``-`` (the first-error shape Lean's labels
    have: one forward pass)."""
    if layout == "after_proof":
        prompts = [p.ids[: p.answer_start] for p in proofs]
        answers = greedy_answers(model, tokenizer, prompts, [len(p.slots) for p in proofs], batch_size, progress)
        return [parse_labels(a, len(p.slots)) for a, p in zip(answers, proofs)]
    hazards = wrong_probabilities(model, tokenizer, proofs, batch_size, progress, cumulative=False)
    out = []
    for h in hazards:
        first = next((k for k, x in enumerate(h) if x >= 0.5), len(h))
        out.append([k < first for k in range(len(h))])
    return out


def model_layout(spec: Any, layout: Layout | None = None) -> Layout:
    """The layout a verifier was trained with: ``layout`` when given, else what its prm run's manifest
    records (a run from before layouts: ``after_proof``; a model that is not a prm run: the stage's
    default, ``after_each_step``)."""
    if layout is not None:
        return layout
    if spec.run_dir() is None:
        return "after_each_step"
    from leanloop.artifacts import read_manifest

    return read_manifest(spec.run_dir()).get("model", {}).get("layout", "after_proof")
