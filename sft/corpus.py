"""Reading a labelled corpus run (``artifacts/data/<run>/``, written by ``data.build``)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from leanloop.artifacts import read_manifest
from leanloop.paths import artifacts_root, resolve_shared

ARTIFACTS_SCHEME = "artifacts://"


def run_folder(path: str | Path) -> Path:
    """A run folder from ``artifacts://<stage>/<run>``, a run folder, or its ``final/``."""
    text = str(path)
    folder = (artifacts_root() / text[len(ARTIFACTS_SCHEME):] if text.startswith(ARTIFACTS_SCHEME)
              else resolve_shared(text))
    if folder.name == "final" and (folder.parent / "manifest.json").is_file():
        folder = folder.parent
    return folder


def read_corpus(path: str | Path, columns: Sequence[str]) -> list[dict]:
    """The rows of a finished corpus run (its manifest is checked first), restricted to ``columns``."""
    import pyarrow.dataset as ds

    folder = run_folder(path)
    read_manifest(folder, stage="data")
    files = sorted((folder / "final").rglob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{folder}/final holds no parquet files: not a corpus run")
    table = ds.dataset([str(f) for f in files], format="parquet")
    missing = [c for c in columns if c not in table.schema.names]
    if missing:
        raise KeyError(f"corpus {folder} lacks columns {missing} (has {table.schema.names})")
    return table.to_table(columns=list(columns)).to_pylist()


def corpus_splits(path: str | Path) -> dict[str, str]:
    """Theorem name -> split. The corpus never puts a theorem in two splits (data.build's rule);
    a corpus that does is refused, since a theorem-disjoint evaluation would be impossible."""
    splits: dict[str, str] = {}
    for row in read_corpus(path, ["name", "split"]):
        name, split = row["name"], row["split"]
        if name is None or split is None:
            continue
        if splits.setdefault(name, split) != split:
            raise ValueError(f"corpus {path} puts '{name}' in two splits ({splits[name]}, {split})")
    return splits
