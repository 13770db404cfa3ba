"""The autoformalizer's prompts: one fixed system prompt, Qwen chat markup, optional premises.

SFT (stage 1), GRPO (stage 2), evaluation and the repair loop all build prompts here, so the policy
always sees the same format.
"""

from __future__ import annotations

import re

SYSTEM_PROMPT = (
    "You are an expert in Lean 4 and Mathlib. Translate the informal mathematical statement into a "
    "single Lean 4 theorem statement that type-checks against Mathlib. Output only the theorem, "
    "ending in `:= by sorry`."
)


def chat(system: str, user: str) -> str:
    """Qwen's ChatML, ending where the assistant's answer starts."""
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def formalize_prompt(informal: str, premises: str = "") -> str:
    """The first turn: the informal statement, with retrieved Mathlib declarations before it."""
    informal = informal.strip()
    if not informal:
        raise ValueError("empty informal statement")
    user = f"{premises}\nInformal statement:\n{informal}" if premises else f"Informal statement:\n{informal}"
    return chat(SYSTEM_PROMPT, user)


_FENCE = re.compile(r"```(?:lean4?|Lean)?\s*\n(.*?)```", re.S)


def extract_statement(completion: str) -> str:
    """The Lean text of a completion: the first fenced block if there is one, else the text up to
    the end-of-turn marker."""
    text = completion.split("<|im_end|>")[0]
    fenced = _FENCE.search(text)
    return (fenced.group(1) if fenced else text).strip()
