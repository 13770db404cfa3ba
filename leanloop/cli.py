"""The ``leanloop`` console script: small tools beside the stage entry points.

Each subcommand lives with the code it drives; this module only dispatches, importing just the
module the invoked command needs (so ``leanloop precheck`` does not import torch).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> module exposing ``register(subparsers)``; the module adds that command's parser and
# sets ``func`` on it.
COMMANDS: dict[str, str] = {
    "precheck": "data.cli",
    "verify": "data.cli",
    "trace": "leanloop.traces.cli",
    "metrics": "leanloop.metrics.cli",
    "report": "leanloop.metrics.cli",
    "classify": "classifiers.cli",
    "mathlib-index": "autoformalizer.mathlib_index",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leanloop", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[only]] if only in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``argv=None`` is the console script: a user's mistake is one line and exit 2 (``leanloop.tool.cli_entry``)."""
    if argv is None:
        from leanloop.tool import cli_entry

        return cli_entry(dispatch, list(sys.argv[1:]), prog="leanloop")
    return dispatch(argv)


def dispatch(argv: list[str]) -> int:
    argv = list(argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
