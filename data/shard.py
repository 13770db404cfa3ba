"""Which part of the input a shard of a corpus build owns.

``python -m data.build --config X.yaml --shard I/N`` builds shard I of N as the run
``artifacts/data/<run>/shards/<I>-of-<N>/`` (own journal, own corpus, own manifest). A candidate
belongs to the shard of its dedup key (``data.sources.item_id``: theorem name and normalised
program, hashed by ``leanloop.sharding``), so its duplicates are counted in the same shard; an
unreadable input row belongs to the shard of its ``source:row`` id. ``data.merge`` joins the shards.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from data.config import DataConfig
from data.sources import CandidateSet
from leanloop.sharding import Shard, shard_record

# config keys that say which run folder or shard a build is, not what it builds
NOT_HASHED = ("run", "shard", "fresh")


def select(items: CandidateSet, shard: Shard | None) -> CandidateSet:
    """The part of the whole input that ``shard`` owns (everything without a shard), with per-source
    counts of that part, so the shards' counts add up to the whole build's."""
    if shard is None:
        return items
    out = CandidateSet()
    out.candidates = [c for c in items.candidates if shard.owns(c.id)]
    out.duplicates = [d for d in items.duplicates if shard.owns(d.of_id)]
    out.errors = [e for e in items.errors if shard.owns(e.id)]
    for source in items.per_source:
        counts = Counter({"rows": 0})
        counts["unique"] = sum(c.source == source for c in out.candidates)
        counts["duplicate"] = sum(d.source == source for d in out.duplicates)
        counts["input_error"] = sum(e.source == source for e in out.errors)
        counts["rows"] = counts["unique"] + counts["duplicate"] + counts["input_error"]
        out.per_source[source] = Counter({k: v for k, v in counts.items() if v or k == "rows"})
    return out


def record(config: DataConfig) -> dict[str, Any] | None:
    """The ``shard`` block a shard's manifest carries (None for an unsharded build)."""
    shard = Shard.parse(config.shard)
    return None if shard is None else shard_record(shard, asdict(config), NOT_HASHED)
