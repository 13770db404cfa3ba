"""Resumable sample journals of a statement set, sharded by statement, and their deterministic merge.

A statement belongs to the shard that :mod:`leanloop.sharding` assigns to its name (a stable hash),
so a shard's statements never depend on the other shards or on earlier shard counts. A run samples
into its journal: ``<run>/journal.jsonl`` for one process, ``<run>/shards/<I>-of-<N>/journal.jsonl``
for shard I of N (a run of its own with its own manifest). Each statement's k attempts are appended
at once and fsynced, so a killed run loses at most the statement in flight: on restart, a torn last
line and any statement with fewer than k rows are dropped and sampled again, every finished
statement is skipped. Merging orders rows by the statement set's order and the attempt number, so
the result does not depend on how many shards there were or in which order they finished.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence, TypeVar

from leanloop.jsonl import JsonlError, dumps_line, read_appended, write_jsonl
from leanloop.sharding import MergeRefused, Shard, all_shards, shard_dir, shard_of

JOURNAL = "journal.jsonl"
T = TypeVar("T")


class ShardError(RuntimeError):
    """A journal that cannot be resumed: a corrupt row, a statement with the wrong number of
    attempts, or samples made with another sampling setup."""


def run_folder(parent: str | Path, shard: Shard | None) -> Path:
    """The folder a process samples into: the run itself, or its shard's run."""
    return Path(parent) if shard is None else shard_dir(Path(parent), shard)


def owned(statements: Sequence[T], shard: Shard | None) -> list[T]:
    """The statements (anything with a ``name``) that ``shard`` samples, in statement-set order; all
    of them without a shard."""
    return [s for s in statements if shard is None or shard.owns(s.name)]


def _read_rows(path: Path) -> tuple[list[dict], bool]:
    """Rows of a journal, and whether a torn last line (a write cut by a kill) was found."""
    try:
        return read_appended(path)
    except JsonlError as error:
        raise ShardError(
            f"{error}: a corrupt row inside a journal; delete the journal to sample that shard again"
        ) from None


def complete_groups(rows: Iterable[dict], k: int) -> dict[str, list[dict]]:
    """Statement name -> its k rows, for statements whose attempts 0..k-1 are all present."""
    groups: dict[str, dict[int, dict]] = defaultdict(dict)
    for row in rows:
        groups[row["name"]][int(row["attempt"])] = row
    return {
        name: [attempts[i] for i in range(k)] for name, attempts in groups.items() if set(attempts) == set(range(k))
    }


class SampleJournal:
    """Append-only writer of one run's (or shard's) journal, resuming from what a previous run finished."""

    def __init__(self, folder: str | Path, k: int):
        self.path, self.k = Path(folder) / JOURNAL, k
        self.done: dict[str, list[dict]] = {}
        self.dropped = 0  # rows of unfinished statements discarded on resume
        if self.path.is_file():
            rows, torn = _read_rows(self.path)
            self.done = complete_groups(rows, k)
            kept = sum(len(group) for group in self.done.values())
            self.dropped = len(rows) - kept + int(torn)
            if self.dropped:
                write_jsonl(self.path, [row for group in self.done.values() for row in group])

    def append(self, name: str, rows: list[dict]) -> None:
        if len(rows) != self.k:
            raise ShardError(f"statement '{name}' has {len(rows)} attempts, expected k={self.k}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write("".join(dumps_line(row) for row in rows))
            handle.flush()
            os.fsync(handle.fileno())
        self.done[name] = rows


def merge_journals(parent: str | Path, count: int, names: Sequence[str], k: int) -> list[dict]:
    """All rows in statement-set order, attempts ascending: from the run's own journal (``count``
    0) or from its ``count`` shards' journals. :class:`MergeRefused` (naming the missing statements
    and their shards) unless every statement has all k attempts."""
    parent = Path(parent)
    folders = [parent] if count == 0 else [shard_dir(parent, shard) for shard in all_shards(count)]
    groups: dict[str, list[dict]] = {}
    for folder in folders:
        if (folder / JOURNAL).is_file():
            groups.update(complete_groups(_read_rows(folder / JOURNAL)[0], k))
    missing = [name for name in names if name not in groups]
    if missing:
        where = (
            f"unfinished shards: {sorted({shard_of(name, count) for name in missing})[:10]} of {count}"
            if count
            else "the run is unfinished"
        )
        raise MergeRefused(
            f"not merging samples {parent.name}: {len(missing)} of {len(names)} statements are not "
            f"sampled yet (e.g. {missing[:3]}); {where}. Run (or resume) them before merging"
        )
    unknown = set(groups) - set(names)
    if unknown:
        raise MergeRefused(
            f"not merging samples {parent.name}: it holds samples for {len(unknown)} statements "
            f"outside this statement set (e.g. {sorted(unknown)[:3]}); it belongs to another config"
        )
    return [row for name in names for row in groups[name]]
