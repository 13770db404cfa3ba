"""One causal transformer as actor and critic (NanoProof Sections 3.2-3.3)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from search.mcts import Proposal
from search.sampling import dedupe, first_token_plan

PROMPT = "[GOAL]\n{state}\n[PROOFSTEP]"
# bucket k holds distances d with BUCKET_BOUNDS[k-1] < d <= BUCKET_BOUNDS[k]; the last is open-ended
BUCKET_BOUNDS = (1, 2, 3, 4, 5, 6, 8, 12, 16, math.inf)
BUCKET_MIDPOINTS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.5, 10.5, 14.5, 20.0)


def value_bucket(distance: int) -> int:
    return next(k for k, bound in enumerate(BUCKET_BOUNDS) if distance <= bound)


def value_token_ids(tokenizer: Any) -> list[int]:
    """The ten digit tokens ``0``..``9`` of the vocabulary (each must be a single token)."""
    ids = []
    for digit in range(10):
        pieces = tokenizer(str(digit), add_special_tokens=False)["input_ids"]
        if len(pieces) != 1:
            raise ValueError(f"the tokenizer splits the digit {digit} into {pieces}: value buckets need single tokens")
        ids.append(pieces[0])
    return ids


def eos_id(tokenizer: Any) -> int:
    return tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id


def encode_step(tokenizer: Any, state: str, tactic: str, depth: int, max_length: int) -> dict[str, Any] | None:
    """Token ids and labels (prompt masked) of one tree edge, or None when it does not fit."""
    prompt = tokenizer(PROMPT.format(state=state), add_special_tokens=False)["input_ids"]
    value = value_token_ids(tokenizer)[value_bucket(max(depth, 1))]
    body = tokenizer(" " + tactic, add_special_tokens=False)["input_ids"] + [eos_id(tokenizer)]
    ids = prompt + [value] + body
    if len(ids) > max_length:
        return None
    return {
        "input_ids": ids,
        "labels": [-100] * len(prompt) + [value] + body,
        "value_pos": len(prompt) - 1,
        "value_label": value_bucket(max(depth, 1)),
    }


def _left_pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.tensor(row)
        mask[i, width - len(row) :] = 1
    return ids, mask


class ModelPolicy:
    """The search's policy and critic from one causal LM (transformers) and its tokenizer."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 64,
        first_token_cap: int = 2,
        temperature: float = 1.0,
        max_prompt_tokens: int = 1024,
        seed: int = 0,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.first_token_cap = first_token_cap
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.values = value_token_ids(tokenizer)
        self.eos = eos_id(tokenizer)
        self.generator = torch.Generator().manual_seed(seed)
        self.calls = 0

    @classmethod
    def from_pretrained(cls, path: str, **options: Any) -> "ModelPolicy":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return cls(AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path), **options)

    def _prompt(self, state: str) -> list[int]:
        ids = self.tokenizer(PROMPT.format(state=state), add_special_tokens=False)["input_ids"]
        return ids[-self.max_prompt_tokens :]  # a very long goal keeps its end (the target)

    @torch.no_grad()
    def _last_logits(self, rows: list[list[int]]) -> torch.Tensor:
        ids, mask = _left_pad(rows, self.eos)
        return self.model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits[:, -1, :].float()

    @torch.no_grad()
    def critic(self, states: Sequence[str]) -> list[float]:
        """Expected tactics to the end of the proof, per goal."""
        logits = self._last_logits([self._prompt(s) for s in states])
        probs = torch.softmax(logits[:, self.values], dim=-1)
        return (probs @ torch.tensor(BUCKET_MIDPOINTS)).tolist()

    @torch.no_grad()
    def propose(self, states: Sequence[str], samples: int) -> list[Proposal]:
        """One forward pass over the prompts gives the critic's value distribution (the next-token
        distribution over the ten digit tokens); the most likely value token is then fed through
        the same key/value cache (one token per goal) for the tactics' first-token distribution;
        ``generate`` samples the continuations with its scores already normalized, so a tactic's
        log-probability is a gather, not a second log-softmax over the vocabulary."""
        self.calls += 1
        prompts = [self._prompt(s) for s in states]
        ids, mask = _left_pad(prompts, self.eos)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        probs = torch.softmax(out.logits[:, -1, self.values].float(), dim=-1)
        distances = (probs @ torch.tensor(BUCKET_MIDPOINTS)).tolist()
        chosen = torch.tensor([self.values[int(k)] for k in probs.argmax(-1)]).unsqueeze(1)
        mask = torch.cat([mask, torch.ones_like(chosen)], dim=1)
        step = self.model(
            input_ids=chosen, attention_mask=mask, position_ids=positions[:, -1:] + 1, cache=out.cache, use_cache=False
        )
        first_logits = torch.log_softmax(step.logits[:, -1, :].float() / max(self.temperature, 1e-6), dim=-1)
        first_logits[:, self.eos] = -math.inf  # an empty tactic is no tactic
        conditioned = [p + [int(v)] for p, v in zip(prompts, chosen[:, 0])]
        rows, owners, first_lp = [], [], []
        for index, (prefix, logits) in enumerate(zip(conditioned, first_logits)):
            for token in first_token_plan(logits, samples, self.first_token_cap, self.generator):
                rows.append(prefix + [token])
                owners.append(index)
                first_lp.append(float(logits[token]))
        texts, scores = self._continue(rows)
        proposals = [Proposal([], d) for d in distances]
        for owner, text, score, lp in zip(owners, texts, scores, first_lp):
            proposals[owner].tactics.append((text, lp + score))
        for proposal in proposals:
            proposal.tactics = dedupe(proposal.tactics)
        return proposals

    def _continue(self, rows: list[list[int]]) -> tuple[list[str], list[float]]:
        """Sampled continuations of each row (its last token is the tactic's first), decoded from
        the first token, with the continuation's log-probability (``renormalize_logits``: the
        scores ``generate`` returns are the log-probabilities it sampled from)."""
        if not rows:
            return [], []
        ids, mask = _left_pad(rows, self.eos)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator))
        torch.manual_seed(seed)  # generate() samples from the global generator
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=self.temperature,
            top_k=0,
            max_new_tokens=self.max_new_tokens,
            eos_token_id=self.eos,
            pad_token_id=self.eos,
            output_scores=True,
            return_dict_in_generate=True,
            renormalize_logits=True,
        )
        new = out.sequences[:, ids.shape[1] :]
        # per step, so no (rows, steps, vocabulary) tensor is ever built
        step_lp = (
            torch.cat([scores.gather(-1, new[:, i : i + 1]) for i, scores in enumerate(out.scores)], dim=1)
            if out.scores
            else torch.zeros(new.shape)
        )
        texts, scores = [], []
        for row, tokens, lps in zip(rows, new, step_lp):
            keep = []
            total = 0.0
            for token, lp in zip(tokens.tolist(), lps.tolist()):
                if token == self.eos:
                    break
                keep.append(token)
                total += lp
            texts.append(self.tokenizer.decode([row[-1]] + keep, skip_special_tokens=True).strip())
            scores.append(total)
        return texts, scores
