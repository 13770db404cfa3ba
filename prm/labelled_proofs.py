"""The labelled step dataset on disk: ``artifacts/prm_label/<run>/final/{train,valid,test}.parquet``.

One row per proof: proof id, theorem name, split, statement (the trusted declaration), header,
program, Lean version, generator, source, the Lean category of the whole program, proof label,
first failing step, ``steps`` (a list of {prose, tactic, label, reason}), reviewer decisions (JSON
text: a list of {step, verdict, reason, repair, recheck}), how many steps the correspondence judge
rejected, and how the labels were made (``labeller``: recorded_first_error / incremental / prefix).
Splits are by theorem (a hash of the name), so held-out theorems are never trained on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from leanloop.artifacts import resolve_run
from leanloop.corpus import SPLITS  # train / valid / test: the house split names

LABEL_STAGE = "prm_label"


@dataclass
class ProofRecord:
    proof_id: str
    name: str
    statement: str
    header: str
    program: str
    steps: list[dict[str, Any]]  # {prose, tactic, label (bool|None), reason}
    proof_label: bool | None
    first_error: int | None
    category: str
    lean_version: str | None
    generator: str
    source: str
    labeller: str
    reason: str = ""
    reviewer: list[dict[str, Any]] = field(default_factory=list)
    correspondence_rejected: int = 0
    informal: str | None = None
    split: str = ""

    @property
    def labels(self) -> list[bool | None]:
        return [s["label"] for s in self.steps]


def theorem_split(name: str, valid: float, test: float, seed: int = 0) -> str:
    """Deterministic split of a theorem by the hash of its name."""
    unit = int.from_bytes(hashlib.sha256(f"{seed}\x00{name}".encode()).digest()[:8], "little") / 2**64
    return "test" if unit < test else "valid" if unit < test + valid else "train"


def write_splits(records: Iterable[ProofRecord], final_dir: Path) -> dict[str, int]:
    import pandas as pd

    final_dir.mkdir(parents=True, exist_ok=True)
    by_split: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for record in records:
        row = dict(vars(record))
        row["reviewer"] = json.dumps(record.reviewer, ensure_ascii=False)
        by_split[record.split].append(row)
    for split, rows in by_split.items():
        frame = pd.DataFrame(rows, columns=list(ProofRecord.__dataclass_fields__))
        frame.to_parquet(final_dir / f"{split}.parquet", index=False)
    return {split: len(rows) for split, rows in by_split.items()}


def _plain(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and value != value:  # NaN from an all-null column
        return None
    return value


def read_split(run: str | Path, split: str) -> list[ProofRecord]:
    """The proofs of one split of a prm-label run (``artifacts://prm_label/<run>`` or its folder)."""
    import pandas as pd

    folder = resolve_run(str(run), LABEL_STAGE) if not isinstance(run, Path) else run
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    frame = pd.read_parquet(folder / "final" / f"{split}.parquet")
    records = []
    for row in frame.to_dict("records"):
        row = {k: _plain(v) for k, v in row.items()}
        row["reviewer"] = json.loads(row["reviewer"] or "[]")
        if row["first_error"] is not None:
            row["first_error"] = int(row["first_error"])
        records.append(ProofRecord(**row))
    return records
