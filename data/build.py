"""``python -m data.build --config configs/data/<name>.yaml``: label candidate programs with Lean."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from data.config import DataConfig
from data.corpus import SPLITS, split_of, write_corpus
from data.journal import JOURNAL, Journal, JournalMismatch
from leanloop.lean.acceptance import BENCHMARK_HEADER
from data.reconcile import format_reconciliation, reconcile
from data.shard import record as shard_record, select as select_shard
from data.sources import CandidateSet, load_candidates
from leanloop.lean.types import Category, LeanBackend, LeanResponse, Outcome, VerifyRequest
from leanloop.artifacts import Manifest, content_hash, run_dir as artifact_run_dir, run_lock
from leanloop.paths import resolve_shared
from leanloop.sharding import Shard, ShardSpecError, shard_run
from leanloop.tool import cli_entry, parse_config as parse_tool_config, run_parsed_tool, start_run

STAGE = "data"


class VersionTap(LeanBackend):
    """Passes every call through and remembers which Lean version answered each program."""

    def __init__(self, inner: LeanBackend):
        self.inner = inner
        self.name = inner.name
        self.versions: dict[str, str | None] = {}

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        response = await self.inner.run(program, timeout)
        self.versions[program] = response.lean_version
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class BuildRefused(ValueError):
    """The config cannot give a meaningful corpus (checked before any work): the user's to fix."""


class BuildFailed(RuntimeError):
    """The build ran but its result is not a corpus to hand on (empty, mostly infrastructure failures)."""


def check_config(config: DataConfig) -> None:
    """What can be refused before reading or verifying anything."""
    fractions = {k: getattr(config.splits, k) for k in ("train", "valid", "test")}
    if min(fractions.values()) < 0 or abs(sum(fractions.values()) - 1.0) > 1e-6:
        given = ", ".join(f"splits.{k}={v}" for k, v in fractions.items())
        raise BuildRefused(
            f"split fractions must be >= 0 and sum to 1, got {given} "
            f"(sum {sum(fractions.values()):g}); fix them in the config or with --splits.<name>"
        )
    if not 0.0 <= config.min_eligible_share <= 1.0:
        raise BuildRefused(f"min_eligible_share must be in [0, 1], got {config.min_eligible_share}")


def check_result(
    config: DataConfig,
    items: CandidateSet,
    done: dict[str, tuple[Outcome, str | None]],
    *,
    part_of: CandidateSet | None = None,
) -> None:
    """Fail closed: no corpus (and no manifest) from an empty input or a build Lean did not answer.
    ``part_of``: the whole input when ``items`` is one shard of it (a shard of a non-empty input may
    hold nothing)."""
    if not items.candidates:
        if part_of is not None and part_of is not items and part_of.candidates:
            return
        rows = sum(c["rows"] for c in items.per_source.values())
        what = "no rows" if not rows else f"{rows} rows and every one is an input error"
        raise BuildFailed(
            f"the sources hold {what}: no candidate program to verify "
            f"({', '.join(s.path for s in config.sources)}); nothing was written"
        )
    infra = sum(done[c.id][0].category is Category.INFRA_ERROR for c in items.candidates)
    share = 1 - infra / len(items.candidates)
    if share < config.min_eligible_share:
        raise BuildFailed(
            f"{infra} of {len(items.candidates)} programs got infra_error (Lean or its backend "
            f"failed), leaving {share:.0%} < min_eligible_share {config.min_eligible_share:g}; "
            f"no corpus written. Fix the backend ({config.lean.backend.kind}) and rerun: the journal "
            "keeps the verdicts and retries only the failures"
        )


@dataclass
class BuildResult:
    run_dir: Path
    counts: dict[str, Any]
    reconciliation: dict[str, Any]
    verified_now: int
    resumed: int
    seconds: float
    rows: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def fingerprint(config: DataConfig, header: str) -> str:
    """What decides an outcome (the journal refuses to resume under a different one)."""
    statements = {p: content_hash(resolve_shared(p)) for p in config.statements}
    lean = config.lean
    body = {
        "profile": lean.profile,
        "backend": {"kind": lean.backend.kind, "options": asdict(lean.backend.options)},
        "timeout": lean.timeout,
        "header": header,
        "statements": statements,
        "policy_version": 1,
    }
    if lean.heartbeats != "profile":  # only when set, so the journals of earlier builds stay valid
        body["heartbeats"] = lean.heartbeats
    if config.timeout_retries:  # only when set, so the journals of earlier builds stay valid
        body["timeout_retries"] = config.timeout_retries
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _trace_fn():
    try:
        from leanloop.traces import annotate
    except ImportError:
        return None
    return annotate


