"""The ``leanloop`` console script: small tools beside the stage entry points.

Each command lives with the code it drives and parses its own options (``leanloop.tool.parse_config``);
this module only dispatches ``leanloop <command> ...`` to it, importing just the module the invoked
command needs (so ``leanloop precheck`` does not import torch).
"""

from __future__ import annotations

import importlib
import sys

# command words -> ("module:function", one line of help); the function takes the command's own
# arguments and returns the exit status
COMMANDS: dict[str, tuple[str, str]] = {
    "precheck": ("data.cli:precheck", "acceptance-policy prechecks of one program (JSON out)"),
    "verify": ("data.cli:verify", "check one program with a Lean backend (JSON out)"),
    "trace annotate": ("leanloop.traces.cli:annotate", "print PROGRAM annotated with Lean's feedback from RESPONSE"),
    "trace verdict": ("leanloop.traces.cli:verdict", "print the verdict of a predicted trace as JSON"),
    "metrics feedback": ("leanloop.metrics.cli:feedback", "feedback metrics of PREDICTION against REFERENCE"),
    "metrics verdicts": ("leanloop.metrics.cli:verdicts", "verdict metrics with grouped bootstrap intervals"),
    "report": ("leanloop.metrics.cli:report", "Markdown report with plots from a predictions file"),
    "classify": ("classifiers.cli:classify", "score programs with a trained verdict classifier"),
    "mathlib-index": (
        "autoformalizer.mathlib_index:index_command",
        "build a Mathlib declaration index from a checkout",
    ),
}


def usage() -> str:
    """Every command, one per line with its help."""
    width = max(map(len, COMMANDS))
    lines = [
        "usage: leanloop COMMAND [options]  (leanloop COMMAND --help lists a command's options)",
        "",
        "Small tools beside the stage entry points.",
        "",
        "commands:",
    ]
    lines += [f"  {words.ljust(width)}  {help_}" for words, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``argv=None`` is the console script: a user's mistake is one line and exit 2 (``leanloop.tool.cli_entry``)."""
    if argv is None:
        from leanloop.tool import cli_entry

        return cli_entry(dispatch, list(sys.argv[1:]), prog="leanloop")
    return dispatch(argv)


def dispatch(argv: list[str]) -> int:
    argv = list(argv)
    for size in (2, 1):
        words = " ".join(argv[:size])
        if len(argv) >= size and words in COMMANDS:
            module, _, function = COMMANDS[words][0].partition(":")
            command = getattr(importlib.import_module(module), function)
            return int(command(argv[size:], prog=f"leanloop {words}") or 0)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    group = [words.split()[1] for words in COMMANDS if words.startswith(f"{argv[0]} ")]
    if group:
        print(
            f"leanloop {argv[0]}: choose one of {', '.join(group)} (leanloop {argv[0]} {group[0]} --help lists "
            "its options)",
            file=sys.stderr,
        )
    else:
        print(f"leanloop: unknown command {argv[0]!r} (leanloop --help lists the commands)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
