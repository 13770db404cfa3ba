"""A Lightning callback that makes training steps take wall time, for the SLURM tests' jobs: a
run that is still training when the test cancels, requeues or times it out. Imported by the job
through ``trainer.callbacks`` (``class_path: slow_steps.SlowSteps``; the tests put this folder on
the job's PYTHONPATH)."""

from __future__ import annotations

import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class SlowSteps(Callback):
    def __init__(self, seconds: float = 0.1, record: str | None = None) -> None:
        """``record``: a file that gets one line per start of training, the global step it started
        at (0 for a fresh run, N when resumed from a step-N checkpoint)."""
        self.seconds = seconds
        self.record = record

    def on_train_start(self, trainer, pl_module) -> None:
        if self.record and trainer.is_global_zero:
            with Path(self.record).open("a") as handle:
                handle.write(f"{trainer.global_step}\n")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        time.sleep(self.seconds)