def _reference_trace(annotate, program: str, outcome: Outcome) -> tuple[str | None, str | None]:
    """Full trace where Lean gave tactic records; an error-only trace where it gave only messages
    about an invalid program; none otherwise (a valid program with no states has nothing to add)."""
    if annotate is None or outcome.category not in (Category.VALID, Category.INVALID):
        return None, None
    if outcome.tactics:
        return annotate(program, outcome.messages, outcome.tactics), "full"
    if outcome.category is Category.INVALID and outcome.messages:
        return annotate(program, outcome.messages, []), "errors_only"
    return None, None


def corpus_label(category: Category) -> bool | None:
    """The corpus label: Lean's verdict on a compiled candidate, nothing else. Candidates rejected
    before compilation, timeouts and infrastructure errors stay in the corpus with their category
    and no label (LLF Section 3 excludes them from the labelled corpus)."""
    return {Category.VALID: True, Category.INVALID: False}.get(category)


def _rows(
    items: CandidateSet, done: dict[str, tuple[Outcome, str | None]], config: DataConfig, trace_stats: Counter
) -> list[dict[str, Any]]:
    annotate = _trace_fn() if config.traces else None
    rows = []
    for c in items.candidates:
        outcome, version = done[c.id]
        trace, kind = None, None
        try:
            trace, kind = _reference_trace(annotate, c.program, outcome)
        except Exception as exc:  # keep the row; count and report the annotator failure
            trace_stats["failed"] += 1
            trace_stats.setdefault("first_failure", f"{c.id}: {type(exc).__name__}: {exc}")  # type: ignore[arg-type]
        if kind:
            trace_stats[kind] += 1
        row = outcome.to_dict()
        rows.append(
            {
                "id": c.id,
                "program": c.program,
                "name": c.name,
                "split": split_of(c.name, config.splits),
                "category": row["category"],
                "label": corpus_label(outcome.category),
                "first_error": row["first_error"],
                "reasons": row["reasons"],
                "messages": row["messages"],
                "tactics": row["tactics"],
                "reference_trace": trace,
                "trace_kind": kind,
                "source": c.source,
                "source_row": c.row,
                "origin": c.origin,
                "prover": c.prover,
                "header": c.header,
                "statement": c.statement,
                "verify_time": row["time_s"],
                "lean_version": version,
                "duplicates": c.duplicates,
                "recorded_verdict": c.recorded,
            }
        )
    for e in items.errors:
        rows.append(
            {
                "id": e.id,
                "program": e.program,
                "name": e.name,
                "split": split_of(e.name, config.splits),
                "category": Category.INPUT_ERROR.value,
                "label": None,
                "first_error": None,
                "reasons": [e.reason],
                "messages": [],
                "tactics": [],
                "reference_trace": None,
                "trace_kind": None,
                "source": e.source,
                "source_row": e.row,
                "origin": e.origin,
                "prover": e.prover,
                "header": None,
                "statement": None,
                "verify_time": 0.0,
                "lean_version": None,
                "duplicates": 0,
                "recorded_verdict": e.recorded,
            }
        )
    return rows


