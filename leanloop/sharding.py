"""Shards of a data-parallel run: which shard owns an item, where a shard's run lives, and what a
merge checks before it trusts a shard.

An item belongs to shard ``I`` of ``N`` when a stable hash of its key (a stage's deduplication
key: the corpus build's normalised program with its theorem, the sampler's statement name, ...)
is ``I`` modulo ``N``. The hash depends on the key alone, so duplicates always meet in one shard
and a shard's content never depends on which items the other shards hold or on earlier shard
counts. A shard is a run of its own, ``<parent run>/shards/<I>-of-<N>/``, with its own
config, journal and manifest, so it resumes by itself; its manifest's ``shard`` block records
the parent config's hash and the code version (a hash of the Python sources), and a merge
refuses any shard whose block disagrees with the merging process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from leanloop.artifacts import MANIFEST
from leanloop.paths import REPO_ROOT

SHARDS = "shards"
# a fixed salt: changing it would move every item to another shard
SALT = "leanloop-shard-v1"
SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardSpecError(ValueError):
    """A ``--shard`` value that does not name one shard (``I/N`` with 0 <= I < N)."""


class MergeRefused(RuntimeError):
    """Shards that cannot be merged: one missing or unfinished, or built with another config or code."""


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ShardSpecError(
                f"--shard {self.index}/{self.count}: the index must be in 0..{self.count - 1} and the count at least 1"
            )

    @classmethod
    def parse(cls, text: str | None) -> "Shard | None":
        """``"2/8"`` -> shard 2 of 8; None or empty -> no sharding."""
        if text is None or not str(text).strip():
            return None
        match = SPEC.match(str(text))
        if not match:
            raise ShardSpecError(f"--shard {text!r}: write I/N, e.g. --shard 0/4 (shard 0 of 4)")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def name(self) -> str:
        return f"{self.index}-of-{self.count}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, key: str) -> bool:
        return shard_of(key, self.count) == self.index


def shard_of(key: str, count: int) -> int:
    """The shard of ``count`` that owns ``key`` (stable across processes, machines and versions)."""
    digest = hashlib.sha256(f"{SALT}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def process_shard(option: str | None) -> Shard | None:
    """The shard this process runs: ``--shard I/N`` when given; else an array task's own, from
    ``LEANLOOP_SHARD_INDEX``/``_COUNT`` (``cluster.submit`` with an array profile) or SLURM's
    ``SLURM_ARRAY_TASK_ID`` (relative to ``SLURM_ARRAY_TASK_MIN``) of ``SLURM_ARRAY_TASK_COUNT``;
    else None (one process, the whole input)."""
    shard = Shard.parse(option)
    if shard is not None:
        return shard
    for index_var, count_var, first_var in (
        ("LEANLOOP_SHARD_INDEX", "LEANLOOP_SHARD_COUNT", None),
        ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN"),
    ):
        index = os.environ.get(index_var)
        if index is None:
            continue
        count = os.environ.get(count_var)
        if not count:
            raise ShardSpecError(
                f"this process is array task {index} ({index_var}), but {count_var} does not say "
                "how many shards there are; pass --shard I/N"
            )
        first = int(os.environ.get(first_var) or 0) if first_var else 0
        return Shard(int(index) - first, int(count))
    return None


def shard_run(run: str, shard: Shard | None) -> str:
    """The run name of a shard: ``<run>/shards/<I>-of-<N>`` (the run itself without a shard)."""
    return run if shard is None else f"{run}/{SHARDS}/{shard.name}"


def shard_dir(parent: Path, shard: Shard) -> Path:
    return Path(parent) / SHARDS / shard.name


def all_shards(count: int) -> list[Shard]:
    return [Shard(index, count) for index in range(count)]


def config_hash(config: dict[str, Any], ignore: Iterable[str] = ()) -> str:
    """Hash of a run's config without the keys that say which shard or which run folder it is."""
    body = {key: value for key, value in config.items() if key not in set(ignore)}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def code_version() -> str:
    """The code a shard ran: a hash of every Python source file of the checkout (tracked or new,
    tests excluded), as they are on disk. Shards of one checkout agree whatever else changes
    (docs, commits of the same code); a shard built before an edit to the code does not."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.py"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    digest = hashlib.sha256()
    for name in sorted(set(listed)):
        path = REPO_ROOT / name
        if name.startswith("tests/") or not path.is_file():
            continue
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def shard_record(shard: Shard, config: dict[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """The ``shard`` block of a shard's manifest: what a merge checks."""
    return {
        "index": shard.index,
        "count": shard.count,
        "config_hash": config_hash(config, ignore),
        "code": code_version(),
    }


def check_shards(
    parent: Path, count: int, config: dict[str, Any], ignore: Iterable[str] = (), what: str = "run"
) -> list[dict[str, Any]]:
    """Every shard's manifest, in shard order, once all ``count`` shards have finished with this
    config and this code; otherwise :class:`MergeRefused` naming the first shard that has not."""
    wanted_config = config_hash(config, ignore)
    code = code_version()
    manifests = []
    for shard in all_shards(count):
        folder = shard_dir(parent, shard)
        path = folder / MANIFEST
        if not path.is_file():
            state = "is unfinished (no manifest.json)" if folder.is_dir() else "is missing"
            raise MergeRefused(
                f"not merging {what} {parent.name}: shard {shard} {state} in {folder}; "
                f"run it first (only unfinished shards are resubmitted)"
            )
        manifest = json.loads(path.read_text())
        record = manifest.get("shard") or {}
        if record.get("index") != shard.index or record.get("count") != count:
            raise MergeRefused(
                f"not merging {what} {parent.name}: {folder} holds shard "
                f"{record.get('index')}/{record.get('count')}, not {shard}"
            )
        if record.get("config_hash") != wanted_config:
            raise MergeRefused(
                f"not merging {what} {parent.name}: shard {shard} was built with another config "
                f"({record.get('config_hash')} != {wanted_config}); rerun it with --overwrite true"
            )
        if record.get("code") != code:
            raise MergeRefused(
                f"not merging {what} {parent.name}: shard {shard} was built by another code version "
                f"({record.get('code')} != {code}); rerun it with --overwrite true"
            )
        manifests.append(manifest)
    return manifests


def add_counts(total: Any, part: Any) -> Any:
    """Nested sum of two count tables (dicts of ints, to any depth); used to check a merge."""
    if isinstance(total, dict) and isinstance(part, dict):
        out = dict(total)
        for key, value in part.items():
            out[key] = add_counts(out[key], value) if key in out else value
        return out
    if isinstance(total, (int, float)) and isinstance(part, (int, float)) and not isinstance(total, bool):
        return total + part
    if total == part:
        return total
    raise ValueError(f"cannot add {total!r} and {part!r}")


def sum_counts(tables: Iterable[Any]) -> Any:
    total: Any = None
    for table in tables:
        total = table if total is None else add_counts(total, table)
    return total


__all__ = [
    "MergeRefused",
    "SHARDS",
    "Shard",
    "ShardSpecError",
    "add_counts",
    "all_shards",
    "check_shards",
    "code_version",
    "config_hash",
    "process_shard",
    "shard_dir",
    "shard_of",
    "shard_record",
    "shard_run",
    "sum_counts",
]
