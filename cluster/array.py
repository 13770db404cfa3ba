"""``python -m cluster.array --stage data --config X.yaml --array N --profile P.yaml [--run NAME] [--wait yes]``

A data-parallel stage (the corpus build, sampling, scoring) as N shards and one merge, on SLURM or
as local processes; ``--status true`` reports each shard.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal

from cluster.command import CommandError, StageCommand, StageRun, default_run_name, parse_cli_overrides
from cluster.profile import DEFAULT_PROFILE, ClusterProfile, ProfileError, load_profile
from leanloop.artifacts import MANIFEST, run_dir
from leanloop.sharding import SHARDS, Shard, all_shards, shard_dir
from leanloop.runnables import RENAMED_ARTIFACTS
from leanloop.tool import parse_stage_tool

ARRAY_RECORD = "array.json"


class ArrayError(RuntimeError):
    """An array that cannot be submitted, or whose shards or merge failed."""


def _count_lines(path: Path, skip: int = 0) -> int:
    if not path.is_file():
        return 0
    with open(path, "rb") as handle:
        return max(0, sum(1 for line in handle if line.strip()) - skip)


@dataclass(frozen=True)
class ArrayStage:
    """How one data-parallel stage is sharded and merged."""

    folder: str
    """``artifacts/<folder>/<run>/``."""
    module: str
    """The shard's entry point (``python -m <module> ... --shard I/N``)."""
    merge_module: str
    merge_args: Callable[[int], list[str]]
    rows_done: Callable[[Path], int]
    """Rows a shard folder has finished so far (its journal or shard file)."""
    rows_name: str = "rows"


STAGES: dict[str, ArrayStage] = {
    # the corpus build: one journal line per labelled program (after the fingerprint line)
    "data": ArrayStage(
        "data",
        "data.build",
        "data.merge",
        lambda count: ["--count", str(count)],
        lambda folder: _count_lines(folder / "journal.jsonl", skip=1),
        "programs",
    ),
    # the sampler: one row per attempt in the shard's journal (leanloop.prover.shards)
    "sft_sample": ArrayStage(
        "sft_sample",
        "sft.sample",
        "sft.sample",
        lambda count: ["--merge_shards", str(count)],
        lambda folder: _count_lines(folder / "journal.jsonl"),
        "attempts",
    ),
    # scoring with a trained classifier: one score row per program
    "classifiers_score": ArrayStage(
        "classifiers_score",
        "classifiers.score",
        "classifiers.score",
        lambda count: ["--merge_shards", str(count)],
        lambda folder: sum(_count_lines(path) for path in (folder / "final").glob("*.jsonl")),
        "programs",
    ),
}


def array_stage(stage: str) -> ArrayStage:
    if stage in RENAMED_ARTIFACTS:
        raise ArrayError(
            f"stage {stage!r} was renamed {RENAMED_ARTIFACTS[stage]!r}; use --stage "
            f"{RENAMED_ARTIFACTS[stage]} (RUN={RENAMED_ARTIFACTS[stage]}/NAME)"
        )
    if stage not in STAGES:
        raise ArrayError(f"stage {stage!r} does not run as a job array; choose one of {', '.join(STAGES)}")
    return STAGES[stage]


@dataclass
class ArraySubmission:
    """What :func:`submit_array` sent: the shard jobs (one array), the merge job, the parent run."""

    run: StageRun
    count: int
    shards: dict[int, Any]
    merge: Any | None
    executor: str
    log_dir: Path

    def wait(self) -> dict[str, Any]:
        """Block until the merge has ended; the parent run's manifest, or an :class:`ArrayError`
        naming each failed shard (its error line and log) and the merge's refusal."""
        from cluster.submit import failure_line

        errors = []
        for index, job in sorted(self.shards.items()):
            try:
                job.result()
            except Exception as error:  # submitit's FailedJobError / UncompletedJobError
                errors.append(
                    f"shard {index}/{self.count} (job {job.job_id}): "
                    f"{failure_line(error, job.paths.stderr)}; log: {job.paths.stderr}"
                )
        if self.merge is None:
            raise ArrayError("\n  ".join([f"{self.run.run}: shards failed, nothing merged:", *errors]))
        try:
            self.merge.result()
        except Exception as error:
            errors.append(f"merge (job {self.merge.job_id}): {failure_line(error, self.merge.paths.stderr)}")
        if errors:
            raise ArrayError(
                "\n  ".join(
                    [
                        f"{self.run.stage} run {self.run.run} is not merged:",
                        *errors,
                        "resubmit the same command: only unfinished shards run again",
                    ]
                )
            )
        return json.loads((self.run.run_dir / MANIFEST).read_text())


