"""``leanloop classify --model artifacts/classifiers/<run>/final INPUT...``: programs in, scores out.

Inputs are ``.lean`` files (one program each) and/or JSONL files (one program per line, in the
field ``--field``, default ``program``). Output: one JSON object per program, in input order, to
stdout or ``--out``::

    {"input": "x.jsonl", "line": 3, "id": ..., "name": ..., "score": 0.91, "verdict": true,
     "threshold": 0.42, "time_s": 0.004}

``verdict`` is ``score >= threshold`` (the threshold chosen on validation when the model was
trained, unless ``--threshold`` is given); with ``--deadline S`` programs not scored within S
seconds get ``score`` and ``verdict`` null.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterator

from leanloop.jsonl import JsonlError, dumps_line, numbered_jsonl

PASSED_THROUGH = ("id", "name", "split", "label")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("classify", help="score programs with a trained verdict classifier",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", help=".lean files and/or JSONL files of programs")
    parser.add_argument("--model", required=True, help="a classifier run's final/ folder (artifacts/classifiers/<run>/final)")
    parser.add_argument("--field", default="program", help="JSONL field holding the program (default: program)")
    parser.add_argument("--out", default=None, help="write JSONL here instead of stdout")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=None, help="override the run's validation threshold")
    parser.add_argument("--deadline", type=float, default=None, help="seconds; unscored programs get null")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--run", default=None,
                        help="write artifacts/classify/<run>/ (scores + manifest) instead of --out/stdout")
    parser.add_argument("--shard", default=None, help="I/N: score shard I of N only (with --run; see classifiers.score)")
    parser.set_defaults(func=classify)


def read_inputs(paths: list[str], field: str) -> Iterator[tuple[dict[str, Any], str]]:
    """(where it came from, program) for every input program, in order; clear errors on bad input."""
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise SystemExit(f"classify: input {path} does not exist")
        if path.suffix == ".lean":
            yield {"input": str(path)}, path.read_text(encoding="utf-8")
            continue
        for number, row in numbered_jsonl(path, strict=False):
            if isinstance(row, JsonlError):
                raise SystemExit(f"classify: {row}; inputs are .lean or JSONL files")
            program = row.get(field) if isinstance(row, dict) else None
            if not isinstance(program, str) or not program.strip():
                raise SystemExit(f"classify: {path}:{number} has no program in field '{field}' (use --field)")
            where = {"input": str(path), "line": number}
            where.update({key: row[key] for key in PASSED_THROUGH if key in row})
            yield where, program


def classify(args: argparse.Namespace) -> int:
    if args.run or args.shard:
        if not args.run:
            print("classify: --shard writes a run: add --run NAME", file=sys.stderr)
            return 2
        from classifiers.score import run_from_args

        return run_from_args(args)
    from classifiers.evaluator import ClassifierEvaluator
    from leanloop.evaluator import deadline_in

    items = list(read_inputs(args.inputs, args.field))
    evaluator = ClassifierEvaluator.load(args.model, batch_size=args.batch_size, device=args.device,
                                         threshold=args.threshold)
    deadline = deadline_in(args.deadline) if args.deadline is not None else None
    predictions = evaluator.score([program for _, program in items], deadline=deadline)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for (where, _), prediction in zip(items, predictions):
            row = {**where, "score": prediction.score, "verdict": prediction.verdict,
                   "threshold": evaluator.threshold, "time_s": round(prediction.time_s, 6)}
            out.write(dumps_line(row))
    finally:
        if out is not sys.stdout:
            out.close()
    return 0
