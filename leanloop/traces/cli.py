"""``leanloop trace``: annotate a program with a recorded Lean reply; judge a predicted trace.

- ``leanloop trace annotate PROGRAM.lean RESPONSE.json [--include_warnings true]`` prints the
  annotated program. RESPONSE.json is a REPL reply, a Kimina ``/verify`` reply or an RL-Lean
  ``compilation_result`` (or a whole RL-Lean row).
- ``leanloop trace verdict TRACE.lean [--truncated true]`` prints ``{"valid": bool, "reason": str}``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from leanloop.tool import parse_config


@dataclass
class AnnotateConfig:
    """``leanloop trace annotate`` options."""

    program: str
    """PROGRAM.lean: the program Lean checked."""
    response: str
    """RESPONSE.json: a REPL reply, Kimina /verify reply, or RL-Lean compilation_result."""
    include_warnings: bool = False
    """Also write warnings (skipped by default)."""
    result_index: int = 0
    """Which entry of a Kimina 'results' list."""
    line_offset: int | None = None
    """Lines to add to the reply's positions (default: 0 for the REPL, detected for Kimina/RL-Lean,
    whose positions count from after the import header)."""


@dataclass
class VerdictConfig:
    """``leanloop trace verdict`` options."""

    trace: str
    """TRACE.lean: a predicted trace."""
    truncated: bool = False
    """Generation stopped at the output limit."""


def _read_text(path: str, what: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"error: {what} {path} does not exist")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SystemExit(f"error: {what} {path} is not UTF-8 text ({exc})") from exc


def annotate(argv: list[str] | None = None, prog: str = "leanloop trace annotate") -> int:
    from leanloop.traces.annotate import annotate_response
    from leanloop.lean.replies import parse_response

    args, _ = parse_config(
        AnnotateConfig,
        argv,
        prog=prog,
        description="print PROGRAM annotated with Lean's feedback from RESPONSE",
        positional=("program", "response"),
    )
    program = _read_text(args.program, "program")
    try:
        reply = json.loads(_read_text(args.response, "response"))
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: {args.response} is not JSON ({exc}); expected one Lean reply object") from exc
    try:
        response = parse_response(reply, program, result_index=args.result_index, line_offset=args.line_offset)
        trace = annotate_response(program, response, include_warnings=args.include_warnings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(trace if trace.endswith("\n") else trace + "\n")
    return 0


def verdict(argv: list[str] | None = None, prog: str = "leanloop trace verdict") -> int:
    from leanloop.traces.parse import trace_verdict

    args, _ = parse_config(
        VerdictConfig,
        argv,
        prog=prog,
        description="print the verdict of a predicted trace as JSON",
        positional=("trace",),
    )
    result = trace_verdict(_read_text(args.trace, "trace"), truncated=args.truncated)
    print(json.dumps(result.to_dict()))
    return 0
