"""``python -m classifiers.score --config configs/classifiers/score/default.yaml [--run NAME] [--shard I/N]``:
score every program of some inputs with a trained classifier, as a run (``make classifiers-score``).
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from leanloop.artifacts import Manifest, resolve_model, resolve_path, run_dir
from leanloop.jsonl import JsonlError, dumps_line, numbered_jsonl
from leanloop.sharding import (
    MergeRefused,
    Shard,
    ShardSpecError,
    check_shards,
    shard_dir,
    shard_of,
    shard_record,
    shard_run,
)

STAGE = "classifiers_score"
SCORES = "scores.jsonl"
NOT_HASHED = ("run", "shard", "merge_shards")
PASSED_THROUGH = ("id", "name", "split", "label")


@dataclass
class ScoreConfig:
    model: str
    """A finished classifier run (``artifacts://classifiers/<run>``) or its final/ folder; with
    ``feedback``, a feedback model run (``artifacts://feedback_model/<run>``) or its final/ folder."""
    inputs: list[str] = field(default_factory=list)
    """``.lean``, JSONL or corpus parquet files (``artifacts://`` and ``shared://`` references work)."""
    run: str = "default"
    """Output folder: artifacts/classifiers_score/<run>/."""
    field: str = "program"
    """JSONL field holding the program."""
    batch_size: int = 16
    threshold: float | None = None
    """Override the run's validation threshold."""
    device: str = "cpu"
    shard: str | None = None
    """``I/N``: score shard I of N only, as the run ``<run>/shards/<I>-of-<N>/``."""
    merge_shards: int = 0
    """Above 0: merge that many finished shards into the run instead of scoring."""
    feedback: dict[str, Any] | None = None
    """Label with the feedback model ``model`` names, one greedy trace per program:
    ``{generation: {...}}`` (``feedback_model.config.TraceGenerationConfig``). Each row then carries its
    ``trace`` and ``reason``."""


def item_key(where: dict[str, Any], program: str) -> str:
    """What decides a program's shard: its corpus id (the dedup key) when the row has one."""
    if where.get("id"):
        return str(where["id"])
    return hashlib.sha256(f"{where.get('name') or ''}\0{program}".encode()).hexdigest()[:20]


def read_items(
    inputs: list[str], field: str, skipped: Counter | None = None, keep: tuple[str, ...] = ()
) -> Iterator[tuple[dict[str, Any], str]]:
    """(where it came from, program) of every input program, in input order: ``.lean`` files, corpus
    parquet and JSONL (program in ``field``). A row without a program is counted in ``skipped``
    (a corpus's input errors), or with ``skipped=None`` refused naming its file and row. ``keep``:
    more row fields copied into ``where``."""
    for name in inputs:
        path = resolve_path(name)
        if not path.is_file():
            raise ValueError(f"input {name} not found at {path}")
        if path.suffix == ".lean":
            yield {"input": str(name)}, path.read_text(encoding="utf-8")
            continue
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows: Iterator[tuple[int, Any]] = enumerate(pq.read_table(path).to_pylist(), 1)
        else:
            rows = _jsonl_rows(path)
        for number, row in rows:
            program = row.get(field) if isinstance(row, dict) else None
            if not isinstance(program, str) or not program.strip():
                if skipped is None:
                    raise ValueError(f"{name}:{number} has no program in field '{field}' (use --field)")
                skipped[str(name)] += 1
                continue
            yield (
                {"input": str(name), "line": number, **{k: row[k] for k in PASSED_THROUGH + keep if k in row}},
                program,
            )


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    for number, row in numbered_jsonl(path, strict=False):
        if isinstance(row, JsonlError):
            raise ValueError(f"{row}; inputs are .lean, JSONL or corpus parquet files")
        yield number, row


def model_dir(config: ScoreConfig) -> Path:
    """The model folder ``model`` names: a finished classifier run (``artifacts://classifiers/<run>``,
    a bare run name, its final/ folder, or a plain model folder), or with ``feedback`` a feedback model
    run. A run without a manifest (unfinished) or whose inputs changed since is refused."""
    return resolve_model(config.model, "classifiers" if config.feedback is None else "feedback_model")


def load_scorer(config: ScoreConfig) -> Any:
    """The classifier (or with ``feedback`` the feedback model) that scores the programs."""
    if config.feedback is None:
        from classifiers.evaluator import ClassifierEvaluator

        return ClassifierEvaluator.load(
            model_dir(config), batch_size=config.batch_size, device=config.device, threshold=config.threshold
        )
    from feedback_model.evaluator import FeedbackEvaluator, TraceGenerationConfig

    return FeedbackEvaluator.load(model_dir(config), TraceGenerationConfig(**config.feedback.get("generation", {})))


def score(config: ScoreConfig, folder: Path) -> Manifest:
    """Score this run's (or shard's) programs into ``folder/final/scores.jsonl``."""
    shard = Shard.parse(config.shard)
    model_dir(config)  # a missing or unfinished model is said before any input is read
    skipped: Counter = Counter()
    items = [
        (where, program)
        for where, program in read_items(config.inputs, config.field, skipped)
        if shard is None or shard.owns(item_key(where, program))
    ]
    evaluator = load_scorer(config)
    predictions = evaluator.score([program for _, program in items]) if items else []
    threshold = evaluator.threshold if config.feedback is None else None  # the feedback model's verdict is a rule
    rows = []
    for (where, _), p in zip(items, predictions):
        row = {**where, "score": p.score, "verdict": p.verdict, "threshold": threshold}
        if config.feedback is not None:
            row.update(trace=p.trace, reason=p.reason)
        rows.append({**row, "time_s": round(p.time_s, 6)})
    return _write(config, folder, rows, skipped, shard)


def _write(
    config: ScoreConfig, folder: Path, rows: list[dict[str, Any]], skipped: Counter, shard: Shard | None
) -> Manifest:
    final = folder / "final"
    final.mkdir(parents=True, exist_ok=True)
    tmp = final / (SCORES + ".tmp")
    tmp.write_text("".join(dumps_line(row) for row in rows), encoding="utf-8")
    tmp.replace(final / SCORES)
    verdicts = Counter("none" if row["verdict"] is None else str(row["verdict"]).lower() for row in rows)
    manifest = Manifest(
        stage=STAGE,
        run=config.run,
        counts={
            "programs": len(rows),
            "verdicts": dict(sorted(verdicts.items())),
            "skipped_without_program": dict(sorted(skipped.items())),
        },
    )
    for name in config.inputs:
        manifest.add_input(f"input:{Path(name).name}", resolve_path(name))
    manifest.add_input("model", model_dir(config))
    manifest.extra = {
        "config": {k: v for k, v in asdict(config).items() if k not in ("shard", "merge_shards")},
        "scores": f"final/{SCORES}",
    }
    if shard is not None:
        manifest.extra["shard"] = shard_record(shard, asdict(config), NOT_HASHED)
    return manifest


def merge(config: ScoreConfig, folder: Path, count: int) -> Manifest:
    """The shards' rows in input order (each input program's row from the shard that owns it)."""
    import json

    check_shards(folder, count, asdict(config), NOT_HASHED, what="scores")
    queues = []
    for index in range(count):
        path = shard_dir(folder, Shard(index, count)) / "final" / SCORES
        queues.append([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])
    positions = [0] * count
    rows = []
    skipped: Counter = Counter()
    for where, program in read_items(config.inputs, config.field, skipped):
        owner = Shard(shard_of(item_key(where, program), count), count)
        queue, at = queues[owner.index], positions[owner.index]
        if at >= len(queue) or {k: queue[at].get(k) for k in where} != where:
            raise MergeRefused(
                f"not merging scores {folder.name}: shard {owner} does not hold the scores of "
                f"{where} in input order; rescore it with --overwrite true"
            )
        rows.append(queue[at])
        positions[owner.index] += 1
    if positions != [len(queue) for queue in queues]:
        raise MergeRefused(
            f"not merging scores {folder.name}: the shards hold scores for programs that are not "
            "in the inputs; rescore them with --overwrite true"
        )
    return _write(config, folder, rows, skipped, None)


def run_from_args(args: ScoreConfig) -> int:
    """``leanloop classify --run NAME [--shard I/N] ...``: the same scoring as a run of this module."""
    import json
    from dataclasses import fields

    argv = []
    for option in fields(ScoreConfig):
        value = getattr(args, option.name)
        if value is not None:
            argv += [f"--{option.name}", value if isinstance(value, str) else json.dumps(value)]
    return main(argv)


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config, run_parsed_tool

    config, resolved = parse_config(
        ScoreConfig, argv, prog="python -m classifiers.score", description=__doc__.splitlines()[0], overwrite=True
    )
    try:
        shard = Shard.parse(config.shard)
        if shard is not None and config.merge_shards:
            raise ShardSpecError("--shard scores one shard and --merge_shards merges them: pass one of the two")
        if not config.inputs:
            raise ShardSpecError("no inputs to score (set inputs: in the config)")
        unknown = sorted(set(config.feedback or {}) - {"generation"})
        if unknown:  # refused before the run folder is touched
            raise ValueError(f"feedback labelling reads only feedback.generation (greedy traces), not {unknown}")
        if config.merge_shards:  # refused before the run folder is touched
            check_shards(run_dir(STAGE, config.run), config.merge_shards, asdict(config), NOT_HASHED, what="scores")

        def work(config: ScoreConfig, folder: Path) -> Manifest:
            return merge(config, folder, config.merge_shards) if config.merge_shards else score(config, folder)

        outcome = run_parsed_tool(
            STAGE,
            config,
            resolved,
            work,
            run=shard_run(config.run, shard),
            overwrite=getattr(config, "overwrite", False),
        )
    except (ShardSpecError, MergeRefused, ValueError) as error:
        print(f"classify: {error}", file=sys.stderr)
        return 2
    counts = (outcome.manifest or {}).get("counts", {})
    print(f"[classify] {counts.get('programs')} programs scored -> {outcome.run_dir / 'final' / SCORES}")
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m classifiers.score"))
