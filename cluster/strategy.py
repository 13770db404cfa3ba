"""``python -m cluster.strategy configs/strategy/zero3.yaml``: what a strategy file turns into.

The files under ``configs/strategy/`` are trainer fragments layered onto a stage config
(``--config configs/<stage>/X.yaml --config configs/strategy/zero2.yaml``). This reads one the way
LightningCLI reads the ``trainer`` section (the ``Trainer.__init__`` signature, through
jsonargparse) and builds the strategy object without building a Trainer, so it works on a machine
without the GPUs the strategy is meant for. For DeepSpeed it prints the exact config dictionary
Lightning hands to ``deepspeed.initialize`` (before Lightning adds batch size, gradient clipping
and precision at fit time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def trainer_parser():
    from jsonargparse import ActionConfigFile, ArgumentParser
    from lightning.pytorch import Trainer

    parser = ArgumentParser(exit_on_error=False, prog="python -m cluster.strategy")
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_method_arguments(Trainer, "__init__", "trainer")
    return parser


def load_trainer_options(*paths: str | Path) -> dict[str, Any]:
    """The trainer options of layered config files, with ``strategy`` instantiated."""
    from jsonargparse import ArgumentError

    parser = trainer_parser()
    args: list[str] = []
    for path in paths:
        args += ["--config", str(path)]
    try:
        options = parser.instantiate(parser.parse_args(args)).trainer
    except ArgumentError as error:
        raise ValueError(f"{', '.join(map(str, paths))}: {error}") from None
    return dict(vars(options))


def deepspeed_config(strategy: Any) -> dict[str, Any] | None:
    """The DeepSpeed config dictionary of a DeepSpeedStrategy (None for other strategies)."""
    config = getattr(strategy, "config", None)
    return dict(config) if type(strategy).__name__ == "DeepSpeedStrategy" and config else None


@dataclass
class StrategyFiles:
    """``python -m cluster.strategy FILE...`` options."""

    files: list[str] = field(default_factory=list)
    """Config files with a ``trainer`` section (configs/strategy/*.yaml, a stage config), layered in order."""


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config

    args, _ = parse_config(
        StrategyFiles,
        argv,
        prog="python -m cluster.strategy",
        description=__doc__.splitlines()[0],
        positional=("files",),
    )
    options = load_trainer_options(*args.files)
    strategy = options.get("strategy")
    print(f"strategy: {strategy if isinstance(strategy, str) else type(strategy).__name__}")
    for key in ("accelerator", "devices", "num_nodes", "precision"):
        print(f"{key}: {options.get(key)}")
    ds = deepspeed_config(strategy)
    if ds is not None:
        print("deepspeed config:")
        print(json.dumps(ds, indent=2))
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m cluster.strategy"))