def _counts(items: CandidateSet, rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_category = Counter(r["category"] for r in rows)
    per_source: dict[str, dict[str, int]] = {}
    for source, counter in items.per_source.items():
        per_source[source] = dict(counter)
        per_source[source].update(
            {f"category.{k}": v for k, v in Counter(r["category"] for r in rows if r["source"] == source).items()}
        )
    splits = {
        s: {"rows": sum(r["split"] == s for r in rows), "theorems": len({r["name"] for r in rows if r["split"] == s})}
        for s in SPLITS
    }
    return {
        "input_rows": sum(c["rows"] for c in items.per_source.values()),
        "distinct_programs": len(items.candidates),
        "duplicates": len(items.duplicates),
        "input_errors": len(items.errors),
        "category": dict(sorted(by_category.items())),
        "labelled": sum(r["label"] is not None for r in rows),
        "per_source": per_source,
        "splits": splits,
    }


def verify(
    config: DataConfig,
    items: CandidateSet,
    journal: Journal,
    *,
    backend: LeanBackend | None = None,
    progress: bool = True,
    on_item: Callable[[str, Outcome], None] | None = None,
) -> tuple[dict[str, tuple[Outcome, str | None]], int, str]:
    """Outcomes (and Lean versions) of every distinct candidate: from the journal when an earlier
    build finished them, from the Verifier otherwise (each journaled as it finishes).
    Returns (id -> (outcome, version), number verified now, backend name)."""
    header = config.header if config.header is not None else BENCHMARK_HEADER
    policy = config.lean.policy(header=header)
    done = journal.load(fresh=config.fresh)
    pending = [c for c in items.candidates if c.id not in done]
    tap = VersionTap(backend if backend is not None else config.lean.backend_instance())
    verifier = config.lean.verifier(tap, policy)
    requests = [
        VerifyRequest(program=c.program, name=c.name, statement=c.statement, header=c.header, id=c.id) for c in pending
    ]

    def version_of(request: VerifyRequest) -> str | None:
        if request.program in tap.versions:  # verbatim submission (collection profile)
            return tap.versions[request.program]
        prepared = verifier.prepare(request)  # composed submission (rl): look up what was sent
        return tap.versions.get(getattr(prepared, "program", ""))

    async def verify_all() -> None:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=len(requests),
            desc=f"verify [{tap.name}, {policy.name}]",
            unit="prog",
            disable=not progress or not requests,
        )

        def record(index: int, outcome: Outcome) -> None:
            request = requests[index]
            version = version_of(request)
            journal.append(request.id or "", outcome, version)
            done[request.id or ""] = (outcome, version)
            bar.update(1)
            if on_item is not None:
                on_item(request.id or "", outcome)

        async def run(batch: list[VerifyRequest]) -> None:
            chunk = max(256, 8 * config.lean.concurrency)  # bounded number of coroutines alive at once
            for start in range(0, len(batch), chunk):
                part = batch[start : start + chunk]
                await verifier.check(part, on_result=lambda i, o, p=part: record(index_of[id(p[i])], o))

        index_of = {id(r): i for i, r in enumerate(requests)}
        try:
            await run(requests)
            for _ in range(config.timeout_retries):  # a timed-out candidate gets another attempt
                again = [r for r in requests if done[r.id or ""][0].category is Category.TIMEOUT]
                if not again:
                    break
                bar.total += len(again)
                bar.refresh()
                await run(again)
        finally:
            bar.close()
            await tap.aclose()

    try:
        asyncio.run(verify_all())
    finally:
        journal.close()
    return done, len(requests), tap.name


def build(
    config: DataConfig,
    *,
    backend: LeanBackend | None = None,
    progress: bool = True,
    on_item: Callable[[str, Outcome], None] | None = None,
    quiet: bool = False,
    resolved: str | None = None,
) -> BuildResult:
    """Run the corpus build (resuming the journal of an unfinished one). ``backend`` overrides the
    configured one (tests); ``on_item(id, outcome)`` runs after each item is journaled; ``resolved``:
    the config as parsed (written to config.yaml; default: the dataclass dumped). The run's old
    manifest is removed before anything is written and the new one is written last
    (leanloop.tool's contract); ``python -m data.build`` also skips a run finished with this config."""
    import yaml

    check_config(config)
    run_dir = artifact_run_dir(STAGE, shard_run(config.run, Shard.parse(config.shard)))
    with run_lock(run_dir):
        start_run(
            run_dir, resolved or yaml.safe_dump(asdict(config), sort_keys=False, allow_unicode=True), clear_final=False
        )  # final/ is replaced atomically by write_corpus
        result, manifest = _build(config, run_dir, backend=backend, progress=progress, on_item=on_item)
        manifest.write(run_dir)
    if not quiet:
        print(summary(result))
    return result


def _build(
    config: DataConfig,
    run_dir: Path,
    *,
    backend: LeanBackend | None = None,
    progress: bool = True,
    on_item: Callable[[str, Outcome], None] | None = None,
) -> tuple[BuildResult, Manifest]:
    started = time.perf_counter()
    header = config.header if config.header is not None else BENCHMARK_HEADER
    loaded = load_candidates(config, header)
    items = select_shard(loaded, Shard.parse(config.shard))
    if not items.candidates:
        check_result(config, items, {}, part_of=loaded)
    journal = Journal(run_dir / JOURNAL, fingerprint(config, header))
    done, verified_now, backend_name = verify(
        config, items, journal, backend=backend, progress=progress, on_item=on_item
    )
    check_result(config, items, done, part_of=loaded)
    resumed = len(items.candidates) - verified_now

    trace_stats: Counter = Counter()
    rows = _rows(items, done, config, trace_stats)
    write_corpus(rows, run_dir / "final")
    counts = _counts(items, rows)
    outcomes = {k: v[0] for k, v in done.items()}
    reconciliation = reconcile(items, outcomes)
    seconds = time.perf_counter() - started
    result = BuildResult(run_dir, counts, reconciliation, verified_now, resumed, seconds, rows=len(rows))
    return result, manifest_for(config, items, rows, result, backend_name, reconciliation, trace_stats)