def shard_argv(run: StageRun, shard: Shard) -> list[str]:
    return run.argv() + ["--shard", str(shard)]


def shard_command(run: StageRun, spec: ArrayStage, shard: Shard, profile: ClusterProfile) -> StageCommand:
    return StageCommand(argv=shard_argv(run, shard), run_dir=str(shard_dir(run.run_dir, shard)), env=dict(profile.env))


def merge_command(run: StageRun, spec: ArrayStage, count: int, profile: ClusterProfile) -> StageCommand:
    merge_run = replace(run, entry=spec.merge_module)
    return StageCommand(argv=merge_run.argv() + spec.merge_args(count), run_dir=str(run.run_dir), env=dict(profile.env))


def unfinished(run: StageRun, count: int) -> list[Shard]:
    """Shards of ``run`` without a manifest: the ones an array (re)submission runs."""
    return [shard for shard in all_shards(count) if not (shard_dir(run.run_dir, shard) / MANIFEST).is_file()]


def _array_profile(profile: ClusterProfile) -> ClusterProfile:
    """The profile per array task: one task (the shard uses its CPUs/GPUs itself) that SLURM
    requeues on preemption or node failure."""
    extra = {"requeue": True, **profile.slurm_additional}
    return replace(profile, distributed=False, array=0, slurm_additional=extra)


def _merge_profile(profile: ClusterProfile, depends_on: str | None) -> ClusterProfile:
    """The merge: no GPU, after every array task has ended (success or not: it refuses clearly)."""
    extra = {k: v for k, v in profile.slurm_additional.items() if k != "requeue"}
    if depends_on:
        extra["dependency"] = f"afterany:{depends_on}"
        extra["kill-on-invalid-dep"] = "yes"
    return replace(profile, distributed=False, array=0, gpus_per_node=0, slurm_additional=extra)


def submit_array(run: StageRun, count: int, profile: ClusterProfile) -> ArraySubmission:
    """Submit the unfinished shards of ``run`` as one job array and a merge job after it."""
    from cluster.submit import make_executor

    if count < 1:
        raise ArrayError(f"ARRAY must be at least 1 shard, got {count}")
    spec = array_stage(run.stage)
    profile.validate()
    log_dir = run.run_dir / "slurm"
    log_dir.mkdir(parents=True, exist_ok=True)
    todo = unfinished(run, count)
    executor = make_executor(_array_profile(profile), log_dir, name=f"{run.stage}-{run.run}-shard")
    shards: dict[int, Any] = {}
    if todo:
        commands = [shard_command(run, spec, shard, profile) for shard in todo]
        with executor.batch():  # one SLURM job array; locally one process per shard
            jobs = [executor.submit(command) for command in commands]
        shards = {shard.index: job for shard, job in zip(todo, jobs)}
    cluster = executor.cluster
    depends_on = None
    if cluster == "slurm" and shards:
        depends_on = str(next(iter(shards.values())).job_id).split("_")[0]
    elif shards:
        for job in shards.values():  # no dependencies locally: the merge starts once the shards ended
            job.wait()
    merger = make_executor(_merge_profile(profile, depends_on), log_dir, name=f"{run.stage}-{run.run}-merge")
    merge = merger.submit(merge_command(run, spec, count, profile))
    _record(run, count, cluster, shards, merge, log_dir, spec)
    return ArraySubmission(run=run, count=count, shards=shards, merge=merge, executor=cluster, log_dir=log_dir)


