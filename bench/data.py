"""``python -m bench.data`` (``make bench-data``): acceptance-policy and corpus-build throughput.

Measured in one run on the shipped real candidates (RL-Lean + Kimina-Prover, 2,421 programs):

- prechecks per second on ONE core (CPU time of this thread, so other load on the machine does not
  distort it), for the masker alone and for both policy profiles; target >= 5,000 programs/s, so
  that the policy stays a rounding error beside Lean (the seed's pool checks ~0.8 programs/s on 64
  workers);
- corpus-build throughput of ``configs/data/default.yaml`` through the replay backend (fresh, then
  resumed from its journal), into a temporary artifacts folder.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from leanloop.jsonl import read_jsonl
from leanloop.paths import REPO_ROOT, shared_data_dir
from leanloop.tool import cli_entry, parse_config

PRECHECK_TARGET = 5_000.0  # programs/s on one core
SEED_LEAN_RATE = 0.8  # programs/s, the seed's 64-worker pool


@dataclass
class BenchConfig:
    smoke: bool = False
    """200 programs, 0.05 s per rate, the debug corpus config: checks the bench runs (seconds)."""


def shipped_programs(shared: Path) -> list[tuple[str, str]]:
    """(name, program) of every shipped candidate."""
    programs = []
    programs += [
        (r["name"], r["code"])
        for r in read_jsonl(shared / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz")
    ]
    for file, key in (
        ("kimina_prover_preview_minif2f_test_solved.jsonl", "correct_proof"),
        ("kimina_prover_72b_minif2f_test_solved_0710_additional.jsonl", "lean_file"),
    ):
        programs += [(r["name"], r[key]) for r in read_jsonl(shared / "candidates" / file)]
    return programs


def per_second(fn, items: list, min_cpu_s: float = 1.5) -> tuple[float, int]:
    """Items per CPU-second of this thread, repeating passes until ``min_cpu_s`` of CPU time."""
    passes, spent = 0, 0.0
    while spent < min_cpu_s:
        start = time.thread_time()
        for item in items:
            fn(item)
        spent += time.thread_time() - start
        passes += 1
    return passes * len(items) / spent, passes


def bench_prechecks(programs: list[tuple[str, str]], min_cpu_s: float = 1.5) -> dict[str, float]:
    from leanloop.lean.acceptance import AcceptancePolicy, mask

    rates = {"mask": per_second(lambda p: mask(p[1]), programs, min_cpu_s)[0]}
    for profile in ("collection", "rl"):
        policy = AcceptancePolicy(profile)
        rates[profile] = per_second(lambda p: policy.precheck(p[1], name=p[0]), programs, min_cpu_s)[0]
    return rates


def bench_build(config_name: str = "default") -> dict[str, float]:
    from data.build import build, parse_config as parse_build_config

    previous = os.environ.get("LEANLOOP_ARTIFACTS")
    with tempfile.TemporaryDirectory() as root:
        os.environ["LEANLOOP_ARTIFACTS"] = root
        try:
            config = parse_build_config(
                ["--config", str(REPO_ROOT / f"configs/data/{config_name}.yaml"), "--run", "bench"]
            )
            fresh = build(config, progress=False, quiet=True)
            resumed = build(config, progress=False, quiet=True)
        finally:  # the caller's artifacts folder again (the bench also runs inside the test suite)
            if previous is None:
                os.environ.pop("LEANLOOP_ARTIFACTS", None)
            else:
                os.environ["LEANLOOP_ARTIFACTS"] = previous
    rows = fresh.counts["input_rows"]
    return {
        "input_rows": rows,
        "distinct": fresh.counts["distinct_programs"],
        "fresh_s": fresh.seconds,
        "resumed_s": resumed.seconds,
        "resumed_verified": resumed.verified_now,
    }


def main(argv: list[str] | None = None) -> dict:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.data", description=__doc__.splitlines()[0])
    shared = shared_data_dir()
    programs = shipped_programs(shared)
    if config.smoke:
        programs = programs[:200]
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    mean_chars = sum(len(p) for _, p in programs) / len(programs)
    print(
        f"[bench-data] machine: {cores} cores ({usable} usable); {len(programs)} shipped programs, "
        f"mean {mean_chars:,.0f} characters"
    )
    rates = bench_prechecks(programs, 0.05 if config.smoke else 1.5)
    for name, rate in rates.items():
        line = f"[bench-data] {name:<10} {rate:>9,.0f} programs/s on one core ({1e6 / rate:6.1f} µs/program)"
        if name != "mask":
            line += f"  -> {rate / PRECHECK_TARGET:.2f}x the {PRECHECK_TARGET:,.0f}/s target"
            line += f"; policy time per Lean check: {SEED_LEAN_RATE / rate:.1e} of the seed pool's"
        print(line)
    build = bench_build("debug" if config.smoke else "default")
    print(
        f"[bench-data] corpus build ({'debug' if config.smoke else 'default'} config, replay backend, {usable} usable cores): "
        f"{build['input_rows']} rows / {build['distinct']} distinct programs in {build['fresh_s']:.2f}s "
        f"= {build['input_rows'] / build['fresh_s']:,.0f} rows/s end to end (load, precheck, replay, "
        f"traces, parquet, manifest)"
    )
    print(
        f"[bench-data] resumed rebuild from the journal: {build['resumed_s']:.2f}s, "
        f"{build['resumed_verified']} programs re-verified "
        f"({build['fresh_s'] / build['resumed_s']:.1f}x faster than fresh)"
    )
    return {
        "programs": len(programs),
        "precheck_per_s": rates,
        "build": build,
        "precheck_target_ratio": {k: v / PRECHECK_TARGET for k, v in rates.items() if k != "mask"},
        "resumed_speedup": build["fresh_s"] / build["resumed_s"],
    }


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.data"))