def manifest_for(
    config: DataConfig,
    items: CandidateSet,
    rows: list[dict[str, Any]],
    result: BuildResult,
    backend_name: str,
    reconciliation: dict[str, Any],
    trace_stats: Counter | None,
) -> Manifest:
    """The run's manifest (one builder for a one-process build and a merge of shards)."""
    header = config.header if config.header is not None else BENCHMARK_HEADER
    policy = config.lean.policy(header=header)
    versions = Counter(r["lean_version"] for r in rows if r["category"] not in ("input_error", "precheck_rejected"))
    seconds, verified_now = result.seconds, result.verified_now

    manifest = Manifest(stage=STAGE, run=config.run, counts=result.counts)
    for source in config.sources:
        manifest.add_input(f"source:{source.name}", resolve_shared(source.path))
    for path in config.statements:
        manifest.add_input(f"statements:{Path(path).name}", resolve_shared(path))
    manifest.metrics = {
        "seconds": round(seconds, 3),
        "verified_now": verified_now,
        "resumed": result.resumed,
        "programs_per_s": round(verified_now / seconds, 2) if seconds > 0 else None,
    }
    manifest.extra = {
        "config": asdict(config),
        "backend": {
            "kind": config.lean.backend.kind,
            "name": backend_name,
            "options": asdict(config.lean.backend.options),
        },
        "policy": {
            "profile": policy.name,
            "statement_rule": policy.profile.statement_rule,
            "heartbeats": policy.profile.heartbeats,
            "max_chars": policy.profile.max_chars,
            "header": header,
        },
        "lean_versions": {str(k): v for k, v in versions.most_common()},
        "reconciliation": reconciliation,
        "traces": dict(trace_stats)
        if config.traces and _trace_fn() is not None and trace_stats is not None
        else {"note": "leanloop.traces is not installed: no reference_trace column values"},
    }
    if config.shard:
        manifest.extra["shard"] = shard_record(config)
    return manifest


def summary(result: BuildResult) -> str:
    c = result.counts
    lines = [
        f"[data] {c['input_rows']} input rows -> {c['distinct_programs']} distinct programs, "
        f"{c['duplicates']} duplicates, {c['input_errors']} input errors",
        "[data] categories: " + ", ".join(f"{k} {v}" for k, v in c["category"].items()),
        "[data] splits (rows/theorems): "
        + ", ".join(f"{k} {v['rows']}/{v['theorems']}" for k, v in c["splits"].items()),
        f"[data] verified now {result.verified_now}, resumed from journal {result.resumed}, {result.seconds:.1f}s",
        format_reconciliation(result.reconciliation),
        f"[data] corpus -> {result.run_dir / 'final'}",
    ]
    return "\n".join(line for line in lines if line)


def parse_config(argv: list[str] | None = None) -> DataConfig:
    """The build's config from ``--config`` files and dotted overrides (programmatic callers)."""
    return parse_tool_config(DataConfig, argv, prog="python -m data.build", description=__doc__.splitlines()[0])[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m data.build --config configs/data/X.yaml [--run NAME] [--overwrite true]``"""
    config, resolved = parse_tool_config(
        DataConfig, argv, prog="python -m data.build", description=__doc__.splitlines()[0], overwrite=True
    )
    if not config.sources:
        print("data.build: the config names no sources (e.g. --config configs/data/default.yaml)", file=sys.stderr)
        return 2

    try:
        check_config(config)
    except BuildRefused as exc:
        print(f"data.build: {exc}", file=sys.stderr)
        return 2
    if config.overwrite:  # replacing a run replaces its journal too (it holds the old config's verdicts)
        config.fresh = True

    def work(config: DataConfig, run_dir: Path) -> tuple[Manifest, BuildResult]:
        result, manifest = _build(config, run_dir)
        return manifest, result

    # final/ is kept while the build runs: the journal resumes an unfinished build, write_corpus swaps final/
    try:
        run = shard_run(config.run, Shard.parse(config.shard))
    except ShardSpecError as exc:
        print(f"data.build: {exc}", file=sys.stderr)
        return 2
    try:
        outcome = run_parsed_tool(STAGE, config, resolved, work, run=run, overwrite=config.overwrite, clear_final=False)
    except JournalMismatch as exc:  # a user decision, not a crash: one line, and how to proceed
        print(f"data.build: {exc}", file=sys.stderr)
        return 2
    except BuildFailed as exc:
        print(f"data.build: {exc}", file=sys.stderr)
        return 1
    if outcome.value is not None:
        print(summary(outcome.value))
    return 0


if __name__ == "__main__":
    sys.exit(cli_entry(main, prog="python -m data.build"))
