"""The RL stage's data: trusted statements, their filter results, and the curriculum that picks
each step's problems.

Each training batch is the list of :class:`leanloop.prover.statements.Statement` for one GRPO step
(``problems_per_step`` of them), drawn from the curriculum's active statements. The module reports
each statement's results back to ``self.curriculum`` after the step. Evaluation statements
(``eval_statements``) must be disjoint from the training statements by theorem; an overlap is an
error, not a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import lightning as L
from torch.utils.data import DataLoader, IterableDataset

from rl.config import RL_LEAN, CurriculumConfig, FilterConfig, LeanConfig, StatementsConfig
from rl.curriculum import DROPPED, TRIVIAL, Curriculum
from rl.filters import StatementFilters, summarize
from leanloop.jsonl import write_jsonl
from leanloop.prover.statements import load_statement_set
from leanloop.prover.statements import Statement

FILTERS_FILE = "filters.jsonl"


class StepStream(IterableDataset):
    """Endless stream of this rank's per-step problem lists (the trainer's max_steps ends training):
    its slice of the step's ``problems_per_step x world_size`` (rl.curriculum).

    The trainer fetches a batch ahead of the step it trains, so a draw happens one step before its
    batch is trained on, and a checkpoint saved after a step already holds the next step's draw in
    the curriculum's state. Those drawn-but-untrained batches (``RLData.pending``) are in the
    checkpoint too, and a restored stream yields them first: the resumed run trains on the batches
    the killed one had drawn, and draws the ones after from the same curriculum state."""

    def __init__(self, data: "RLData"):
        self.data = data

    def __iter__(self) -> Iterator[list[Statement]]:
        trainer = getattr(self.data, "trainer", None)
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        data = self.data
        for names in list(data.pending):  # drawn before the checkpoint, not yet trained on
            yield [data.by_name[n] for n in names]
        while True:
            names, exhausted = data.curriculum.sample(data.problems_per_step, data.step, rank, world)
            data.exhausted_steps += int(exhausted)
            data.step += 1
            data.pending.append(list(names))
            yield [data.by_name[n] for n in names]


class RLData(L.LightningDataModule):
    def __init__(
        self,
        statements: StatementsConfig | None = None,
        eval_statements: StatementsConfig | None = None,
        problems_per_step: int = 4,
        curriculum: CurriculumConfig | None = None,
        filters: FilterConfig | None = None,
        lean: LeanConfig | None = None,
        seed: int = 0,
    ) -> None:
        """``statements``: the training statements (trusted: the harness takes statement, header and
        context from here). ``eval_statements``: pass@k after training (None: no evaluation).
        ``lean`` is linked from ``model.lean`` (the filters run through the same backend)."""
        super().__init__()
        if problems_per_step < 1:
            raise ValueError(f"problems_per_step must be >= 1, got {problems_per_step}")
        self.statements_config = statements or StatementsConfig()
        self.eval_config = eval_statements
        self.problems_per_step = problems_per_step
        self.curriculum_config = curriculum or CurriculumConfig()
        self.filter_config = filters or FilterConfig()
        self.lean = lean or RL_LEAN
        self.seed = seed
        self.statements: list[Statement] = []
        self.eval_statements: list[Statement] = []
        self.by_name: dict[str, Statement] = {}
        self.filter_records: list[dict] = []
        self.curriculum: Curriculum | None = None
        self.exhausted_steps = 0
        self.step = 0  # draws so far (a resumed run continues the sequence)
        self.pending: list[list[str]] = []  # drawn batches the trainer has not trained on yet (StepStream)
        self._restored: dict | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.curriculum is not None:
            return
        self.statements = load_statement_set(self.statements_config)
        if self.eval_config is not None:
            self.eval_statements = load_statement_set(self.eval_config)
            overlap = sorted({s.theorem for s in self.statements} & {s.theorem for s in self.eval_statements})
            if overlap:
                raise ValueError(
                    f"{len(overlap)} evaluation theorems are also training statements (e.g. {overlap[:3]}); "
                    "make data.statements and data.eval_statements theorem-disjoint"
                )
        self.by_name = {s.name: s for s in self.statements}
        self.curriculum = Curriculum(self.by_name, self.curriculum_config, seed=self.seed)
        if self.filter_config.enabled:
            filters = StatementFilters(self.lean, self.filter_config)
            self.filter_records = filters.run(self.statements)
            for record in self.filter_records:
                if record["decision"] in ("drop", "review"):
                    self.curriculum.set_status(
                        record["name"],
                        DROPPED,
                        0,
                        ",".join(
                            (["expert_review"] if record["decision"] == "review" else []) + record["decision_reasons"]
                        ),
                    )
                elif record["decision"] == "retire":
                    self.curriculum.set_status(record["name"], TRIVIAL, 0, "trivial (filters)")
        if not self.curriculum.active():
            raise ValueError("every training statement was dropped or retired by the filters; see filters.jsonl")
        self._write_filters()
        if self._restored is not None:
            self.load_state_dict(self._restored)

    def consumed(self, problems: list[Statement]) -> None:
        """The trainer trains on ``problems`` now: the oldest pending draw."""
        names = [p.name for p in problems]
        if not self.pending or self.pending[0] != names:
            raise RuntimeError(
                f"training on {names}, but the oldest drawn batch is {self.pending[0] if self.pending else None}"
            )
        self.pending.pop(0)

    def state_dict(self) -> dict[str, Any]:
        """The curriculum, the draw count and the drawn batches not trained on yet (Lightning keeps
        them in every checkpoint)."""
        if self.curriculum is None:
            return {}
        return {
            "curriculum": self.curriculum.state_dict(),
            "step": self.step,
            "exhausted_steps": self.exhausted_steps,
            "pending": [list(p) for p in self.pending],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        if self.curriculum is None:  # restored before setup: applied once the statements are loaded
            self._restored = state
            return
        self.curriculum.load_state_dict(state["curriculum"])
        self.step, self.exhausted_steps, self._restored = state["step"], state["exhausted_steps"], None
        self.pending = [list(p) for p in state.get("pending", [])]

    def _write_filters(self) -> None:
        trainer = getattr(self, "trainer", None)
        if trainer is None or not self.filter_records or not trainer.is_global_zero:
            return
        write_jsonl(Path(trainer.default_root_dir) / FILTERS_FILE, self.filter_records)

    def drop(self, names: list[str], reason: str) -> None:
        for name in names:
            self.curriculum.set_status(name, DROPPED, 0, reason)
        if not self.curriculum.active():
            raise ValueError(f"no training statement left after dropping {len(names)} ({reason})")

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return batch  # a list of statements (text); the module puts rollouts on the device it generates on

    def train_dataloader(self) -> DataLoader:
        return DataLoader(StepStream(self), batch_size=None, collate_fn=lambda problems: problems, num_workers=0)

    def manifest_inputs(self) -> dict[str, Path]:
        from leanloop.paths import resolve_shared

        out = {"statements": resolve_shared(self.statements_config.path)}
        for role, config in (("", self.statements_config), ("eval_", self.eval_config)):
            if config is None:
                continue
            out[f"{role}statements"] = resolve_shared(config.path)
            if config.corpus:
                from leanloop.artifacts import resolve_run

                out[f"{role}corpus"] = resolve_run(config.corpus, "data")
        return out

    def manifest_counts(self) -> dict[str, Any]:
        counts: dict[str, Any] = {
            "statements": len(self.statements),
            "eval_statements": len(self.eval_statements),
            "curriculum_exhausted_steps": self.exhausted_steps,
        }
        if self.filter_records:
            counts["filters"] = summarize(self.filter_records)
        if self.curriculum is not None:
            counts["curriculum"] = self.curriculum.counts()
        return counts
