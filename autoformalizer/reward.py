"""The gated autoformalization reward (GRPO stage 2)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, Sequence

from autoformalizer.statements import faithfulness, well_formed
from autoformalizer.typecheck import CheckStatus, StatementCheck, StatementChecker


@dataclass
class RewardConfig:
    malformed: float = 0.0
    fails_typecheck: float = 0.1
    typechecks_base: float = 0.3
    faithfulness_weight: float = 0.7
    unavailable: Literal["exclude", "well_formed_only"] = "exclude"
    """What training does with a well-formed statement Lean gave no verdict on (see the module doc)."""


@dataclass
class RewardResult:
    value: float | None  # None: no Lean verdict, see ``reason``
    gate: str  # malformed | rejected | fails_typecheck | typechecks | unavailable | timeout | infra_error | input_error
    reason: str
    faithfulness: float | None = None
    check: StatementCheck | None = None

    def to_dict(self) -> dict:
        return {
            "value": self.value,
            "gate": self.gate,
            "reason": self.reason,
            "faithfulness": self.faithfulness,
            "lean_status": self.check.status.value if self.check else None,
        }


def _from_check(check: StatementCheck, candidate: str, reference: str | None, config: RewardConfig) -> RewardResult:
    if check.status is CheckStatus.REJECTED:
        # a deterministic precheck rejection (forbidden construct, header tampering) is always 0,
        # as in every reward of the project: trying to game the checker must not pay 0.1
        return RewardResult(config.malformed, "rejected", "; ".join(check.reasons) or check.detail, check=check)
    if check.status is CheckStatus.FAILED:
        return RewardResult(config.fails_typecheck, "fails_typecheck", check.detail, check=check)
    if check.status is CheckStatus.PASSED:
        faith = faithfulness(candidate, reference) if reference is not None else None
        if faith is None:
            return RewardResult(
                None,
                "typechecks",
                "type-checks but no reference statement to measure faithfulness against",
                check=check,
            )
        return RewardResult(
            config.typechecks_base + config.faithfulness_weight * faith,
            "typechecks",
            check.detail,
            faithfulness=faith,
            check=check,
        )
    return RewardResult(None, check.status.value, f"{check.status.value}: {check.detail}", check=check)


class GatedReward:
    """Scores batches of candidate statements against references with one statement checker."""

    def __init__(self, checker: StatementChecker, config: RewardConfig | None = None):
        self.checker = checker
        self.config = config or RewardConfig()

    async def ascore(
        self, candidates: Sequence[str], references: Sequence[str | None], headers: Sequence[str | None] | None = None
    ) -> list[RewardResult]:
        """``headers``: per candidate, the header its problem was stated under (None: the checker's)."""
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        headers = list(headers) if headers is not None else [None] * len(candidates)
        results: list[RewardResult | None] = [None] * len(candidates)
        to_check = []
        for i, candidate in enumerate(candidates):
            form = well_formed(candidate)
            if not form.ok:
                results[i] = RewardResult(self.config.malformed, "malformed", "; ".join(form.reasons))
            else:
                to_check.append(i)
        checks = await self.checker.acheck_many([candidates[i] for i in to_check], [headers[i] for i in to_check])
        for i, check in zip(to_check, checks):
            results[i] = _from_check(check, candidates[i], references[i], self.config)
        return results  # type: ignore[return-value]

    def score(
        self, candidates: Sequence[str], references: Sequence[str | None], headers: Sequence[str | None] | None = None
    ) -> list[RewardResult]:
        return asyncio.run(self.ascore(candidates, references, headers))

    def __call__(self, candidate: str, reference: str | None) -> RewardResult:
        return self.score([candidate], [reference])[0]


NO_VERDICT = ("unavailable", "timeout", "infra_error")  # gates with no Lean verdict on the statement


def training_value(result: RewardResult, config: RewardConfig) -> tuple[float | None, bool]:
    """(the reward GRPO trains on, whether it is the ``well_formed_only`` credit of a statement Lean
    gave no verdict on). ``None``: no reward (left out of the group baseline, advantage 0)."""
    if result.value is not None:
        return result.value, False
    if result.gate in NO_VERDICT and config.unavailable == "well_formed_only":
        return config.fails_typecheck, True
    return None, False
