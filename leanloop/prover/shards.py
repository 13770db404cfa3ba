"""Sharded, resumable sample files and their deterministic merge.

A statement set is cut round-robin into ``count`` shards (shard ``i`` holds statements i, i+count,
...). Each shard appends one statement's k attempts at once to ``shard-IIIII-of-NNNNN.jsonl`` and
fsyncs, so a killed run loses at most the statement in flight: on restart, a torn last line and any
statement with fewer than k rows are dropped and sampled again, every finished statement is skipped.
Merging orders rows by the statement set's order and the attempt number, so the result does not
depend on how many shards there were or in which order they finished.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from leanloop.jsonl import JsonlError, dumps_line, read_appended, write_jsonl


class ShardError(RuntimeError):
    """Shards are missing, incomplete or inconsistent with the statement set."""


@dataclass(frozen=True)
class ShardSpec:
    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ShardError(f"shard index must be in [0, {self.count}); got {self.index} of "
                             f"{self.count}")

    def select(self, items: Sequence) -> list:
        return list(items[self.index::self.count])

    def file_name(self) -> str:
        return f"shard-{self.index:05d}-of-{self.count:05d}.jsonl"


def shard_from_env(index: int | None, count: int | None) -> ShardSpec:
    """The shard this process samples: explicit config wins; then ``LEANLOOP_SHARD_INDEX`` /
    ``LEANLOOP_SHARD_COUNT`` (set by ``cluster.submit`` for each task of an array profile); then a
    SLURM array task's ``SLURM_ARRAY_TASK_ID`` (relative to ``SLURM_ARRAY_TASK_MIN``) of
    ``SLURM_ARRAY_TASK_COUNT``."""
    if index is None and os.environ.get("LEANLOOP_SHARD_INDEX") is not None:
        index = int(os.environ["LEANLOOP_SHARD_INDEX"])
        count = count or int(os.environ.get("LEANLOOP_SHARD_COUNT", "0")) or None
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    if index is None and task is not None:
        index = int(task) - int(os.environ.get("SLURM_ARRAY_TASK_MIN", "0"))
        count = count or int(os.environ.get("SLURM_ARRAY_TASK_COUNT", "0")) or None
    if index is not None and count is None:
        raise ShardError(f"this process is shard {index}, but neither shard.count nor "
                         "LEANLOOP_SHARD_COUNT / SLURM_ARRAY_TASK_COUNT says how many shards there are")
    return ShardSpec(index or 0, count or 1)


def sharded_by_environment() -> bool:
    return any(os.environ.get(v) is not None for v in ("LEANLOOP_SHARD_INDEX", "SLURM_ARRAY_TASK_ID"))


def _read_rows(path: Path) -> tuple[list[dict], bool]:
    """Rows of a shard file, and whether a torn last line (a write cut by a kill) was found."""
    try:
        return read_appended(path)
    except JsonlError as error:
        raise ShardError(f"{error}: a corrupt row inside a shard; delete the shard file to sample that "
                         "shard again") from None


def complete_groups(rows: Iterable[dict], k: int) -> dict[str, list[dict]]:
    """Statement name -> its k rows, for statements whose attempts 0..k-1 are all present."""
    groups: dict[str, dict[int, dict]] = defaultdict(dict)
    for row in rows:
        groups[row["name"]][int(row["attempt"])] = row
    return {name: [attempts[i] for i in range(k)] for name, attempts in groups.items()
            if set(attempts) == set(range(k))}


class ShardFile:
    """Append-only writer of one shard, resuming from what a previous run finished."""

    def __init__(self, path: str | Path, k: int):
        self.path, self.k = Path(path), k
        self.done: dict[str, list[dict]] = {}
        self.dropped = 0  # rows of unfinished statements discarded on resume
        if self.path.is_file():
            rows, torn = _read_rows(self.path)
            self.done = complete_groups(rows, k)
            kept = sum(len(group) for group in self.done.values())
            self.dropped = len(rows) - kept + int(torn)
            if self.dropped:
                self._rewrite([row for group in self.done.values() for row in group])

    def _rewrite(self, rows: list[dict]) -> None:
        write_jsonl(self.path, rows)

    def append(self, name: str, rows: list[dict]) -> None:
        if len(rows) != self.k:
            raise ShardError(f"statement '{name}' has {len(rows)} attempts, expected k={self.k}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write("".join(dumps_line(row) for row in rows))
            handle.flush()
            os.fsync(handle.fileno())
        self.done[name] = rows


def merge_shards(folder: str | Path, count: int, names: Sequence[str], k: int) -> list[dict]:
    """All shards' rows in statement-set order, attempts ascending. Fails (naming the missing
    statements and shards) unless every statement has all k attempts."""
    folder = Path(folder)
    groups: dict[str, list[dict]] = {}
    for index in range(count):
        path = folder / ShardSpec(index, count).file_name()
        if not path.is_file():
            continue
        rows, _ = _read_rows(path)
        groups.update(complete_groups(rows, k))
    missing = [name for name in names if name not in groups]
    if missing:
        owners = sorted({names.index(name) % count for name in missing})
        raise ShardError(f"{len(missing)} of {len(names)} statements are not sampled yet (e.g. "
                         f"{missing[:3]}); unfinished shards: {owners[:10]} of {count}. Run those "
                         "shards (or resume them) before merging")
    unknown = set(groups) - set(names)
    if unknown:
        raise ShardError(f"{folder} holds samples for {len(unknown)} statements outside this "
                         f"statement set (e.g. {sorted(unknown)[:3]}); it belongs to another config")
    return [row for name in names for row in groups[name]]
