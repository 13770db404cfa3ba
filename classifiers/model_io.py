"""How each classifier turns a program into model input, and model output into a score.

Both the LightningModules (training, validation) and the Evaluator loaded from a finished run use
these, so training and scoring can never format a program differently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Sequence, get_args

import torch
import torch.nn.functional as F

from classifiers.truncation import HEAD_FRACTION, truncate_head_tail
from leanloop.training.packing import pad_token_id

VALID = 1  # index of the "valid" class in the encoder's two logits
POOLINGS = ("cls", "mean")
ONETOKEN_SUFFIX = "\n-- verdict:"
TRUE_TOKEN = " true"
FALSE_TOKEN = " false"


def _program_ids(tokenizer: Any, program: str) -> list[int]:
    # verbose=False: programs longer than the model are expected here (truncated right after).
    return tokenizer(program, add_special_tokens=False, verbose=False)["input_ids"]


# A leading import / open / set_option line (not one ending in `in`: that one scopes the declaration
# below it), and a leading block comment (`/- -/`, the informal `/-- -/` docstring).
_HEADER_LINE = re.compile(r"(?:import|open|set_option)\b[^\n]*?(?<!\bin)(?:\n|\Z)")
_BLOCK_COMMENT = re.compile(r"/-.*?-/", re.S)
Preamble = Literal["keep", "drop_header", "drop_header_and_docstring"]
"""``inputs.preamble``: what of a program's start is dropped before tokenizing (:func:`strip_preamble`)."""
PREAMBLES = get_args(Preamble)


def strip_preamble(program: str, docstring: bool = False) -> str:
    """``program`` without its leading import / open / set_option lines (and, with ``docstring``,
    its leading block comments): ``inputs.preamble`` ``drop_header`` / ``drop_header_and_docstring``.

    Why: every program of the default corpus (RL-Lean miniF2F candidates) opens with the same
    header (~22 MiniLM tokens) and an informal docstring (median 60), a median 82 tokens before
    ``theorem``: more than the 63-token head of the encoder's 256-token view, so the theorem's name
    is outside the view of 28-44% of the programs (docs/results/classifiers.md, 2026-12-04). The
    header is the same in every program, so it carries no signal; the docstring does (TF-IDF on the
    docstring alone ranks about as well as on the whole file). A program that is all preamble is
    kept whole.
    """
    items = (_HEADER_LINE, _BLOCK_COMMENT) if docstring else (_HEADER_LINE,)
    rest = program.lstrip()
    while (match := next((m for m in (item.match(rest) for item in items) if m), None)) is not None:
        rest = rest[match.end() :].lstrip()
    return rest or program


def check_preamble(preamble: str) -> str:
    if preamble not in PREAMBLES:
        raise ValueError(f"inputs.preamble must be one of {PREAMBLES}, got {preamble!r}")
    return preamble


def preamble_view(program: str, preamble: str) -> str:
    """``program`` as ``inputs.preamble`` says the model sees it."""
    check_preamble(preamble)
    return program if preamble == "keep" else strip_preamble(program, docstring=preamble == "drop_header_and_docstring")


def program_budget(max_length: int, extra: int, program_tokens: int | None, what: str) -> int:
    """Tokens a program may keep: ``program_tokens`` when set (``extra`` tokens go on top and must fit
    in ``max_length``), else what ``max_length`` leaves after the ``extra``."""
    if program_tokens is not None:
        if program_tokens < 2 or program_tokens + extra > max_length:
            raise ValueError(
                f"program_tokens={program_tokens} plus {extra} token(s) of {what} must fit in "
                f"max_length={max_length} (and be at least 2)"
            )
        return program_tokens
    if max_length - extra < 2:
        raise ValueError(f"max_length={max_length} leaves no room for a program after {what}")
    return max_length - extra


@dataclass
class EncoderInputs:
    """``[CLS] head+tail [SEP]`` for a sequence classifier."""

    tokenizer: Any
    max_length: int
    head_fraction: float = HEAD_FRACTION
    pooling: str = "cls"
    """``cls`` or ``mean``: how the token states become the classifier head's input."""
    program_tokens: int | None = None
    """The program's budget with the special tokens on top; None: what max_length leaves."""
    preamble: str = "keep"
    """What of the program's start is dropped before tokenizing (:data:`PREAMBLES`)."""

    def __post_init__(self) -> None:
        check_preamble(self.preamble)  # an unknown value is refused here, not at the first program
        if self.pooling not in POOLINGS:
            raise ValueError(f"encoder pooling must be one of {POOLINGS}, got {self.pooling!r}")
        # The tokenizer's own template: where its special tokens go around one sequence.
        probe = _program_ids(self.tokenizer, "a")
        full = self.tokenizer("a", add_special_tokens=True)["input_ids"]
        start = next((i for i in range(len(full)) if full[i : i + len(probe)] == probe), None)
        if start is None:
            raise ValueError(
                f"cannot locate the sequence inside {type(self.tokenizer).__name__}'s special-token template"
            )
        self.prefix, self.suffix = full[:start], full[start + len(probe) :]
        self.budget = program_budget(
            self.max_length, len(self.prefix) + len(self.suffix), self.program_tokens, "special tokens"
        )
        if self.tokenizer.pad_token_id is None:
            raise ValueError("the encoder's tokenizer has no pad token; set one in its tokenizer_config.json")

    def encode(self, program: str) -> list[int]:
        program = preamble_view(program, self.preamble)
        ids = truncate_head_tail(_program_ids(self.tokenizer, program), self.budget, self.head_fraction)
        return self.prefix + ids + self.suffix

    def collate(self, encoded: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self.tokenizer.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}


