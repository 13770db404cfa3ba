"""The labelled corpus on disk: its schema, theorem-disjoint splits, writing and loading.

``artifacts/data/<run>/final/corpus.parquet`` holds one row per distinct (theorem, program) pair
and one per unreadable input row (``input_error``, with its reason). Load it with
``load_corpus(run)`` or ``datasets.Dataset.from_parquet(".../final/corpus.parquet")``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from data.config import SplitConfig

CORPUS_FILE = "corpus.parquet"
SPLITS = ("train", "valid", "test")


def split_of(name: str | None, splits: SplitConfig) -> str | None:
    """A theorem's split from a hash of its name: every program of a theorem, from any source and
    any rebuild, lands in the same split, so no theorem is in two splits."""
    if not name:
        return None
    total = splits.train + splits.valid + splits.test
    if total <= 0 or min(splits.train, splits.valid, splits.test) < 0:
        raise ValueError(f"split fractions must be >= 0 and sum to > 0, got {splits}")
    digest = hashlib.sha256(f"{splits.salt}\0{name}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64 * total
    if u < splits.train:
        return "train"
    return "valid" if u < splits.train + splits.valid else "test"


def arrow_schema():
    """The corpus schema in pyarrow terms (explicit, so empty lists and all-null columns keep their
    types). Written with pyarrow directly: importing ``datasets`` costs seconds and the build needs
    none of it; ``features()`` is the same schema for datasets users."""
    import pyarrow as pa

    position = pa.struct([("line", pa.int32()), ("column", pa.int32())])
    message = pa.struct([("severity", pa.string()), ("data", pa.string()), ("pos", position),
                         ("end_pos", position)])
    tactic = pa.struct([("tactic", pa.string()), ("goals", pa.string()), ("pos", position),
                        ("end_pos", position)])
    types = {"label": pa.bool_(), "reasons": pa.list_(pa.string()), "messages": pa.list_(message),
             "tactics": pa.list_(tactic), "source_row": pa.int64(), "verify_time": pa.float64(),
             "duplicates": pa.int32()}
    return pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS])


COLUMNS = ("id", "program", "name", "split", "category", "label", "first_error", "reasons", "messages", "tactics",
           "reference_trace", "trace_kind", "source", "source_row", "origin", "prover", "header", "statement",
           "verify_time", "lean_version", "duplicates", "recorded_verdict")


def features():
    """The corpus schema as ``datasets.Features``."""
    from datasets import Features, List, Value

    position = {"line": Value("int32"), "column": Value("int32")}
    return Features({
        "id": Value("string"),
        "program": Value("string"),
        "name": Value("string"),
        "split": Value("string"),
        "category": Value("string"),
        "label": Value("bool"),
        "first_error": Value("string"),
        "reasons": List(Value("string")),
        "messages": List({"severity": Value("string"), "data": Value("string"), "pos": position,
                          "end_pos": position}),
        "tactics": List({"tactic": Value("string"), "goals": Value("string"), "pos": position,
                         "end_pos": position}),
        "reference_trace": Value("string"),
        "trace_kind": Value("string"),
        "source": Value("string"),
        "source_row": Value("int64"),
        "origin": Value("string"),
        "prover": Value("string"),
        "header": Value("string"),
        "statement": Value("string"),
        "verify_time": Value("float64"),
        "lean_version": Value("string"),
        "duplicates": Value("int32"),
        "recorded_verdict": Value("string"),
    })


def write_corpus(rows: list[dict[str, Any]], final_dir: Path) -> Path:
    """Write ``final_dir/corpus.parquet`` atomically (a reader never sees half a corpus)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = final_dir.with_name(final_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    schema = arrow_schema()
    table = pa.Table.from_pydict({name: [row[name] for row in rows] for name in COLUMNS}, schema=schema)
    pq.write_table(table, tmp / CORPUS_FILE)
    if final_dir.exists():
        shutil.rmtree(final_dir)
    os.replace(tmp, final_dir)
    return final_dir / CORPUS_FILE


def load_corpus(run: str | Path, split: str | None = None):
    """A finished corpus as a ``datasets.Dataset`` (its manifest is checked first); ``run`` is a
    run folder, ``artifacts://data/<run>`` or a bare run name."""
    from datasets import Dataset

    from leanloop.artifacts import read_manifest
    from leanloop.paths import artifacts_root

    text = str(run)
    if text.startswith("artifacts://"):
        folder = artifacts_root() / text[len("artifacts://"):]
    elif os.sep in text or Path(text).exists():
        folder = Path(text)
    else:
        folder = artifacts_root() / "data" / text
    read_manifest(folder, stage="data")
    dataset = Dataset.from_parquet(str(folder / "final" / CORPUS_FILE))
    return dataset.filter(lambda row: row["split"] == split) if split else dataset
