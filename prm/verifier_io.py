"""What the step verifier reads and writes, and the GRPO reward on it.

Input: the statement and its numbered prose steps (a user turn). Output: one label per step in step
order, `` + + -`` (``+`` correct, ``-`` incorrect; each label one token, `` +`` / `` -``), then the
end-of-turn token. Answers are decoded under that grammar (:class:`LabelGrammar`: exactly one label
token per step of the prompt, then end of turn), so every answer labels every step; free decoding
was tried first and a tiny CPU model never learnt to stop after the last step (numbered answers,
``1:+ 2:+``, fared no better). The first ``-`` is the
predicted first error. The GRPO reward is exact agreement: 1 when every predicted label equals
Lean's, else 0 (an answer that does not parse, or labels the wrong number of steps, scores 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from leanloop.prover.prompt import CHATML_TEMPLATE

END_OF_TURN = "<|im_end|>"
INSTRUCTION = (
    "Check this proof step by step. Label every step + if it is correct, - if it is wrong "
    "(a step that builds on a wrong step is wrong too). Answer with one label per step, in order: `+ + -`."
)


def verifier_prompt(statement: str, steps: Sequence[str], tokenizer: Any) -> str:
    numbered = "\n".join(f"{i}. {' '.join(step.split())}" for i, step in enumerate(steps, 1))
    content = f"{INSTRUCTION}\n\nTheorem:\n{statement.strip()}\n\nProof:\n{numbered}"
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], chat_template=template, tokenize=False, add_generation_prompt=True
    )


def render_labels(labels: Sequence[bool]) -> str:
    return "".join(" +" if label else " -" for label in labels)


def parse_labels(text: str, count: int) -> list[bool] | None:
    """The labels of steps 1..count, or None unless the answer is exactly ``count`` labels."""
    marks = text.split(END_OF_TURN)[0].split()
    if len(marks) != count or any(m not in ("+", "-") for m in marks):
        return None
    return [m == "+" for m in marks]


def first_error(labels: Sequence[bool] | None) -> int | None:
    """Index of the first incorrect step; None when every step is correct (or no labels)."""
    if labels is None:
        return None
    return next((i for i, label in enumerate(labels) if not label), None)


def exact_agreement(text: str, truth: Sequence[bool]) -> float:
    """The GRPO reward: 1.0 when the answer's labels equal Lean's exactly, else 0.0."""
    return 1.0 if parse_labels(text, len(truth)) == list(truth) else 0.0


@dataclass
class StepLabelReward:
    """A rollout's reward as :meth:`leanloop.grpo.update.GRPOUpdate.step` reads it."""

    reward: float | None
    parsed: bool


class LabelGrammar:
    """A ``transformers`` logits processor: row b may only produce `` +`` or `` -`` for its first
    ``counts[b]`` new tokens, then the end-of-turn token (then padding)."""

    def __init__(self, tokenizer: Any, prompt_length: int, counts: Sequence[int]):
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in (" +", " -")]
        if any(len(i) != 1 for i in ids):
            raise ValueError("the tokenizer must encode ' +' and ' -' as one token each")
        self.labels = [ids[0][0], ids[1][0]]
        self.stop = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop
        self.prompt_length = prompt_length
        self.counts = list(counts)

    def __call__(self, input_ids, scores):
        import torch

        step = input_ids.shape[1] - self.prompt_length
        allowed = torch.full_like(scores, float("-inf"))
        for row, count in enumerate(self.counts):
            keep = self.labels if step < count else [self.stop] if step == count else [self.pad]
            allowed[row, keep] = scores[row, keep]
        return allowed
