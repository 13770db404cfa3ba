"""lean-check item ``timing``: seconds per program with ``fresh_process`` vs a shared REPL, the
sandbox's cost, pool throughput against the seed's Lean pool, and the header pickle's overhead."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

from bench.lean_check.reverify import read_candidates
from bench.lean_check.target import STANDIN_PROGRAM_VERSION, Failed, Skipped, Target
from leanloop.lean.local import LocalBackend, LocalBackendConfig
from leanloop.lean.recordings import resolve_source

# The seed's Lean pool (LLF, ../shared/seeds/000_8a041fc0978068ca.txt, Sec. 5.3 "Comparison with
# Lean"): "Our reference is the Lean pool that collected the benchmark: 64 parallel workers with
# environment reuse and incremental caching" ... "It handled 78,074 verification requests in
# 26.0 h, or 0.835 per second".
SEED_POOL_WORKERS = 64
SEED_POOL_PROGRAMS_PER_S = 0.835
SEED_POOL_QUOTE = (
    'LLF Sec. 5.3: "It handled 78,074 verification requests in 26.0 h, or 0.835 per second" '
    "(64 parallel workers with environment reuse)"
)
PICKLED_HEADER = "import Mathlib\nopen BigOperators\nopen Real\nopen Nat"
PICKLE_PATH = "test/H20231215.olean"


# -- item 5: timing -----------------------------------------------------------------------------


def _timing_programs(target: Target) -> list[str]:
    """Real: recorded-valid RL-Lean programs (import Mathlib); stand-ins: the recorded standalone
    programs and the pickled-header program the stand-in REPL answers."""
    count = target.config.timing_programs
    if target.real:
        rows = [r for r in read_candidates("rl_lean") if r.recorded == "valid"]
        random.Random(target.config.seed).shuffle(rows)
        return [r.program for r in rows[:count]]
    programs: list[str] = []
    for line in resolve_source("repl_io").open(encoding="utf-8"):
        row = json.loads(line)
        if not str(row.get("lean_toolchain", "")).endswith(STANDIN_PROGRAM_VERSION):
            continue
        for request, reply in zip(row["inputs"], row["outputs"]):
            if set(request) == {"cmd"} and "env" in reply and not request["cmd"].startswith("import"):
                if request["cmd"] not in programs:
                    programs.append(request["cmd"])
    return programs[:count]


async def _timed(
    backend: LocalBackend, programs: list[str], warmup: list[str], timeout: float
) -> tuple[float, list[Any]]:
    """Wall seconds for ``programs`` after ``warmup`` ran untimed on the same backend (the header
    elaborated or pickled once, as in a long run)."""
    try:
        await backend.run_many(warmup, timeout=timeout, concurrency=backend.config.workers)
        started = time.perf_counter()
        responses = await backend.run_many(programs, timeout=timeout, concurrency=backend.config.workers)
        return time.perf_counter() - started, responses
    finally:
        await backend.aclose()


def check_timing(target: Target) -> dict[str, Any]:
    programs = _timing_programs(target)
    if not programs:
        raise Skipped("no programs to time")
    timeout = target.config.lean.timeout
    pool = target.config.lean.concurrency
    one = dict(workers=1, all_tactics=False)
    shared_s, shared = asyncio.run(
        _timed(LocalBackend(target.local_config(fresh_process=False, **one)), programs, programs[:1], timeout)
    )
    fresh_s, fresh = asyncio.run(
        _timed(LocalBackend(target.local_config(fresh_process=True, **one)), programs, programs[:1], timeout)
    )
    # the same fresh processes unconfined (no sandbox, no resource limits): the sandbox's own cost
    from leanloop.lean.sandbox import SandboxConfig

    bare = SandboxConfig(kind="off", memory_limit_mb=None, cpu_limit_s=None)
    bare_s, _ = asyncio.run(
        _timed(
            LocalBackend(target.local_config(fresh_process=True, sandbox=bare, **one)), programs, programs[:1], timeout
        )
    )
    # the pool as the seed's (environment reuse: shared REPLs), 4 programs per worker after a warm-up round
    batch = [programs[i % len(programs)] for i in range(4 * pool)]
    pool_s, pooled = asyncio.run(
        _timed(
            LocalBackend(target.local_config(fresh_process=False, workers=pool, all_tactics=False)),
            batch,
            batch[:pool],
            timeout,
        )
    )
    # the header pickle: one program with a pickled header in fresh processes, first (builds) then unpickles
    if target.real:
        header_program = programs[0]
        pickles: dict[str, str] = {}
    else:
        header_program = PICKLED_HEADER + "\n" + _pickled_body()
        pickles = {PICKLED_HEADER: PICKLE_PATH}
    backend = LocalBackend(target.local_config(fresh_process=True, header_pickles=pickles, **one))

    async def twice() -> tuple[float, float, list[Any]]:
        try:
            t0 = time.perf_counter()
            first = await backend.run(header_program, timeout)
            t1 = time.perf_counter()
            second = await backend.run(header_program, timeout)
            t2 = time.perf_counter()
        finally:
            await backend.aclose()
        return t1 - t0, t2 - t1, [first, second]

    build_s, unpickle_s, header_responses = asyncio.run(twice())
    header_statuses = [response.status.value for response in header_responses]
    n = len(programs)
    per_shared, per_fresh = shared_s / n, fresh_s / n
    throughput = len(batch) / pool_s
    seed_per_worker = SEED_POOL_PROGRAMS_PER_S / SEED_POOL_WORKERS
    statuses = {
        mode: _status_counts(responses)
        for mode, responses in (("shared", shared), ("fresh_process", fresh), ("pool", pooled))
    }
    detail = {
        "programs": n,
        "where": "real Lean" if target.real else "stand-in REPL (process plumbing, not Lean's cost)",
        "seconds_per_program": {
            "shared_repl": per_shared,
            "fresh_process": per_fresh,
            "fresh_minus_shared (REPL start + header unpickle)": per_fresh - per_shared,
        },
        "isolation_cost_ratio": per_fresh / per_shared if per_shared else None,
        "pool": {
            "workers": pool,
            "programs": len(batch),
            "programs_per_s": throughput,
            "seed_programs_per_s": SEED_POOL_PROGRAMS_PER_S,
            "seed_workers": SEED_POOL_WORKERS,
            "ratio_to_seed": throughput / SEED_POOL_PROGRAMS_PER_S,
            "per_worker_ratio_to_seed": (throughput / pool) / seed_per_worker,
            "seed_quote": SEED_POOL_QUOTE,
        },
        "header": {
            "first_run_s (pickle built)": build_s,
            "second_run_s (unpickled)": unpickle_s,
            "build_over_unpickled_ratio": build_s / unpickle_s if unpickle_s else None,
            "statuses": header_statuses,
        },
        # every fresh_process reply came after the REPL answered the nonce probe (else candidate_failure)
        "channel_probe_answered": statuses_ok(fresh) + statuses_ok(header_responses),
        "sandbox": {
            "seconds_per_program_confined": per_fresh,
            "seconds_per_program_unconfined": bare_s / n,
            "sandbox_cost_ratio": per_fresh / (bare_s / n) if bare_s else None,
            "kind": LocalBackendConfig().sandbox.kind,
        },
        "statuses": statuses,
    }
    detail["summary"] = (
        f"fresh_process/shared = {detail['isolation_cost_ratio']:.2f}x "
        f"({per_fresh:.3f}s vs {per_shared:.3f}s per program); sandbox: "
        f"{per_fresh / (bare_s / n) if bare_s else float('nan'):.2f}x unconfined; pool x{pool}: {throughput:.2f} programs/s "
        f"= {detail['pool']['ratio_to_seed']:.2f}x the seed's 0.835/s at 64 workers, LLF Sec. 5.3 "
        f"({detail['pool']['per_worker_ratio_to_seed']:.2f}x per worker); header: pickle-building run "
        f"{build_s:.2f}s, unpickled run {unpickle_s:.2f}s" + ("" if target.real else " [stand-in timings]")
    )
    failures = [f"{mode}: {counts}" for mode, counts in statuses.items() if set(counts) - {"ok"}]
    if any(status != "ok" for status in header_statuses):
        failures.append(f"header runs: {header_statuses}")
    if failures:  # a time is only worth reporting for programs Lean answered
        raise Failed(detail["summary"] + "; not answered: " + "; ".join(failures), detail)
    return detail


def statuses_ok(responses: list[Any]) -> int:
    return sum(response.status.value == "ok" for response in responses)


def _status_counts(responses: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for response in responses:
        out[response.status.value] = out.get(response.status.value, 0) + 1
    return out


def _pickled_body() -> str:
    """The theorem the recorded v4.15.0 session runs after ``unpickleEnvFrom`` (Mathlib/test/H20231215_2)."""
    for line in resolve_source("repl_io").open(encoding="utf-8"):
        row = json.loads(line)
        if (
            row["inputs"]
            and row["inputs"][0] == {"unpickleEnvFrom": PICKLE_PATH}
            and str(row.get("lean_toolchain", "")).endswith(STANDIN_PROGRAM_VERSION)
        ):
            return row["inputs"][1]["cmd"]
    raise Skipped("no recorded session restoring the pickled header")
