"""``python -m data.merge --config X.yaml --count N [--run NAME]``: N corpus shards -> one corpus.

Merges the N shards built by ``python -m data.build --shard I/N`` (see ``data.shard``) into the
parent run ``artifacts/data/<run>/`` (``final/corpus.parquet`` and one ``manifest.json``), the same
corpus and manifest a one-process build of the same config writes: rows in the one-process order
(sources read in order, input errors last), counts recomputed over the merged rows and checked
against the shards' summed counts, the reconciliation table likewise. It refuses, in one line,
while a shard is missing or unfinished or when one was built with another config or code version.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from data.build import STAGE, BuildResult, _counts, manifest_for, summary
from data.config import DataConfig
from data.corpus import CORPUS_FILE, write_corpus
from data.reconcile import reconcile
from data.shard import NOT_HASHED
from data.sources import load_candidates
from leanloop.artifacts import Manifest, run_dir as stage_run_dir
from leanloop.lean.acceptance import BENCHMARK_HEADER
from leanloop.lean.types import Category
from leanloop.sharding import MergeRefused, Shard, check_shards, shard_dir, sum_counts
from leanloop.tool import parse_config as parse_tool_config, run_parsed_tool

# counts that do not add up over shards (a theorem's programs may sit in several shards)
NOT_ADDITIVE = ("theorems",)


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

    manifests = check_shards(run_dir, count, asdict(config), NOT_HASHED, what="corpus")
    header = config.header if config.header is not None else BENCHMARK_HEADER
    items = load_candidates(config, header)  # reading only: fixes the one-process row order
    order = {c.id: i for i, c in enumerate(items.candidates)}
    order.update({e.id: len(order) + i for i, e in enumerate(items.errors)})
    rows: list[dict[str, Any]] = []
    for index in range(count):
        folder = shard_dir(run_dir, Shard(index, count))
        rows.extend(pq.read_table(folder / "final" / CORPUS_FILE).to_pylist())
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids) or set(ids) != set(order):
        extra, missing = set(ids) - set(order), set(order) - set(ids)
        raise MergeRefused(
            f"not merging corpus {run_dir.name}: the shards hold {len(ids)} rows for "
            f"{len(order)} inputs ({len(missing)} missing, {len(extra)} not in the inputs, "
            f"{len(ids) - len(set(ids))} twice); rebuild the shards with --overwrite true"
        )
    rows.sort(key=lambda row: order[row["id"]])

    counts = _counts(items, rows)
    summed = sum_counts(m["counts"] for m in manifests)
    if _without(summed, NOT_ADDITIVE) != _without(counts, NOT_ADDITIVE):
        raise MergeRefused(
            f"not merging corpus {run_dir.name}: the shards' counts do not add up to the merged "
            f"corpus's ({summed} != {counts})"
        )
    candidate_ids = {c.id for c in items.candidates}
    outcomes = {
        row["id"]: _Outcome(Category(row["category"]), list(row["reasons"] or []))
        for row in rows
        if row["id"] in candidate_ids
    }
    reconciliation = reconcile(items, outcomes)
    if not _reconciliation_adds_up(reconciliation, [m.get("reconciliation", {}) for m in manifests]):
        raise MergeRefused(
            f"not merging corpus {run_dir.name}: the shards' reconciliation tables do not add up to the merged corpus's"
        )
    write_corpus(rows, run_dir / "final")  # only once every check passed
    verified_now = sum(m["metrics"].get("verified_now") or 0 for m in manifests)
    seconds = max(m["metrics"].get("seconds") or 0.0 for m in manifests)
    result = BuildResult(
        run_dir,
        counts,
        reconciliation,
        verified_now,
        sum(m["metrics"].get("resumed") or 0 for m in manifests),
        seconds,
        rows=len(rows),
    )
    traces = _merge_traces([m.get("traces", {}) for m in manifests], order)
    manifest = manifest_for(
        config,
        items,
        rows,
        result,
        backend_name=manifests[0]["backend"]["name"],
        reconciliation=reconciliation,
        trace_stats=traces,
    )
    manifest.metrics["shards"] = count
    # the slowest shard's wall time is the array's; the rate is the whole array's
    manifest.metrics["programs_per_s"] = round(verified_now / seconds, 2) if seconds > 0 else None
    return manifest, {"result": result, "shards": count}


def _reconciliation_adds_up(whole: dict[str, Any], parts: list[dict[str, Any]]) -> bool:
    """The shards' tables sum to the merged one. A shard none of whose rows of a source carries a
    recorded verdict has no table for it (``data.reconcile`` skips such sources), so a source that
    some shards lack is checked by its row counts only."""
    if any(source not in whole for part in parts for source in part):
        return False
    for source, table in whole.items():
        present = [part[source] for part in parts if source in part]
        if len(present) == len(parts):
            if sum_counts(present) != table:
                return False
        elif sum(p["rows"] for p in present) > table["rows"]:
            return False
    return True


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


@dataclass
class MergeConfig(DataConfig):
    """The build's own config (the same ``--config`` files and overrides) plus the shard count."""

    count: int = 0
    """How many shards the build was cut into (``--shard I/N``'s N)."""


def main(argv: list[str] | None = None) -> int:
    """``python -m data.merge --config X.yaml --count N [--run NAME] [overrides]``"""
    import yaml

    merging, resolved = parse_tool_config(
        MergeConfig, argv, prog="python -m data.merge", description=__doc__.splitlines()[0], overwrite=True
    )
    count = merging.count
    # the parent run is the one-process build's run: its config is the build's, without the count
    config = DataConfig(**{f.name: getattr(merging, f.name) for f in fields(DataConfig)})
    object.__setattr__(config, "overwrite", merging.overwrite)
    settings = yaml.safe_load(resolved)
    settings.pop("count", None)
    resolved = yaml.safe_dump(settings, sort_keys=False)
    if config.shard:
        print(f"data.merge: merging builds the parent run; drop --shard {config.shard}", file=sys.stderr)
        return 2
    if count < 1:
        print(f"data.merge: --count must be at least 1, got {count}", file=sys.stderr)
        return 2

    def work(config: DataConfig, run_dir: Path) -> tuple[Manifest, Any]:
        return merge(config, run_dir, count)

    try:
        # refused before the parent run folder is touched
        check_shards(stage_run_dir(STAGE, config.run), count, asdict(config), NOT_HASHED, what="corpus")
        outcome = run_parsed_tool(
            STAGE, config, resolved, work, run=config.run, overwrite=config.overwrite, clear_final=False
        )
    except MergeRefused as exc:
        print(f"data.merge: {exc}", file=sys.stderr)
        return 2
    if outcome.value is not None:
        print(summary(outcome.value["result"]))
        print(f"[data] merged {outcome.value['shards']} shards -> {outcome.run_dir}")
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m data.merge"))
