"""Lightning callbacks for the training resume tests, imported by the trainer through
``trainer.callbacks`` (``class_path: kill_at_step.KillAt``; the test puts this folder on the run's
PYTHONPATH): :class:`KillAt` SIGKILLs (or interrupts, ``signal: SIGINT``: Ctrl-C) its own process
once, at a given optimizer step: the "killed run"; :class:`RecordBatches` writes which rows each rank
trained on."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class KillAt(Callback):
    def __init__(self, step: int, once: str, signal: str = "SIGKILL", group: bool = False, run: str = "") -> None:
        """``once``: a file created just before the kill; while it exists, nothing is killed.
        ``group``: rank 0 kills its whole process group (every rank of a multi-process run; the test
        starts the run in a session of its own), as a node failure would. ``run``: only in a run whose
        folder name ends with it (one round of a chain of runs)."""
        self.step, self.once, self.signal, self.group, self.run = step, Path(once), signal, group, run

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.group and trainer.global_rank != 0:
            return
        if not Path(trainer.default_root_dir).name.endswith(self.run):
            return
        if trainer.global_step == self.step and not self.once.exists():
            self.once.write_text(str(self.step))
            if self.group:
                os.killpg(os.getpgid(0), getattr(signal, self.signal))
            os.kill(os.getpid(), getattr(signal, self.signal))


class RecordBatches(Callback):
    """Appends ``{"rank", "epoch", "step", "index", "tokens"}`` (the batch's ``index`` column: dataset
    rows; ``tokens``: its attention mask's sum) to
    ``batches-rank<r>.jsonl`` in the run folder after every training batch (a resumed run appends
    to its killed run's lines)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        row = {
            "rank": trainer.global_rank,
            "epoch": trainer.current_epoch,
            "step": trainer.global_step,
            "index": batch["index"].tolist(),
            "tokens": int(batch["attention_mask"].sum()),
        }
        with open(Path(trainer.default_root_dir) / f"batches-rank{trainer.global_rank}.jsonl", "a") as handle:
            handle.write(json.dumps(row) + "\n")
