"""The LeanPRM reviewer and correspondence judge (LeanPRM step 3) and the chat wrapper their
model versions share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Sequence

from prm.paired import PairedStep

Verdict = Literal["mathematical", "syntax", "unclear"]


@dataclass(frozen=True)
class Failure:
    statement: str
    steps: tuple[PairedStep, ...]
    index: int
    output: str


@dataclass(frozen=True)
class ReviewDecision:
    verdict: Verdict
    reason: str
    repair: str | None = None  # the repaired tactic of the failing step (syntax only)


class Reviewer(Protocol):
    name: str

    def review(self, failure: Failure) -> ReviewDecision: ...


@dataclass
class ReviewRule:
    """``pattern`` (regex) found in the compiler output -> ``verdict``; a syntax rule may repair the
    tactic by replacing ``replace[0]`` with ``replace[1]``."""

    pattern: str
    verdict: Verdict
    reason: str = ""
    replace: list[str] | None = None


class RuleReviewer:
    """A scripted reviewer (first matching rule wins; ``otherwise`` when none matches): the stand-in
    for a reviewer model in tests, and a cheap pre-filter for obvious parse errors."""

    name = "rules"

    def __init__(self, rules: Sequence[ReviewRule], otherwise: Verdict = "mathematical"):
        self.rules = list(rules)
        self.otherwise = otherwise

    def review(self, failure: Failure) -> ReviewDecision:
        for rule in self.rules:
            if re.search(rule.pattern, failure.output):
                repair = None
                if rule.verdict == "syntax" and rule.replace:
                    repair = failure.steps[failure.index].tactic.replace(rule.replace[0], rule.replace[1])
                return ReviewDecision(rule.verdict, rule.reason or f"compiler output matches {rule.pattern!r}", repair)
        return ReviewDecision(self.otherwise, "no rule matched")


REVIEW_PROMPT = (
    "A Lean 4 proof step failed. Decide whether the failure is a SYNTAX problem (the step's idea is "
    "right but the Lean text is malformed or names something wrongly) or MATHEMATICAL (the step's "
    "claim or reasoning is wrong). For SYNTAX, give the repaired tactic.\n\nTheorem:\n{statement}\n\n"
    "Step {number}: {prose}\n```lean4\n{tactic}\n```\n\nLean says:\n{output}\n\n"
    "Answer as `VERDICT: SYNTAX` or `VERDICT: MATHEMATICAL`, then for SYNTAX a ```lean4 block with the repair."
)
JUDGE_PROMPT = (
    "Does the Lean tactic do what the sentence says?\n\nSentence: {prose}\n```lean4\n{tactic}\n```\n\nAnswer YES or NO."
)


class _Chat:
    """Greedy answers from a causal LM (a reviewer or judge model)."""

    def __init__(self, spec: Any, max_new_tokens: int):
        from leanloop.training.models import load_model, load_tokenizer

        self.tokenizer = load_tokenizer(spec)
        self.model = load_model(spec, tokenizer=self.tokenizer).eval()
        self.max_new_tokens = max_new_tokens

    def ask(self, text: str) -> str:
        import torch

        from leanloop.prover.prompt import CHATML_TEMPLATE

        template = None if getattr(self.tokenizer, "chat_template", None) else CHATML_TEMPLATE
        prompt = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], chat_template=template, tokenize=False, add_generation_prompt=True
        )
        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        return self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


class ModelReviewer:
    """A second model reads the first failure's compiler output (LeanPRM step 3)."""

    name = "model"

    def __init__(self, spec: Any, max_new_tokens: int = 256):
        self.chat = _Chat(spec, max_new_tokens)

    def review(self, failure: Failure) -> ReviewDecision:
        step = failure.steps[failure.index]
        answer = self.chat.ask(
            REVIEW_PROMPT.format(
                statement=failure.statement,
                number=failure.index + 1,
                prose=step.prose,
                tactic=step.tactic,
                output=failure.output[:2000],
            )
        )
        return parse_review(answer)


def parse_review(answer: str) -> ReviewDecision:
    verdict = re.search(r"VERDICT:\s*(SYNTAX|MATHEMATICAL)", answer, re.IGNORECASE)
    if verdict is None:
        return ReviewDecision("unclear", f"reviewer answer has no VERDICT: {answer.strip()[:120]!r}")
    if verdict.group(1).upper() == "MATHEMATICAL":
        return ReviewDecision("mathematical", "reviewer: mathematical")
    block = re.search(r"```(?:lean4?)?\n(.*?)```", answer[verdict.end() :], re.DOTALL)
    repair = block.group(1).strip() if block and block.group(1).strip() else None
    return ReviewDecision("syntax", "reviewer: syntax" + ("" if repair else " (no repair given)"), repair)


class CorrespondenceJudge(Protocol):
    name: str

    def judge(self, prose: str, tactic: str) -> tuple[bool, str]: ...


class ModelJudge:
    name = "model"

    def __init__(self, spec: Any, max_new_tokens: int = 4):
        self.chat = _Chat(spec, max_new_tokens)

    def judge(self, prose: str, tactic: str) -> tuple[bool, str]:
        answer = self.chat.ask(JUDGE_PROMPT.format(prose=prose, tactic=tactic)).strip().upper()
        return answer.startswith("YES"), f"judge answered {answer[:20]!r}"
