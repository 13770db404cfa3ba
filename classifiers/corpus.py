"""Reading the labelled corpus (the data stage's ``artifacts/data/<run>/``) for the classifiers.

Only rows with a label take part: ``valid`` (True), ``invalid`` and ``precheck_rejected`` (False).
Timeouts, infrastructure errors, unavailable and input errors have no label and are counted, not
used. Splits are the data stage's theorem-disjoint ``train`` / ``validation`` / ``test``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leanloop.artifacts import read_manifest
from leanloop.paths import artifacts_root, resolve_shared

SPLITS = ("train", "validation", "test")
# The data stage may spell the validation split "valid" (or "val"/"dev"); one name here.
SPLIT_ALIASES = {"valid": "validation", "val": "validation", "dev": "validation"}
COLUMNS = ("program", "name", "split", "category", "label")


def resolve_run(path: str) -> Path:
    """``artifacts://<stage>/<run>``, ``shared://...`` or a plain path, to a folder."""
    if path.startswith("artifacts://"):
        return artifacts_root() / path[len("artifacts://"):]
    return resolve_shared(path)


@dataclass
class Split:
    programs: list[str]
    labels: list[bool]
    names: list[str]  # theorem name: the bootstrap's group

    def __len__(self) -> int:
        return len(self.programs)


@dataclass
class Corpus:
    path: Path  # the data run folder
    splits: dict[str, Split]
    counts: dict[str, Any]  # rows per split and category, unlabelled ones included


def corpus_files(run: Path) -> list[Path]:
    final = run / "final"
    files = sorted(final.rglob("*.parquet")) if final.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{final} holds no parquet files: the data run did not finish exporting")
    return files


def load_corpus(path: str, max_rows_per_split: int | None = None) -> Corpus:
    """Labelled rows of a data-stage run, per split (``max_rows_per_split``: a deterministic prefix,
    for debug configs only)."""
    import pyarrow.parquet as pq

    run = resolve_run(path)
    if run.name == "final" and (run.parent / "manifest.json").is_file():
        run = run.parent
    read_manifest(run, stage="data")  # a finished data run, or a clear error
    table = pq.ParquetDataset([str(f) for f in corpus_files(run)]).read(columns=list(COLUMNS))
    rows = table.to_pylist()
    counts: Counter[str] = Counter()
    splits = {name: Split([], [], []) for name in SPLITS}
    for row in rows:
        split = SPLIT_ALIASES.get(row["split"], row["split"])
        counts[f"{split}/{row['category']}"] += 1
        if split not in splits:
            raise ValueError(f"corpus row with unknown split {split!r} in {run}; expected one of {SPLITS}")
        if row["label"] is None:
            continue
        target = splits[split]
        if max_rows_per_split is not None and len(target) >= max_rows_per_split:
            continue
        target.programs.append(row["program"])
        target.labels.append(bool(row["label"]))
        target.names.append(row["name"] or "")
    for name, split in splits.items():
        counts[f"{name}/labelled"] = len(split)
    overlap = set(splits["train"].names) & (set(splits["validation"].names) | set(splits["test"].names))
    if overlap:
        raise ValueError(
            f"corpus {run} is not theorem-disjoint: {len(overlap)} theorem(s) in train and an "
            f"evaluation split (e.g. {sorted(overlap)[:3]}); rebuild it with the data stage"
        )
    return Corpus(path=run, splits=splits, counts=dict(sorted(counts.items())))
