"""Sharded corpus builds and their exact merge.

``python -m data.build --config X.yaml --shard I/N`` builds shard I of N as the run
``artifacts/data/<run>/shards/<I>-of-<N>/`` (own journal, own corpus, own manifest). A candidate
belongs to the shard of its dedup key (``data.sources.item_id``: theorem name and normalised
program), so its duplicates are counted in the same shard; an unreadable input row belongs to the
shard of its ``source:row`` id.

``python -m data.shards --config X.yaml --count N`` merges the N shards into the parent run
``artifacts/data/<run>/`` (``final/corpus.parquet`` and one ``manifest.json``), the same corpus and
manifest a one-process build of the same config writes: rows in the one-process order (sources
read in order, input errors last), counts recomputed over the merged rows and checked against the
shards' summed counts, the reconciliation table likewise. It refuses, in one line, while a shard is
missing or unfinished or when one was built with another config or code version.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from data.config import DataConfig
from data.corpus import CORPUS_FILE, write_corpus
from data.sources import CandidateSet
from leanloop.artifacts import Manifest
from leanloop.lean.types import Category
from leanloop.sharding import MergeRefused, Shard, check_shards, shard_dir, shard_record, sum_counts

# config keys that say which run folder or shard a build is, not what it builds
NOT_HASHED = ("run", "shard", "fresh")
# counts that do not add up over shards (a theorem's programs may sit in several shards)
NOT_ADDITIVE = ("theorems",)


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


@dataclass
class _Outcome:
    """What the reconciliation reads of an outcome, rebuilt from a corpus row."""

    category: Category
    reasons: list[str]


def _without(counts: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: _without(v, keys) if isinstance(v, dict) else v for k, v in counts.items() if k not in keys}


def merge(config: DataConfig, run_dir: Path, count: int) -> tuple[Manifest, dict[str, Any]]:
    """Merge the ``count`` finished shards of ``config`` into ``run_dir``; returns the parent's manifest
    (not yet written) and a summary for the user."""
    import pyarrow.parquet as pq

    from data.build import BuildResult, _counts, manifest_for
    from data.reconcile import reconcile
    from data.sources import load_candidates
    from leanloop.lean.policy import BENCHMARK_HEADER

    manifests = check_shards(run_dir, count, asdict(config), NOT_HASHED, what="corpus")
    header = config.header if config.header is not None else BENCHMARK_HEADER
    items = load_candidates(config, header)  # reading only: fixes the one-process row order
    order = {c.id: i for i, c in enumerate(items.candidates)}
    order.update({e.id: len(order) + i for i, e in enumerate(items.errors)})
    rows: list[dict[str, Any]] = []
    for shard_manifest, index in zip(manifests, range(count)):
        folder = shard_dir(run_dir, Shard(index, count))
        rows.extend(pq.read_table(folder / "final" / CORPUS_FILE).to_pylist())
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids) or set(ids) != set(order):
        extra, missing = set(ids) - set(order), set(order) - set(ids)
        raise MergeRefused(f"not merging corpus {run_dir.name}: the shards hold {len(ids)} rows for "
                           f"{len(order)} inputs ({len(missing)} missing, {len(extra)} not in the inputs, "
                           f"{len(ids) - len(set(ids))} twice); rebuild the shards with --overwrite true")
    rows.sort(key=lambda row: order[row["id"]])
    write_corpus(rows, run_dir / "final")

    counts = _counts(items, rows)
    summed = sum_counts(m["counts"] for m in manifests)
    if _without(summed, NOT_ADDITIVE) != _without(counts, NOT_ADDITIVE):
        raise MergeRefused(f"not merging corpus {run_dir.name}: the shards' counts do not add up to the merged "
                           f"corpus's ({summed} != {counts})")
    outcomes = {row["id"]: _Outcome(Category(row["category"]), list(row["reasons"] or []))
                for row in rows if row["id"] in {c.id for c in items.candidates}}
    reconciliation = reconcile(items, outcomes)
    summed_reconciliation = sum_counts(m.get("reconciliation", {}) for m in manifests) or {}
    if summed_reconciliation != reconciliation:
        raise MergeRefused(f"not merging corpus {run_dir.name}: the shards' reconciliation tables do not add up "
                           "to the merged corpus's")
    verified_now = sum(m["metrics"].get("verified_now") or 0 for m in manifests)
    seconds = max(m["metrics"].get("seconds") or 0.0 for m in manifests)
    result = BuildResult(run_dir, counts, reconciliation, verified_now,
                         sum(m["metrics"].get("resumed") or 0 for m in manifests), seconds, rows=len(rows))
    traces = _merge_traces([m.get("traces", {}) for m in manifests], order)
    manifest = manifest_for(config, items, rows, result, backend_name=manifests[0]["backend"]["name"],
                            reconciliation=reconciliation, trace_stats=traces)
    manifest.metrics["shards"] = count
    # the slowest shard's wall time is the array's; the rate is the whole array's
    manifest.metrics["programs_per_s"] = round(verified_now / seconds, 2) if seconds > 0 else None
    return manifest, {"result": result, "shards": count}


def _merge_traces(parts: list[dict[str, Any]], order: dict[str, int]) -> Counter | None:
    """The shards' trace counters summed; the first failure is the earliest in input order, as in
    one process."""
    if any("note" in part for part in parts):
        return None
    total: Counter = Counter()
    firsts = []
    for part in parts:
        for key, value in part.items():
            if key == "first_failure":
                firsts.append(value)
            else:
                total[key] += value
    if firsts:
        total["first_failure"] = min(firsts, key=lambda text: order.get(text.split(":", 1)[0], len(order)))  # type: ignore[assignment]
    return total


def main(argv: list[str] | None = None) -> int:
    """``python -m data.shards --config X.yaml --count N [--run NAME] [overrides]``"""
    from data.build import STAGE, summary
    from leanloop.artifacts import run_dir as run_dir_of_stage
    from leanloop.tool import parse_config as parse_tool_config, run_parsed_tool

    def run_dir_of(run: str) -> Path:
        return run_dir_of_stage(STAGE, run)

    parser = argparse.ArgumentParser(prog="python -m data.shards", add_help=False)
    parser.add_argument("--count", type=int, required=True, help="how many shards the build was cut into")
    known, rest = parser.parse_known_args(argv)
    config, resolved = parse_tool_config(DataConfig, rest, prog="python -m data.shards",
                                         description=__doc__.splitlines()[0], overwrite=True)
    if config.shard:
        print(f"data.shards: merging builds the parent run; drop --shard {config.shard}", file=sys.stderr)
        return 2
    if known.count < 1:
        print(f"data.shards: --count must be at least 1, got {known.count}", file=sys.stderr)
        return 2

    def work(config: DataConfig, run_dir: Path) -> tuple[Manifest, Any]:
        return merge(config, run_dir, known.count)

    try:
        # refused before the parent run folder is touched
        check_shards(run_dir_of(config.run), known.count, asdict(config), NOT_HASHED, what="corpus")
        outcome = run_parsed_tool(STAGE, config, resolved, work, run=config.run, overwrite=config.overwrite,
                                  clear_final=False)
    except MergeRefused as exc:
        print(f"data.shards: {exc}", file=sys.stderr)
        return 2
    if outcome.value is not None:
        print(summary(outcome.value["result"]))
        print(f"[data] merged {outcome.value['shards']} shards -> {outcome.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
