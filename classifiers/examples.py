"""Reading labelled programs for the classifiers.

Two sources:

- the data stage's corpus (``artifacts/data/<run>/``, the normal case): only rows with a label take
  part: ``valid`` (True), ``invalid`` and ``precheck_rejected`` (False). Timeouts, infrastructure
  errors, unavailable and input errors have no label and are counted, not used. Splits are the data
  stage's theorem-disjoint ``train`` / ``valid`` / ``test`` (:data:`leanloop.corpus.SPLITS`).
- a JSONL file of programs with recorded verdicts (:class:`JsonlCorpus`), e.g. the shipped RL-Lean
  compilation results: used by ``debug.yaml`` so the smallest run needs no data run first. Exact
  duplicate programs are kept once; splits are theorem-disjoint by a hash of the theorem name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leanloop.artifacts import resolve_run
from leanloop.corpus import SPLITS, VALID, canonical_split, corpus_files, read_corpus  # noqa: F401 (corpus_files: crossval)
from leanloop.jsonl import numbered_jsonl
from leanloop.paths import resolve_shared

COLUMNS = ("program", "name", "split", "category", "label")
# Rejected before compilation, not compiled in time, or no answer: no label (LLF Section 3).
UNLABELLED = frozenset({"precheck_rejected", "timeout", "infra_error", "unavailable", "input_error"})


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


def load_labelled(path: str, max_rows_per_split: int | None = None) -> Corpus:
    """Labelled rows of a data-stage run, per split (``max_rows_per_split``: a deterministic prefix,
    for debug configs only)."""
    run = resolve_run(path, "data")  # a finished data run, or a clear error
    return _split_rows(run, read_corpus(run, COLUMNS), max_rows_per_split)


def _split_rows(run: Path, rows: list[dict[str, Any]], max_rows_per_split: int | None) -> Corpus:
    counts: Counter[str] = Counter()
    splits = {name: Split([], [], []) for name in SPLITS}
    for row in rows:
        split = canonical_split(row["split"])
        counts[f"{split}/{row['category']}"] += 1
        if split not in splits:
            raise ValueError(f"corpus row with unknown split {split!r} in {run}; expected one of {SPLITS}")
        if row["label"] is None or row["category"] in UNLABELLED:
            continue  # corpora built before LLF's rule labelled precheck_rejected rows False
        target = splits[split]
        if max_rows_per_split is not None and len(target) >= max_rows_per_split:
            continue
        target.programs.append(row["program"])
        target.labels.append(bool(row["label"]))
        target.names.append(row["name"] or "")
    for name, split in splits.items():
        counts[f"{name}/labelled"] = len(split)
    overlap = set(splits["train"].names) & (set(splits[VALID].names) | set(splits["test"].names))
    if overlap:
        raise ValueError(
            f"corpus {run} is not theorem-disjoint: {len(overlap)} theorem(s) in train and an "
            f"evaluation split (e.g. {sorted(overlap)[:3]}); rebuild it with the data stage"
        )
    return Corpus(path=run, splits=splits, counts=dict(sorted(counts.items())))


@dataclass
class JsonlCorpus:
    """Programs with recorded verdicts in a JSONL (or .jsonl.gz) file, split here by theorem name."""

    path: str
    """File path or ``shared://...``."""
    program_field: str = "code"
    label_field: str = "verdict_pass"
    name_field: str = "name"
    no_label_if: str | None = None
    """Dotted field that, when non-empty, means Lean gave no verdict (e.g. RL-Lean's
    ``compilation_result.system_errors``: timeouts and crashes get no label, never "invalid")."""
    no_label_pattern: str | None = None
    """With ``no_label_if``: only a value matching this regular expression means no verdict (APOLLO's
    ``messages`` hold Lean's output, and "timed out" or "No 'theorem' found" there is none)."""
    valid_fraction: float = 0.1
    test_fraction: float = 0.1


def theorem_split(name: str, valid_fraction: float, test_fraction: float) -> str:
    """Deterministic theorem-level split: every program of a theorem lands in the same split."""
    import hashlib

    u = int(hashlib.sha256(name.encode()).hexdigest()[:12], 16) / 16**12
    if u < test_fraction:
        return "test"
    if u < test_fraction + valid_fraction:
        return VALID
    return "train"


def _dotted(record: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        record = record.get(key) if isinstance(record, dict) else None
    return record


def no_verdict(value: Any, pattern: str | None) -> bool:
    if pattern is None:
        return bool(value)
    import re

    return value is not None and re.search(pattern, str(value)) is not None


def read_jsonl_rows(source: JsonlCorpus) -> list[dict[str, Any]]:
    """The file's programs (exact duplicates kept once) with ``name``, ``label`` (None where Lean gave
    no verdict) and ``category``; no split yet."""
    path = resolve_shared(source.path)
    if not path.is_file():
        raise FileNotFoundError(f"labelled-programs file {path} not found (from `path: {source.path}`)")
    rows, seen = [], set()
    for number, record in numbered_jsonl(path):
        missing = [f for f in (source.program_field, source.name_field) if not record.get(f)]
        if missing:
            raise ValueError(f"{path}:{number}: missing or empty {missing}")
        program, label = record[source.program_field], record.get(source.label_field)
        if source.no_label_if and no_verdict(_dotted(record, source.no_label_if), source.no_label_pattern):
            label = None
        if program in seen:
            continue
        seen.add(program)
        rows.append(
            {
                "program": program,
                "name": str(record[source.name_field]),
                "label": None if label is None else bool(label),
                "category": "recorded" if label is not None else "unlabelled",
            }
        )
    return rows


def load_jsonl_corpus(source: JsonlCorpus, max_rows_per_split: int | None = None) -> Corpus:
    rows = [
        dict(row, split=theorem_split(row["name"], source.valid_fraction, source.test_fraction))
        for row in read_jsonl_rows(source)
    ]
    return _split_rows(resolve_shared(source.path), rows, max_rows_per_split)


def add_training_programs(corpus: Corpus, sources: list[JsonlCorpus]) -> None:
    """Append the labelled programs of ``sources`` to the corpus's training split, in place. Programs
    of a theorem in the validation or test split are left out (the splits stay theorem-disjoint, and
    the evaluation splits stay the corpus's own), as are programs the training split already has;
    each source's counts land in ``corpus.counts``."""
    train = corpus.splits["train"]
    held_out = set(corpus.splits[VALID].names) | set(corpus.splits["test"].names)
    known = set(train.programs)
    for source in sources:
        kept = held = unlabelled = 0
        for row in read_jsonl_rows(source):
            if row["label"] is None:
                unlabelled += 1
            elif row["name"] in held_out:
                held += 1
            elif row["program"] not in known:
                known.add(row["program"])
                train.programs.append(row["program"])
                train.labels.append(row["label"])
                train.names.append(row["name"])
                kept += 1
        tag = Path(source.path).name
        corpus.counts.update(
            {
                f"extra_train/{tag}/added": kept,
                f"extra_train/{tag}/evaluation_theorem": held,
                f"extra_train/{tag}/unlabelled": unlabelled,
            }
        )
