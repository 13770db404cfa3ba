"""``leanloop precheck`` and ``leanloop verify``: the data stage's contract for checks outside the tests.

    leanloop precheck PROGRAM.lean [--header HEADER.lean] [--profile rl|collection] [--name NAME]
        -> {"ok": bool, "reasons": [str, ...], "profile": ..., "name": ...}; exit 0 either way
    leanloop verify PROGRAM.lean --backend replay [--profile ...] [--name NAME] [--statement S]
        -> {"category": ..., "label": ..., "messages": [...], "first_error": ..., "reasons": [...], ...}

Without ``--header`` the benchmark header is the seed's miniF2F header (``leanloop.lean.acceptance.BENCHMARK_HEADER``).
Without ``--name`` the target is the last theorem the program declares.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_LAST_THEOREM = re.compile(r"(?<![\w.'])(?:theorem|lemma)\s+([^\s({\[⦃:]+)")


class _InputProblem(Exception):
    pass


def _read(path: str, what: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{what} {path}: no such file")
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _InputProblem(f"{what} {path} is not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    from data.sources import nul_reason

    nul = nul_reason({what: text})  # refused before Lean, as in the corpus build (data/README.md)
    if nul:
        raise _InputProblem(f"{path}: {nul}")
    return text


def _target_name(program: str, given: str | None) -> str | None:
    if given:
        return given
    from leanloop.lean.acceptance import mask

    names = _LAST_THEOREM.findall(mask(program).text)
    return names[-1].removeprefix("_root_.") if names else None


def _emit(body: dict) -> None:
    print(json.dumps(body, ensure_ascii=False))


def _fail(message: str) -> int:
    print(f"leanloop: {message}", file=sys.stderr)
    return 2


def precheck_command(args: argparse.Namespace) -> int:
    from leanloop.lean.acceptance import BENCHMARK_HEADER, AcceptancePolicy
    from leanloop.lean.acceptance import reasons as R

    try:
        header = _read(args.header, "header") if args.header else BENCHMARK_HEADER
        program = _read(args.program, "program")
    except FileNotFoundError as exc:
        return _fail(str(exc))
    except _InputProblem as exc:
        _emit({"ok": False, "reasons": [R.reason(R.BAD_REQUEST, str(exc))], "profile": args.profile})
        return 0
    name = _target_name(program, args.name)
    result = AcceptancePolicy(args.profile, header=header).precheck(program, header=header, name=name)
    _emit({"ok": result.ok, "reasons": result.reasons, "profile": args.profile, "name": name})
    return 0


def _options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--option expects KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def verify_command(args: argparse.Namespace) -> int:
    from leanloop.lean.backends import make_backend
    from leanloop.lean.acceptance import BENCHMARK_HEADER, AcceptancePolicy
    from leanloop.lean.types import Category, Outcome, VerifyRequest
    from leanloop.lean.verifier import Verifier
    from leanloop.lean.acceptance import reasons as R

    try:
        header = _read(args.header, "header") if args.header else BENCHMARK_HEADER
        program = _read(args.program, "program")
        statement = args.statement
        if statement and Path(statement).is_file():
            statement = _read(statement, "statement")
        options = _options(args.option)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    except ValueError as exc:
        return _fail(str(exc))
    except _InputProblem as exc:
        outcome = Outcome(Category.INPUT_ERROR, reasons=[R.reason(R.BAD_REQUEST, str(exc))])
        _emit(outcome.to_dict() | {"profile": args.profile})
        return 0
    if args.sources:
        options["sources"] = args.sources
    try:
        backend = make_backend(args.backend, **options)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        return _fail(f"cannot start the {args.backend} backend: {exc}")
    name = _target_name(program, args.name)
    verifier = Verifier(backend, AcceptancePolicy(args.profile, header=header), concurrency=1, timeout=args.timeout)
    request = VerifyRequest(program=program, name=name, statement=statement, header=header)
    outcome = verifier.check_sync([request])[0]
    _emit(outcome.to_dict() | {"profile": args.profile, "name": name})
    return 0


def register(subparsers) -> None:
    pre = subparsers.add_parser("precheck", help="acceptance-policy prechecks of one program (JSON out)",
                                description="Deterministic text prechecks; prints {ok, reasons}; exit 0 either way.")
    pre.add_argument("program", help="PROGRAM.lean")
    pre.add_argument("--header", help="benchmark header file (default: the seed's miniF2F header)")
    pre.add_argument("--profile", choices=["collection", "collection_llf", "rl", "statement"], default="collection")
    pre.add_argument("--name", help="target theorem (default: the last theorem declared)")
    pre.set_defaults(func=precheck_command)

    ver = subparsers.add_parser("verify", help="check one program with a Lean backend (JSON out)",
                                description="Precheck, compile with the backend, judge with the policy; "
                                            "prints the Outcome as JSON.")
    ver.add_argument("program", help="PROGRAM.lean")
    ver.add_argument("--backend", default="replay", help="replay (recorded real Lean output), local, kimina")
    ver.add_argument("--profile", choices=["collection", "collection_llf", "rl", "statement"], default="collection")
    ver.add_argument("--header", help="benchmark header file (default: the seed's miniF2F header)")
    ver.add_argument("--name", help="target theorem (default: the last theorem declared)")
    ver.add_argument("--statement", help="trusted statement (text or a file); the rl profile needs it")
    ver.add_argument("--timeout", type=float, default=60.0, help="per-program Lean timeout in seconds")
    ver.add_argument("--sources", nargs="+", help="replay: recording sources (aliases or paths)")
    ver.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="backend option (JSON value), repeatable, e.g. --option url=http://host:8000")
    ver.set_defaults(func=verify_command)
