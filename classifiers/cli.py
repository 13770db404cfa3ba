"""``leanloop classify --model artifacts://classifiers/<run> INPUT...``: programs in, scores out."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from classifiers.score import ScoreConfig, model_dir, read_items
from leanloop.jsonl import dumps_line
from leanloop.tool import parse_config


@dataclass
class ClassifyConfig(ScoreConfig):
    """``leanloop classify`` options: :class:`classifiers.score.ScoreConfig`'s (as a run with
    ``--run``), plus those of scoring to stdout or ``--out``."""

    run: str | None = None
    """Write artifacts/classifiers_score/<run>/ (scores + manifest) instead of --out/stdout."""
    out: str | None = None
    """Write JSONL here instead of stdout."""
    deadline: float | None = None
    """Seconds; unscored programs get null."""
    history: str | None = None
    """A data run (artifacts://data/<run>) whose Lean labels are per-problem evidence."""
    group_field: str = "name"
    """JSONL field naming a program's problem."""
    known_label_field: str | None = None
    """JSONL field with a label already known: such rows inform the rest of their group."""


def classify(argv: list[str] | None = None, prog: str = "leanloop classify") -> int:
    args, _ = parse_config(
        ClassifyConfig,
        argv,
        prog=prog,
        description="score programs with a trained verdict classifier",
        positional=("inputs",),
    )
    if args.run or args.shard or args.merge_shards:
        if not args.run:
            print(
                f"classify: {'--shard' if args.shard else '--merge_shards'} writes a run: add --run NAME",
                file=sys.stderr,
            )
            return 2
        if args.history is not None or args.known_label_field is not None:
            print(
                "classify: --history / --known_label_field score files without --run (a run and its shards "
                "score programs one by one); drop --run, or drop the history options",
                file=sys.stderr,
            )
            return 2
        from classifiers.score import run_from_args

        return run_from_args(args)
    from classifiers.score import load_scorer
    from leanloop.evaluator import deadline_in

    history_mode = args.history is not None or args.known_label_field is not None
    if history_mode and args.feedback is not None:
        raise SystemExit(
            "classify: --history / --known_label_field stack a classifier's scores; a feedback model "
            "(--feedback) has no history stacker: drop one of them"
        )
    model_dir(args)  # a missing or unfinished model is the first thing said, before any input is read
    keep = tuple(f for f in (args.group_field, args.known_label_field) if f and history_mode)
    items = list(read_items(args.inputs, args.field, keep=keep))
    deadline = deadline_in(args.deadline) if args.deadline is not None else None
    programs = [program for _, program in items]
    extra: list[dict[str, Any]] = [{} for _ in items]
    if history_mode:
        evaluator, predictions, extra = _history_scores(args, items, deadline)
    else:
        evaluator = load_scorer(args)
        predictions = evaluator.score(programs, deadline=deadline)
        if args.feedback is not None:
            extra = [{"trace": p.trace, "reason": p.reason} for p in predictions]
    threshold = evaluator.threshold if args.feedback is None else None  # the feedback model's verdict is a rule
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for (where, _), prediction, more in zip(items, predictions, extra):
            row = {
                **where,
                "score": prediction.score,
                "verdict": prediction.verdict,
                "threshold": threshold,
                "time_s": round(prediction.time_s, 6),
                **more,
            }
            out.write(dumps_line(row))
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def _known_label(value: Any, where: dict[str, Any], field: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "valid", "1", "pass"):
        return True
    if text in ("false", "invalid", "0", "fail"):
        return False
    raise SystemExit(
        f"classify: {where.get('input')}:{where.get('line')} has {field}={value!r}; "
        "a known label is true/false (or valid/invalid), or null when unknown"
    )


def _history_scores(args: ClassifyConfig, items: list[tuple[dict[str, Any], str]], deadline: float | None):
    """The history-aware evaluator's predictions, plus each row's learned score and evidence."""
    from classifiers.evaluator import load_history_evaluator
    from classifiers.evidence import History
    from classifiers.score import model_dir

    from leanloop.artifacts import ManifestError

    history = None
    if args.history is not None:
        try:
            history = History.from_corpus(args.history)
        except (FileNotFoundError, KeyError, ValueError, ManifestError) as error:
            raise SystemExit(f"classify: --history {args.history}: {error}") from None
    try:
        evaluator = load_history_evaluator(
            model_dir(args), history=history, threshold=args.threshold, batch_size=args.batch_size, device=args.device
        )
    except FileNotFoundError as error:
        raise SystemExit(f"classify: {error}") from None
    groups = [where.get(args.group_field) for where, _ in items]
    groups = [None if g is None else str(g) for g in groups]
    known = None
    if args.known_label_field:
        known = [_known_label(where.get(args.known_label_field), where, args.known_label_field) for where, _ in items]
    programs = [program for _, program in items]
    learned = evaluator.learned(programs, deadline)
    evidence = evaluator.evidence(programs, groups, known)
    predictions = evaluator.stack(learned, evidence)
    extra = [{"learned_score": p.score, "evidence": e.to_json()} for p, e in zip(learned, evidence)]
    return evaluator, predictions, extra
