"""What the step verifier reads and writes, and the GRPO reward on it.

Two layouts (``model.layout``); each label is one token, `` +`` (correct) or `` -`` (incorrect).
``after_each_step`` (the default): the statement is the user turn; the answer repeats each numbered
step with its label right after it, so step k's label is read where step k ends and sees steps 1..k
only (a process reward model's layout). ``after_proof``: the statement and all numbered steps are the
user turn, then one label per step (`` + + -``) and the end of turn, decoded under
:class:`LabelGrammar` (exactly one label per step: a tiny model decoding freely never learnt to stop).
On the embedded default the stepwise layout ranks wrong steps far better (docs/results/prm.md). The
first ``-`` is the predicted first error. The GRPO reward is exact agreement: 1 when every predicted
label equals Lean's, else 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

from leanloop.prover.prompt import CHATML_TEMPLATE

Layout = Literal["after_proof", "after_each_step"]

END_OF_TURN = "<|im_end|>"
INSTRUCTION = (
    "Check this proof step by step. Label every step + if it is correct, - if it is wrong "
    "(a step that builds on a wrong step is wrong too). Answer with one label per step, in order: `+ + -`."
)


STEPWISE_INSTRUCTION = (
    "Check this proof step by step. Repeat each step and label it right after it: + if it is correct, - if it "
    "is wrong (a step that builds on a wrong step is wrong too)."
)


def _user_turn(content: str, tokenizer: Any) -> str:
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], chat_template=template, tokenize=False, add_generation_prompt=True
    )


def _numbered(i: int, step: str) -> str:
    return f"{i}. {' '.join(step.split())}"


def verifier_prompt(statement: str, steps: Sequence[str], tokenizer: Any) -> str:
    """The ``after_proof`` layout's prompt: the whole proof, before any label."""
    numbered = "\n".join(_numbered(i, step) for i, step in enumerate(steps, 1))
    return _user_turn(f"{INSTRUCTION}\n\nTheorem:\n{statement.strip()}\n\nProof:\n{numbered}", tokenizer)


@dataclass
class EncodedProof:
    """A proof as the verifier reads it with its labels: token ids (prompt, answer, end of turn), the
    index in ``ids`` of each step's label token, and where the answer (the assistant turn) starts."""

    ids: list[int]
    slots: list[int]
    answer_start: int

    def relabelled(self, labels: Sequence[bool] | None, tokenizer: Any) -> "EncodedProof":
        """The same proof with other labels (None: every step correct, as scoring reads it)."""
        plus, minus = label_ids(tokenizer)
        ids = list(self.ids)
        for slot, ok in zip(self.slots, labels if labels is not None else [True] * len(self.slots)):
            ids[slot] = plus if ok else minus
        return EncodedProof(ids, list(self.slots), self.answer_start)


def encode_proof(
    statement: str, steps: Sequence[str], labels: Sequence[bool] | None, tokenizer: Any, layout: Layout
) -> EncodedProof:
    """``labels`` None: every step labelled correct (scoring reads P(`` -``) at each slot after correct
    steps). Pieces are tokenized apart and the label ids put between them, so a label is one token
    whatever text surrounds it."""
    plus, minus = label_ids(tokenizer)
    marks = [plus if ok else minus for ok in (labels if labels is not None else [True] * len(steps))]
    eot = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if layout == "after_proof":
        ids = tokenizer(verifier_prompt(statement, steps, tokenizer), add_special_tokens=False)["input_ids"]
        start = len(ids)
        return EncodedProof(ids + marks + [eot], list(range(start, start + len(marks))), start)
    if layout != "after_each_step":
        raise ValueError(f"unknown verifier layout {layout!r}: after_proof or after_each_step")
    prompt = _user_turn(f"{STEPWISE_INSTRUCTION}\n\nTheorem:\n{statement.strip()}", tokenizer)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    start, slots = len(ids), []
    for i, (step, mark) in enumerate(zip(steps, marks), 1):
        ids += tokenizer(("\n" if i > 1 else "") + _numbered(i, step), add_special_tokens=False)["input_ids"]
        slots.append(len(ids))
        ids.append(mark)
    return EncodedProof(ids + [eot], slots, start)


def label_ids(tokenizer: Any) -> tuple[int, int]:
    """The token ids of `` +`` and `` -``."""
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in (" +", " -")]
    if any(len(i) != 1 for i in ids):
        raise ValueError("the tokenizer must encode ' +' and ' -' as one token each")
    return ids[0][0], ids[1][0]


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
        self.labels = list(label_ids(tokenizer))
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
