"""The labelled corpus on disk: its schema, theorem-disjoint splits, writing and loading.

``artifacts/data/<run>/final/corpus.parquet`` holds one row per distinct (theorem, program) pair
and one per unreadable input row (``input_error``, with its reason). Load it with
``leanloop.corpus.read_corpus(run)`` (rows) or ``leanloop.corpus.load_corpus(run)`` (a
``datasets.Dataset``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from data.config import SplitConfig
from leanloop.corpus import COLUMNS, CORPUS_FILE, SPLITS, arrow_schema  # noqa: F401 (the schema lives in leanloop.corpus)


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
