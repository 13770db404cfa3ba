"""The labelled corpus: its schema, its split names, and the one reader every stage uses.

The data stage writes ``artifacts/data/<run>/final/corpus.parquet`` (one row per distinct
(theorem, program) pair, schema :data:`COLUMNS`), split theorem-disjointly into :data:`SPLITS`
(``train``, ``valid``, ``test``). Readers name a run (``artifacts://data/<run>``, its folder or its
``final/``) and get rows through :func:`read_corpus` (manifest checked, columns checked, split names
canonical: a corpus that spells the middle split ``validation``/``val``/``dev`` reads as ``valid``),
or as a ``datasets.Dataset`` through :func:`load_corpus`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leanloop.artifacts import resolve_run

STAGE = "data"
CORPUS_FILE = "corpus.parquet"
SPLITS = ("train", "valid", "test")
VALID = SPLITS[1]
# The splits a model is judged on: ``valid`` chooses thresholds and stackers, ``test`` reports at them.
EVAL_SPLITS = SPLITS[1:]
SPLIT_ALIASES = {"validation": "valid", "val": "valid", "dev": "valid"}

COLUMNS = (
    "id",
    "program",
    "name",
    "split",
    "category",
    "label",
    "first_error",
    "reasons",
    "messages",
    "tactics",
    "reference_trace",
    "trace_kind",
    "source",
    "source_row",
    "origin",
    "prover",
    "header",
    "statement",
    "verify_time",
    "lean_version",
    "duplicates",
    "recorded_verdict",
)


class CorpusColumnsError(ValueError, KeyError):
    """A corpus run without the columns asked for (built by an older data stage): a user's input
    error (ValueError, one line at the command line), and a lookup error to code that catches KeyError."""

    __str__ = Exception.__str__  # the message as written, not KeyError's quoted repr


def canonical_split(name: str | None) -> str | None:
    """``validation``/``val``/``dev`` -> ``valid``; the other names as they are."""
    return SPLIT_ALIASES.get(name, name) if name is not None else None


def arrow_schema():
    """The corpus schema in pyarrow terms (explicit, so empty lists and all-null columns keep their
    types). Written with pyarrow directly: importing ``datasets`` costs seconds and the build needs
    none of it; ``features()`` is the same schema for datasets users."""
    import pyarrow as pa

    position = pa.struct([("line", pa.int32()), ("column", pa.int32())])
    message = pa.struct([("severity", pa.string()), ("data", pa.string()), ("pos", position), ("end_pos", position)])
    tactic = pa.struct([("tactic", pa.string()), ("goals", pa.string()), ("pos", position), ("end_pos", position)])
    types = {
        "label": pa.bool_(),
        "reasons": pa.list_(pa.string()),
        "messages": pa.list_(message),
        "tactics": pa.list_(tactic),
        "source_row": pa.int64(),
        "verify_time": pa.float64(),
        "duplicates": pa.int32(),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS])


def features():
    """The corpus schema as ``datasets.Features`` (derived from :func:`arrow_schema`: one schema)."""
    from datasets import Features

    return Features.from_arrow_schema(arrow_schema())


def corpus_files(ref: str | os.PathLike) -> list[Path]:
    """The parquet files of a finished corpus run (its manifest checked: a data-stage run)."""
    run = resolve_run(ref, STAGE)
    final = run / "final"
    files = sorted(final.rglob("*.parquet")) if final.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{final} holds no parquet files: the data run {ref} did not finish exporting")
    return files


def read_corpus(
    ref: str | os.PathLike, columns: Sequence[str] | None = None, splits: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Rows of a finished corpus run (``columns``: those only; ``splits``: rows of those splits only),
    with canonical split names. A missing column is a clear error naming the rebuild."""
    import pyarrow.dataset as ds

    files = corpus_files(ref)
    dataset = ds.dataset([str(f) for f in files], format="parquet")
    wanted = list(columns) if columns is not None else list(dataset.schema.names)
    missing = [c for c in wanted if c not in dataset.schema.names]
    if missing:
        raise CorpusColumnsError(
            f"corpus {ref} lacks columns {missing} (has {dataset.schema.names}); "
            "rebuild it with the data stage (`make data`)"
        )
    rows = dataset.to_table(columns=wanted).to_pylist()
    if "split" in wanted:
        for row in rows:
            row["split"] = canonical_split(row["split"])
    if splits is not None:
        if "split" not in wanted:
            raise ValueError("read_corpus(splits=...) needs the `split` column among `columns`")
        keep = {canonical_split(s) for s in splits}
        rows = [row for row in rows if row["split"] in keep]
    return rows


def load_corpus(ref: str | os.PathLike, split: str | None = None):
    """A finished corpus run as a ``datasets.Dataset`` (manifest checked; ``split``: that split's
    rows only, split names compared canonically)."""
    from datasets import Dataset

    dataset = Dataset.from_parquet([str(f) for f in corpus_files(ref)])
    if split is None:
        return dataset
    wanted = canonical_split(split)
    return dataset.filter(lambda row: canonical_split(row["split"]) == wanted)


def corpus_splits(ref: str | os.PathLike) -> dict[str, str]:
    """Theorem name -> split. The corpus never puts a theorem in two splits (the data stage's rule);
    a corpus that does is refused, since a theorem-disjoint evaluation would be impossible."""
    splits: dict[str, str] = {}
    for row in read_corpus(ref, ["name", "split"]):
        name, split = row["name"], row["split"]
        if name is None or split is None:
            continue
        if splits.setdefault(name, split) != split:
            raise ValueError(f"corpus {ref} puts '{name}' in two splits ({splits[name]}, {split})")
    return splits


def held_out_names(ref: str | os.PathLike) -> set[str]:
    """Theorem names outside ``train`` (the ones a pretraining or training set must not contain)."""
    return {name for name, split in corpus_splits(ref).items() if split != "train"}


__all__ = [
    "COLUMNS",
    "CORPUS_FILE",
    "CorpusColumnsError",
    "EVAL_SPLITS",
    "SPLITS",
    "SPLIT_ALIASES",
    "VALID",
    "arrow_schema",
    "canonical_split",
    "corpus_files",
    "corpus_splits",
    "features",
    "held_out_names",
    "load_corpus",
    "read_corpus",
]