def prepare_pooling(model: Any, pooling: str) -> None:
    """Make ``model`` pool as ``pooling`` says, or explain why it cannot.

    ModernBERT-style models pool by their config (``classifier_pooling``), which is set here and
    saved with the weights. For ``mean`` on other models, the head must be BERT's: ``dropout`` then a
    linear ``classifier`` over one vector (a RoBERTa-style head reads the whole sequence instead).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"encoder pooling must be one of {POOLINGS}, got {pooling!r}")
    if hasattr(model.config, "classifier_pooling"):
        model.config.classifier_pooling = pooling
        return
    if pooling == "mean" and not (
        isinstance(getattr(model, "classifier", None), torch.nn.Linear) and hasattr(model, "dropout")
    ):
        raise ValueError(
            f"pooling: mean needs a BERT-style head (dropout + linear classifier); "
            f"{type(model).__name__} has none. Use pooling: cls for this model"
        )


def encoder_logits(model: Any, batch: dict[str, torch.Tensor], pooling: str = "cls") -> torch.Tensor:
    """[B, 2] class logits (index 1 = valid)."""
    if pooling == "cls" or hasattr(model.config, "classifier_pooling"):
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    hidden = model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # padding positions do not count
    return model.classifier(model.dropout(pooled))


def encoder_scores(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().softmax(-1)[:, VALID]


@dataclass
class OneTokenInputs:
    """Raw program + fixed suffix; the next token is the verdict."""

    tokenizer: Any
    max_length: int
    head_fraction: float = HEAD_FRACTION
    suffix: str = ONETOKEN_SUFFIX
    true_token: str = TRUE_TOKEN
    false_token: str = FALSE_TOKEN
    program_tokens: int | None = None
    """The program's budget with the suffix on top; None: what max_length leaves."""
    preamble: str = "keep"
    """What of the program's start is dropped before tokenizing (:data:`PREAMBLES`)."""

    def __post_init__(self) -> None:
        check_preamble(self.preamble)  # an unknown value is refused here, not at the first program
        self.suffix_ids = _program_ids(self.tokenizer, self.suffix)
        self.true_id = self._single(self.true_token)
        self.false_id = self._single(self.false_token)
        if self.true_id == self.false_id:
            raise ValueError("true_token and false_token map to the same id")
        self.budget = program_budget(self.max_length, len(self.suffix_ids), self.program_tokens, "the suffix")
        self.pad_id = pad_token_id(self.tokenizer)
        if self.pad_id is None:
            raise ValueError("the one-token tokenizer has neither a pad nor an eos token to pad with")

    def _single(self, text: str) -> int:
        ids = _program_ids(self.tokenizer, text)
        if len(ids) != 1:
            raise ValueError(
                f"verdict token {text!r} is {len(ids)} tokens in this vocabulary; pick a single-token word"
            )
        return ids[0]

    def encode(self, program: str) -> list[int]:
        program = preamble_view(program, self.preamble)
        ids = _program_ids(self.tokenizer, program.rstrip())
        return truncate_head_tail(ids, self.budget, self.head_fraction) + self.suffix_ids

    def target(self, label: bool) -> int:
        return self.true_id if label else self.false_id

    def collate(self, encoded: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        # Left padding: the verdict position is the last column for every row, so one
        # ``logits_to_keep=1`` forward gives it without materialising [B, L, vocab] logits.
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention_mask[row, width - len(ids) :] = 1
        # Positions count real tokens only, so a padded row sees exactly the positions it would alone.
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}

    def collate_packed(self, encoded: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """One row holding every program: positions restart at 0 for each, and with no attention
        mask transformers builds the block-diagonal causal mask from them (leanloop.training.packing),
        so a program attends to itself alone; ``verdict_positions`` is each program's last token."""
        ids = [i for program in encoded for i in program]
        positions = [p for program in encoded for p in range(len(program))]
        ends = torch.tensor([len(p) for p in encoded]).cumsum(0) - 1
        return {"input_ids": torch.tensor([ids]), "position_ids": torch.tensor([positions]), "verdict_positions": ends}


def onetoken_logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, vocab] next-token logits at the verdict position (one forward, last column only); a packed
    row (``verdict_positions``) gives one row of logits per program in it."""
    if "verdict_positions" in batch:
        out = model(
            input_ids=batch["input_ids"],
            position_ids=batch["position_ids"],
            logits_to_keep=batch["verdict_positions"],
            use_cache=False,
        )
        return out.logits[0]
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=1,
        use_cache=False,
    )
    return out.logits[:, -1, :]


def onetoken_scores(logits: torch.Tensor, true_id: int, false_id: int) -> torch.Tensor:
    """p(true) / (p(true) + p(false)): the softmax normaliser cancels, leaving a sigmoid of the gap."""
    logits = logits.float()
    return torch.sigmoid(logits[:, true_id] - logits[:, false_id])


def onetoken_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy over the full vocabulary: the model learns to emit the verdict token."""
    return F.cross_entropy(logits.float(), targets, reduction=reduction)