def _record(
    run: StageRun, count: int, cluster: str, shards: dict[int, Any], merge: Any, log_dir: Path, spec: ArrayStage
) -> None:
    """``<run>/array.json``: the jobs of the newest submission, read by ``--status``."""
    path = run.run_dir / ARRAY_RECORD
    previous = json.loads(path.read_text()) if path.is_file() else {}
    jobs = previous.get("jobs", {}) if previous.get("count") == count else {}
    jobs.update({str(index): str(job.job_id) for index, job in shards.items()})
    path.write_text(
        json.dumps(
            {
                "stage": run.stage,
                "run": run.run,
                "count": count,
                "executor": cluster,
                "logs": str(log_dir),
                "jobs": jobs,
                "merge_job": str(merge.job_id),
                "submitted": time.time(),
                "shard_argv": shard_argv(run, Shard(0, count)),
                "merge_module": spec.merge_module,
            },
            indent=2,
        )
        + "\n"
    )


# -- progress ------------------------------------------------------------------------------------
def _job_state(executor: str, log_dir: Path, job_id: str) -> str:
    """SLURM's (or submitit's) word for a job: PENDING, RUNNING, COMPLETED, FAILED, ..."""
    import pickle

    result = log_dir / f"{job_id}_0_result.pkl"
    if result.is_file():
        try:
            outcome = pickle.loads(result.read_bytes())[0]
        except Exception:  # a result being written: not an ending yet
            return "RUNNING"
        return "COMPLETED" if outcome == "success" else "FAILED"
    if executor == "slurm":
        import subprocess

        try:
            out = subprocess.run(
                ["squeue", "--states=all", "--array", "-h", "-o", "%T", f"--jobs={job_id}"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.split()
        except (OSError, subprocess.SubprocessError):
            out = []
        return out[0] if out else "UNKNOWN"
    return "RUNNING"


def shard_states(stage: str, parent: Path) -> dict[str, Any]:
    """Per shard: state and rows done; totals and the array's rows per second."""
    spec = array_stage(stage)
    record_path = parent / ARRAY_RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    count = record.get("count")
    if not count:
        found = sorted((parent / SHARDS).glob("*-of-*"))
        if not found:
            raise ArrayError(f"{parent} has no shards (no {SHARDS}/<I>-of-<N>/ folders and no {ARRAY_RECORD})")
        count = int(found[-1].name.split("-of-")[1])
    executor, log_dir = record.get("executor", "local"), Path(record.get("logs", parent / "slurm"))
    rows: list[dict[str, Any]] = []
    starts, ends = [], []
    for shard in all_shards(count):
        folder = shard_dir(parent, shard)
        job = record.get("jobs", {}).get(str(shard.index))
        done = spec.rows_done(folder)
        if (folder / MANIFEST).is_file():
            state = "done"
            ends.append((folder / MANIFEST).stat().st_mtime)
        elif job is None:
            state = "not submitted" if not folder.is_dir() else "stopped"
        else:
            word = _job_state(executor, log_dir, job)
            state = {
                "PENDING": "pending",
                "RUNNING": "running",
                "COMPLETING": "running",
                "CONFIGURING": "running",
                "REQUEUED": "pending",
            }.get(word, "failed" if word != "UNKNOWN" else "unknown")
            if word == "COMPLETED":  # ended without a manifest: the stage did not finish it
                state = "failed"
        if (folder / "config.yaml").is_file():
            starts.append((folder / "config.yaml").stat().st_mtime)
        rows.append({"shard": str(shard), "state": state, spec.rows_name: done, "job": job})
    total = sum(row[spec.rows_name] for row in rows)
    running = any(row["state"] in ("running", "pending") for row in rows)
    end = time.time() if running or not ends else max(ends)
    elapsed = end - min(starts) if starts else 0.0
    summary = {
        state: sum(row["state"] == state for row in rows)
        for state in ("done", "running", "pending", "failed", "stopped", "not submitted", "unknown")
    }
    return {
        "stage": stage,
        "run": parent.name,
        "count": count,
        "shards": rows,
        "summary": {k: v for k, v in summary.items() if v},
        spec.rows_name: total,
        "rows_per_s": round(total / elapsed, 2) if elapsed > 0 else None,
        "merged": (parent / MANIFEST).is_file(),
        "merge_job": record.get("merge_job"),
    }


def format_status(status: dict[str, Any]) -> str:
    spec = array_stage(status["stage"])
    lines = [
        f"{status['stage']}/{status['run']}: {status['count']} shards, "
        + ", ".join(f"{v} {k}" for k, v in status["summary"].items())
        + f"; {status[spec.rows_name]} {spec.rows_name}, "
        + (f"{status['rows_per_s']} {spec.rows_name}/s" if status["rows_per_s"] else "no rate yet")
        + ("; merged" if status["merged"] else "; not merged")
    ]
    for row in status["shards"]:
        lines.append(
            f"  shard {row['shard']:>7}  {row['state']:<13} {row[spec.rows_name]:>9} {spec.rows_name}"
            + (f"  job {row['job']}" if row["job"] else "")
        )
    return "\n".join(lines)


def parse_run_ref(ref: str, stage: str | None) -> tuple[str, Path]:
    """``data/NAME``, ``artifacts/data/NAME`` or ``NAME`` with ``--stage`` -> (stage, run folder)."""
    parts = [part for part in Path(ref).parts if part not in (".", "artifacts")]
    if stage is None and len(parts) >= 2 and parts[-2] in STAGES:
        stage = parts[-2]
    if stage is None:
        raise ArrayError(f"RUN={ref}: name the stage too, e.g. RUN=data/{parts[-1] if parts else 'default'}")
    return stage, run_dir(array_stage(stage).folder, parts[-1])


@dataclass
class ArrayConfig:
    """The options of ``python -m cluster.array`` itself (the others are the stage's)."""

    stage: str | None = None
    """The stage to shard: data, sft_sample or classifiers_score."""
    run: str | None = None
    """Run name (default: the config stems joined by '+'); with ``--status true``: data/NAME."""
    array: int | None = None
    """Number of shards."""
    profile: str = str(DEFAULT_PROFILE)
    """Cluster profile YAML (configs/cluster/local.yaml: local processes)."""
    wait: Literal["yes", "no", "auto"] = "auto"
    """Block until the merge ends (auto: yes for local jobs, no on SLURM)."""
    status: bool = False
    """Show the shards of ``--run`` instead of submitting."""


def main(argv: list[str] | None = None) -> int:
    args, configs, stage_args = parse_stage_tool(
        ArrayConfig,
        argv,
        "python -m cluster.array",
        "a data-parallel stage as one job array of shards plus a merge job; every option that is not "
        "listed here (the stage's --config files included) goes to the stage",
    )
    try:
        if args.status:
            if not args.run:
                raise ArrayError("--status needs the run: RUN=data/NAME")
            stage, parent = parse_run_ref(args.run, args.stage)
            print(format_status(shard_states(stage, parent)))
            return 0
        if not args.stage or not configs or args.array is None:
            raise ArrayError("name --stage, --config and --array N (make data ARRAY=N [CONFIG=...] [PROFILE=...])")
        spec = array_stage(args.stage)
        profile = load_profile(args.profile)
        run = StageRun(
            stage=spec.folder,
            configs=configs,
            run=args.run or default_run_name(configs),
            overrides=parse_cli_overrides(stage_args),
            entry=spec.module,
        )
        submission = submit_array(run, args.array, profile)
    except (ArrayError, CommandError, ProfileError) as error:
        print(f"array: {error}", file=sys.stderr)
        return 2
    ran = ", ".join(str(index) for index in sorted(submission.shards)) or "none (all finished)"
    print(
        f"submitted {run.stage}/{run.run} as {args.array} shards to {submission.executor}: shards {ran}; "
        f"merge job {submission.merge.job_id}",
        flush=True,
    )
    print(f"  logs: {submission.log_dir}/   progress: make status RUN={run.stage}/{run.run}", flush=True)
    wait = args.wait == "yes" or (args.wait == "auto" and submission.executor != "slurm")
    if not wait:
        return 0
    try:
        submission.wait()
    except ArrayError as error:
        print(str(error), file=sys.stderr)
        return 1
    print(f"merged: {run.run_dir}")
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m cluster.array"))
