"""``leanloop trace``: annotate a program with a recorded Lean reply; judge a predicted trace.

- ``leanloop trace annotate PROGRAM.lean RESPONSE.json [--include-warnings]`` prints the annotated
  program. RESPONSE.json is a REPL reply, a Kimina ``/verify`` reply or an RL-Lean
  ``compilation_result`` (or a whole RL-Lean row).
- ``leanloop trace verdict TRACE.lean [--truncated]`` prints ``{"valid": bool, "reason": str}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _read_text(path: str, what: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"error: {what} {path} does not exist")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SystemExit(f"error: {what} {path} is not UTF-8 text ({exc})") from exc


def _annotate(args: argparse.Namespace) -> int:
    from leanloop.traces.annotate import annotate_response
    from leanloop.lean.replies import parse_response

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


def _verdict(args: argparse.Namespace) -> int:
    from leanloop.traces.parse import trace_verdict

    verdict = trace_verdict(_read_text(args.trace, "trace"), truncated=args.truncated)
    print(json.dumps(verdict.to_dict()))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    trace = subparsers.add_parser("trace", help="feedback traces: annotate with Lean's reply, judge a trace")
    commands = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    trace.set_defaults(func=lambda args: (trace.print_help(), 2)[1])

    annotate = commands.add_parser("annotate", help="print PROGRAM annotated with Lean's feedback from RESPONSE")
    annotate.add_argument("program", metavar="PROGRAM.lean")
    annotate.add_argument("response", metavar="RESPONSE.json",
                          help="REPL reply, Kimina /verify reply, or RL-Lean compilation_result")
    annotate.add_argument("--include-warnings", action="store_true", help="also write warnings (skipped by default)")
    annotate.add_argument("--result-index", type=int, default=0, help="which entry of a Kimina 'results' list")
    annotate.add_argument("--line-offset", type=int, default=None,
                          help="lines to add to the reply's positions (default: 0 for the REPL, detected for "
                               "Kimina/RL-Lean, whose positions count from after the import header)")
    annotate.set_defaults(func=_annotate)

    verdict = commands.add_parser("verdict", help="print the verdict of a predicted trace as JSON")
    verdict.add_argument("trace", metavar="TRACE.lean")
    verdict.add_argument("--truncated", action="store_true", help="generation stopped at the output limit")
    verdict.set_defaults(func=_verdict)
