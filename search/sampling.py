"""Diverse tactic sampling (NanoProof Section 3.7): Gumbel-top-k without replacement over the first
token, each first token opening at most ``cap`` tactics, and dedupe of identical tactics."""

from __future__ import annotations

import math
from typing import Sequence

import torch

from search.goals import normalize_tactic


def gumbel_top_k(logits: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """k distinct indices, a sample without replacement from softmax(logits) (the Gumbel-top-k
    trick: the top k of logits + Gumbel noise). Indices whose logit is -inf are never drawn."""
    if k <= 0:
        return torch.empty(0, dtype=torch.long)
    uniform = torch.rand(logits.shape, generator=generator, dtype=torch.float64).clamp_(1e-12, 1 - 1e-12)
    gumbel = -torch.log(-torch.log(uniform))
    scores = logits.double() + gumbel
    finite = int(torch.isfinite(logits).sum())
    return torch.topk(scores, min(k, finite)).indices


def first_token_plan(
    logits: torch.Tensor, samples: int, cap: int, generator: torch.Generator | None = None
) -> list[int]:
    """First tokens for ``samples`` tactics: ceil(samples / cap) distinct tokens by Gumbel-top-k,
    each used at most ``cap`` times (in draw order), ``samples`` in all when enough tokens exist."""
    if cap < 1:
        raise ValueError(f"first_token_cap must be >= 1, got {cap}")
    distinct = gumbel_top_k(logits, math.ceil(samples / cap), generator).tolist()
    plan: list[int] = []
    for repeat in range(cap):
        for token in distinct:
            if len(plan) < samples:
                plan.append(token)
    return plan


def dedupe(tactics: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Identical tactics (up to whitespace) once, keeping the first spelling and the highest score."""
    best: dict[str, tuple[str, float]] = {}
    for tactic, score in tactics:
        key = normalize_tactic(tactic)
        if not key:
            continue
        if key not in best or score > best[key][1]:
            best[key] = (best.get(key, (tactic, score))[0], score)
    return list(best.values())
