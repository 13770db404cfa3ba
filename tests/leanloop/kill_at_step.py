"""A Lightning callback that SIGKILLs (or interrupts, ``signal: SIGINT``: Ctrl-C) its own process
once, at a given optimizer step: the training resume tests' "killed run". Imported by the trainer through ``trainer.callbacks``
(``class_path: kill_at_step.KillAt``; the test puts this folder on the run's PYTHONPATH)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class KillAt(Callback):
    def __init__(self, step: int, once: str, signal: str = "SIGKILL", run: str = "") -> None:
        """``once``: a file created just before the kill; while it exists, nothing is killed.
        ``run``: only in a run whose folder name ends with it (one round of a chain of runs)."""
        self.step, self.once, self.signal, self.run = step, Path(once), signal, run

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not Path(trainer.default_root_dir).name.endswith(self.run):
            return
        if trainer.global_step == self.step and not self.once.exists():
            self.once.write_text(str(self.step))
            os.kill(os.getpid(), getattr(signal, self.signal))
