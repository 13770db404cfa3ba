"""``leanloop precheck`` and ``leanloop verify``: the data stage's contract for checks outside the tests.

    leanloop precheck PROGRAM.lean [--header HEADER.lean] [--profile rl|collection] [--name NAME]
        -> {"ok": bool, "reasons": [str, ...], "profile": ..., "name": ...}; exit 0 either way
    leanloop verify PROGRAM.lean --backend replay [--profile ...] [--name NAME] [--statement S]
           [--sources '[alias, path]'] [--option.url http://host:8000]
        -> {"category": ..., "label": ..., "messages": [...], "first_error": ..., "reasons": [...], ...}

Without ``--header`` the benchmark header is the seed's miniF2F header (``leanloop.lean.acceptance.BENCHMARK_HEADER``).
Without ``--name`` the target is the last theorem the program declares.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from leanloop.tool import parse_config

Profile = Literal["collection", "collection_llf", "rl", "statement"]

_LAST_THEOREM = re.compile(r"(?<![\w.'])(?:theorem|lemma)\s+([^\s({\[⦃:]+)")


class _InputProblem(Exception):
    pass


@dataclass
class PrecheckConfig:
    """``leanloop precheck`` options: deterministic text prechecks; prints {ok, reasons}; exit 0 either way."""

    program: str
    """PROGRAM.lean."""
    header: str | None = None
    """Benchmark header file (default: the seed's miniF2F header)."""
    profile: Profile = "collection"
    """The acceptance policy's profile."""
    name: str | None = None
    """Target theorem (default: the last theorem declared)."""


@dataclass
class VerifyConfig(PrecheckConfig):
    """``leanloop verify`` options: precheck, compile with the backend, judge with the policy; prints
    the Outcome as JSON."""

    backend: str = "replay"
    """replay (recorded real Lean output), local, kimina."""
    statement: str | None = None
    """Trusted statement (text or a file); the rl profile needs it."""
    timeout: float = 60.0
    """Per-program Lean timeout in seconds."""
    sources: list[str] | None = None
    """replay: recording sources (aliases or paths)."""
    option: dict[str, Any] = field(default_factory=dict)
    """Backend options (``leanloop.lean.backends.make_backend``), one at a time: ``--option.url http://host:8000``."""


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


def precheck(argv: list[str] | None = None, prog: str = "leanloop precheck") -> int:
    from leanloop.lean.acceptance import BENCHMARK_HEADER, AcceptancePolicy
    from leanloop.lean.acceptance import reasons as R

    args, _ = parse_config(PrecheckConfig, argv, prog=prog, description=PrecheckConfig.__doc__, positional=("program",))
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


def verify(argv: list[str] | None = None, prog: str = "leanloop verify") -> int:
    from leanloop.lean.backends import make_backend
    from leanloop.lean.acceptance import BENCHMARK_HEADER, AcceptancePolicy
    from leanloop.lean.types import Category, Outcome, VerifyRequest
    from leanloop.lean.verifier import Verifier
    from leanloop.lean.acceptance import reasons as R

    args, _ = parse_config(VerifyConfig, argv, prog=prog, description=VerifyConfig.__doc__, positional=("program",))
    try:
        header = _read(args.header, "header") if args.header else BENCHMARK_HEADER
        program = _read(args.program, "program")
        statement = args.statement
        if statement and Path(statement).is_file():
            statement = _read(statement, "statement")
        options = dict(args.option)
    except FileNotFoundError as exc:
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
