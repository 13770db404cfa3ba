"""Head+tail truncation shared by both classifiers ("Learning Lean Feedback", Section 4.1).

A program longer than the context keeps its first quarter and its last three quarters: at the
paper's 8,192-token context that is the first 2,048 and the last 6,144 tokens. The tail gets more
room because the verdict is decided where the proof is (the end of the file); the head keeps the
imports and the theorem statement (at the embedded encoder's 256 tokens the 63-token head is mostly
the default corpus's shared header and docstring, and the statement is often cut: ``inputs.preamble``
drops them first). At other contexts the same 1:3 split applies to the budget left
after the model's own tokens (an encoder's [CLS]/[SEP], the one-token prompt suffix): MiniLM's 512
positions minus [CLS] and [SEP] leave 510 = 127 head + 383 tail.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

HEAD_FRACTION = 0.25  # 2,048 / 8,192

T = TypeVar("T")


def head_tail_sizes(budget: int, head_fraction: float = HEAD_FRACTION) -> tuple[int, int]:
    """(head, tail) token counts for a program that does not fit in ``budget`` tokens."""
    if budget < 2:
        raise ValueError(f"truncation budget must be at least 2 tokens (one head, one tail), got {budget}")
    if not 0.0 < head_fraction < 1.0:
        raise ValueError(f"head_fraction must lie strictly between 0 and 1, got {head_fraction}")
    head = max(1, int(budget * head_fraction))
    return head, budget - head


def truncate_head_tail(ids: Sequence[T], budget: int, head_fraction: float = HEAD_FRACTION) -> list[T]:
    """``ids`` unchanged if it fits in ``budget``, else its first ``head`` and last ``tail`` items."""
    ids = list(ids)
    if len(ids) <= budget:
        return ids
    head, tail = head_tail_sizes(budget, head_fraction)
    return ids[:head] + ids[len(ids) - tail :]
