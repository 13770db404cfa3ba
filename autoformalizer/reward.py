"""The gated autoformalization reward (GRPO stage 2).

    0.0                        not well-formed (unbalanced delimiters, no theorem, no type signature),
                               or rejected by the acceptance policy's deterministic prechecks
    0.1                        well-formed, but the statement does not type-check against Mathlib
    0.3 + 0.7 * faithfulness   type-checks (compiled with ``sorry``; only the sorry warning allowed)

Faithfulness is the difflib ratio between the canonical candidate and the reference (names, proof
bodies, comments removed; whitespace collapsed). Without a Lean verdict (replay with no recording,
timeout, backend failure) the reward is ``None`` with the reason: a guessed 0.1 would teach the
policy that unrecorded statements are wrong.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Sequence

from autoformalizer.statements import faithfulness, well_formed
from autoformalizer.typecheck import CheckStatus, StatementCheck, StatementChecker


@dataclass
class RewardConfig:
    malformed: float = 0.0
    fails_typecheck: float = 0.1
    typechecks_base: float = 0.3
    faithfulness_weight: float = 0.7


@dataclass
class RewardResult:
    value: float | None  # None: no Lean verdict, see ``reason``
    gate: str  # malformed | rejected | fails_typecheck | typechecks | unavailable | timeout | infra_error | input_error
    reason: str
    faithfulness: float | None = None
    check: StatementCheck | None = None

    def to_dict(self) -> dict:
        return {"value": self.value, "gate": self.gate, "reason": self.reason,
                "faithfulness": self.faithfulness,
                "lean_status": self.check.status.value if self.check else None}


def _from_check(check: StatementCheck, candidate: str, reference: str | None,
                config: RewardConfig) -> RewardResult:
    if check.status is CheckStatus.REJECTED:
        # a deterministic precheck rejection (forbidden construct, header tampering) is always 0,
        # as in every reward of the project: trying to game the checker must not pay 0.1
        return RewardResult(config.malformed, "rejected", "; ".join(check.reasons) or check.detail, check=check)
    if check.status is CheckStatus.FAILED:
        return RewardResult(config.fails_typecheck, "fails_typecheck", check.detail, check=check)
    if check.status is CheckStatus.PASSED:
        faith = faithfulness(candidate, reference) if reference is not None else None
        if faith is None:
            return RewardResult(None, "typechecks", "type-checks but no reference statement to measure "
                                "faithfulness against", check=check)
        return RewardResult(config.typechecks_base + config.faithfulness_weight * faith, "typechecks",
                            check.detail, faithfulness=faith, check=check)
    return RewardResult(None, check.status.value, f"{check.status.value}: {check.detail}", check=check)


class GatedReward:
    """Scores batches of candidate statements against references with one statement checker."""

    def __init__(self, checker: StatementChecker, config: RewardConfig | None = None):
        self.checker = checker
        self.config = config or RewardConfig()

    async def ascore(self, candidates: Sequence[str],
                     references: Sequence[str | None]) -> list[RewardResult]:
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        results: list[RewardResult | None] = [None] * len(candidates)
        to_check = []
        for i, candidate in enumerate(candidates):
            form = well_formed(candidate)
            if not form.ok:
                results[i] = RewardResult(self.config.malformed, "malformed", "; ".join(form.reasons))
            else:
                to_check.append(i)
        checks = await self.checker.acheck_many([candidates[i] for i in to_check])
        for i, check in zip(to_check, checks):
            results[i] = _from_check(check, candidates[i], references[i], self.config)
        return results  # type: ignore[return-value]

    def score(self, candidates: Sequence[str], references: Sequence[str | None]) -> list[RewardResult]:
        return asyncio.run(self.ascore(candidates, references))

    def __call__(self, candidate: str, reference: str | None) -> RewardResult:
        return self.score([candidate], [reference])[0]
