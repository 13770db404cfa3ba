"""``python -m cluster.submit --stage <stage> --config configs/<stage>/X.yaml [--run NAME] [--a.b value]``

Sends one stage run to SLURM through submitit (``make submit STAGE=... CONFIG=...``), as the same
``python -m <stage>.train`` command a run started by hand is; a local process without ``srun``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cluster.command import CommandError, StageCommand, StageRun, default_run_name, parse_cli_overrides
from cluster.profile import DEFAULT_PROFILE, ClusterProfile, ProfileError, load_profile

SLURM_FOLDER = "slurm"
# a local job is a child of this process: waiting keeps its result and its errors visible
WAIT_BY_DEFAULT = {"local": True, "debug": True, "slurm": False}


class SubmitError(RuntimeError):
    """A submission that cannot go ahead (conflicting options, unknown executor...)."""


# states of a job SLURM ended from outside (no result will come): what each means to the user
KILLED = {
    "CANCELLED": "was cancelled",
    "TIMEOUT": "was killed at its time limit",
    "OUT_OF_MEMORY": "was killed for running out of memory",
    "PREEMPTED": "was preempted",
    "NODE_FAIL": "lost its node",
    "BOOT_FAIL": "could not boot its node",
    "DEADLINE": "missed its deadline",
}


@dataclass
class Submission:
    """What ``submit`` sent: the submitit jobs (one, or one per array shard) and where logs go."""

    run: StageRun
    jobs: list[Any]
    executor: str
    log_dir: Path
    profile: ClusterProfile | None = None

    @property
    def job_ids(self) -> list[str]:
        return [str(job.job_id) for job in self.jobs]

    def wait(self) -> dict[str, Any]:
        """Block until every job ends; the run's manifest, or a failure naming each job's error
        (the exception, or how SLURM ended it) and its log files."""
        manifest: dict[str, Any] = {}
        errors = []
        for job in self.jobs:
            job.wait()
            killed = self.killed(job)
            if killed:
                errors.append(f"job {job.job_id} {killed}; logs: {job.paths.stdout} and {job.paths.stderr}")
                continue
            try:
                # one result per SLURM task (a rank of a multi-task job); rank zero's holds the manifest
                manifest = next((result for result in job.results() if result), manifest)
            except RuntimeError as error:  # submitit's FailedJobError / UncompletedJobError
                if SUBMITIT_TIMED_OUT in str(error):
                    errors.append(
                        f"job {job.job_id} {self.ended_as('TIMEOUT')} (submitit stopped it on SLURM's "
                        f"warning signal); logs: {job.paths.stdout} and {job.paths.stderr}"
                    )
                    continue
                if killed_by_warning_signal(job.paths.stderr):
                    # the warning came while the task was still starting (imports on a busy node), before
                    # submitit had installed its handler, so the signal's default action ended the task
                    errors.append(
                        f"job {job.job_id} {self.ended_as('TIMEOUT')} (submitit stopped short: SLURM's "
                        "warning signal came before submitit's handler was installed); logs: "
                        f"{job.paths.stdout} and {job.paths.stderr}"
                    )
                    continue
                errors.append(
                    f"job {job.job_id}: {failure_line(error, job.paths.stderr)}; full log: "
                    f"{job.paths.stderr} (output: {job.paths.stdout})"
                )
        if errors:
            raise SubmitError(f"{self.run.stage} run {self.run.run} failed:\n  " + "\n  ".join(errors))
        return manifest

    def killed(self, job: Any) -> str | None:
        """How SLURM ended a job that left no result (None when it ran to its end). Asked before
        ``result()``, which would wait for a result file that cannot come."""
        if self.executor != "slurm" or job.paths.result_pickle.exists():
            return None
        state = (job.state or "").split(" ")[0].upper()  # sacct writes "CANCELLED by <uid>"
        return self.ended_as(state) if state in KILLED else None

    def ended_as(self, state: str) -> str:
        what = KILLED[state]
        if state == "TIMEOUT" and self.profile is not None:
            what += f" ({self.profile.time_min} min; raise the profile's time_min)"
        return f"{what} ({state})"


# submitit asks SLURM for a signal 90 s before the time limit and, in the job, ends a function that
# cannot checkpoint itself with this error (the job then ends FAILED, not TIMEOUT)
SUBMITIT_TIMED_OUT = "timed-out and not checkpointable"
# srun's line when a task dies of SIGUSR2, the signal submitit asks SLURM to send before the time limit
WARNING_SIGNAL_DEATH = "User defined signal 2"


def killed_by_warning_signal(stderr: Path) -> bool:
    """Whether srun reports the task ended by the time-limit warning signal itself."""
    try:
        return WARNING_SIGNAL_DEATH in stderr.read_text(errors="replace")
    except OSError:
        return False


TRACEBACK = "Traceback (most recent call last):"
# torch.distributed prefixes each line of a rank's traceback with "[rank0]: "
RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")


def failure_line(error: BaseException, log: Path | None = None) -> str:
    """The line that says what went wrong. submitit's message ends with log paths; the job's own
    error log holds the stage's traceback before the job wrapper's. First choice: the exception of
    the first traceback in the log, then the one in submitit's message, then its first line."""
    texts = []
    if log is not None and Path(log).is_file():
        texts.append(Path(log).read_text(errors="replace"))
    texts.append(str(error))
    for text in texts:
        lines = [RANK_PREFIX.sub("", line) for line in text.splitlines()]
        for index, line in enumerate(lines):
            if line.strip() != TRACEBACK:
                continue
            indent = len(line) - len(line.lstrip())
            # frames are indented below "Traceback"; the exception line is back at its indentation
            for later in lines[index + 1 :]:
                if later.strip() and len(later) - len(later.lstrip()) <= indent:
                    if "exited with status 2;" in later:
                        # a user's mistake: the stage printed one line (leanloop.tool.cli_entry), the
                        # last before the job wrapper's traceback
                        said = [
                            x.strip()
                            for x in lines[:index]
                            if x.strip() and not x.startswith(("submitit ", "running:"))
                        ]
                        if said:
                            return said[-1]
                    return later.strip()
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return first or type(error).__name__


def distributed_overrides(run: StageRun, profile: ClusterProfile) -> dict[str, Any]:
    """Trainer options matching the allocation; a conflicting user override is an error."""
    wanted = profile.trainer_overrides()
    for key, value in wanted.items():
        if key in run.overrides and str(run.overrides[key]) != str(value):
            raise SubmitError(
                f"--{key} {run.overrides[key]} contradicts the profile ({profile.nodes} node(s) x "
                f"{profile.gpus_per_node} GPU(s) -> {key}={value}); change the profile instead"
            )
    return wanted


def check_memory(run: StageRun, profile: ClusterProfile, force: bool = False) -> str | None:
    """The memory plan of a training run on the profile's GPUs (its world size from the allocation):
    its verdict line, or SubmitError (one line with the number) when it needs more than
    ``gpu_memory_gb`` per GPU and ``force`` is off. None for CPU jobs and stages that train nothing."""
    from leanloop.plan import STAGE_MODULES, TRAINING_STAGES, PlanError, plan_args

    stage = next((s for s, module in STAGE_MODULES.items() if module == run.module), run.stage)
    if not profile.gpus_per_node or stage not in TRAINING_STAGES:
        return None
    args = run.argv(distributed_overrides(run, profile))[3:]  # after python -m <module>
    try:
        plan = plan_args(args, stage, profile.gpu_memory_gb)
    except PlanError as error:
        return f"memory plan: {error}"
    except SystemExit as exit_:  # the stage refused the config (its parser said why): the job would too
        raise SubmitError(
            f"{run.stage}/{run.run}: python -m {run.module} refuses this config "
            f"({exit_.code if isinstance(exit_.code, str) else 'see the line above'})"
        ) from None
    except Exception as error:  # noqa: BLE001 - a planner bug is reported, it does not block the job
        return f"memory plan: not made ({type(error).__name__}: {error})"
    if not plan.fits and not force:
        raise SubmitError(
            f"{run.stage}/{run.run} needs {plan.peak_gb:.1f} GB per GPU ({plan.peak_phase}), "
            f"more than the profile's gpu_memory_gb {profile.gpu_memory_gb:g}: see python -m leanloop.plan "
            f"{' '.join(f'--config {c}' for c in run.configs)}, or pass --force true"
        )
    return plan.verdict()


def make_executor(profile: ClusterProfile, folder: Path, name: str, cpu_processes: int = 1):
    import submitit

    cluster = None if profile.executor == "auto" else profile.executor
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    params = profile.submitit_parameters(name, cpu_processes)
    if executor.cluster != "slurm":
        # the local executor starts N copies when tasks_per_node > 1 but gives them submitit's
        # variables, not the ones Lightning reads; locally Lightning launches its own ranks
        params["tasks_per_node"] = 1
    executor.update_parameters(**params)
    return executor


def sbatch_preview(run: StageRun, profile: ClusterProfile) -> str | None:
    """The batch script SLURM would get for this run (None when the job would run locally)."""
    executor = make_executor(
        profile, run.run_dir / SLURM_FOLDER, name=f"{run.stage}-{run.run}", cpu_processes=run.cpu_processes()
    )
    if executor.cluster != "slurm":
        return None
    # submitit renders the script only inside submit(); this is the same renderer, without sbatch
    return executor._executor._make_submission_file_text(
        f"{sys.executable} -u -m submitit.core._submit {executor.folder}", "<job id>"
    )


def _command(run: StageRun, profile: ClusterProfile) -> StageCommand:
    extra = distributed_overrides(run, profile)
    return StageCommand(
        argv=run.argv(extra), run_dir=str(run.run_dir), env=dict(profile.env), shard_count=profile.array
    )


def _record(
    run: StageRun, command: StageCommand, executor: str, jobs: list[Any], profile: ClusterProfile, log_dir: Path
) -> None:
    """The exact command in the run's slurm/ folder, for people reading it later and reruns by hand."""
    folder = run.run_dir / SLURM_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "command.json").write_text(
        json.dumps(
            {
                "argv": command.argv,
                "executor": executor,
                "job_ids": [str(j.job_id) for j in jobs],
                "logs": str(log_dir),
                "profile": profile.__dict__,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )


def submit(run: StageRun, profile: ClusterProfile | None = None, force: bool = False) -> Submission:
    """Submit one stage run; returns at once (call ``.wait()`` for the result). A GPU run whose memory
    plan exceeds the profile's ``gpu_memory_gb`` is refused unless ``force``."""
    profile = profile or load_profile(DEFAULT_PROFILE)
    profile.validate()
    verdict = check_memory(run, profile, force)
    if verdict:
        print(verdict, flush=True)
    command = _command(run, profile)
    folder = run.run_dir / SLURM_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    executor = make_executor(profile, folder, name=f"{run.stage}-{run.run}", cpu_processes=run.cpu_processes())
    if profile.array:
        jobs = executor.map_array(command, list(range(profile.array)))
    else:
        jobs = [executor.submit(command)]
    _record(run, command, executor.cluster, jobs, profile, folder)
    return Submission(run=run, jobs=jobs, executor=executor.cluster, log_dir=folder, profile=profile)


def submit_array(
    runs: list[StageRun], profile: ClusterProfile, log_dir: Path, name: str, force: bool = False
) -> list[Submission] | None:
    """Several runs of one stage as one SLURM job array, one array task per run (a sweep); logs in
    ``log_dir``. None when the profile does not submit to SLURM or the runs need different
    allocations: then submit them one by one."""
    profile.validate()
    processes = {run.cpu_processes() for run in runs}
    if profile.array or len(processes) != 1:
        return None
    executor = make_executor(profile, log_dir, name=name, cpu_processes=processes.pop())
    if executor.cluster != "slurm":
        return None
    refused = []
    for run in runs:
        try:
            verdict = check_memory(run, profile, force)
        except SubmitError as error:  # every run that does not fit is named, not only the first
            refused.append(str(error))
            continue
        if verdict:
            print(f"  {run.run}: {verdict}", flush=True)
    if refused:
        raise SubmitError("; ".join(refused))
    commands = [_command(run, profile) for run in runs]
    log_dir.mkdir(parents=True, exist_ok=True)
    with executor.batch():
        jobs = [executor.submit(command) for command in commands]
    submissions = []
    for run, command, job in zip(runs, commands, jobs):
        _record(run, command, executor.cluster, [job], profile, log_dir)
        submissions.append(Submission(run=run, jobs=[job], executor=executor.cluster, log_dir=log_dir, profile=profile))
    return submissions


@dataclass
class SubmitConfig:
    """``python -m cluster.submit`` options. Every ``--config`` is the stage's (repeat to layer, e.g. add
    configs/strategy/zero2.yaml); ``--profile.<field> VALUE`` changes one profile field; any other
    option is a dotted override passed to the stage (``--model.optim.lr 1e-4 --trainer.max_steps 100``)."""

    stage: str
    """Stage folder: pretrain, classifiers, sft, ..."""
    run: str | None = None
    """Run name (default: the config stems joined by '+', like the stage)."""
    entry: str | None = None
    """Module to run instead of <stage>.train."""
    profile: str = str(DEFAULT_PROFILE)
    """Cluster profile YAML."""
    wait: Literal["yes", "no", "auto"] = "auto"
    """Block until the job ends (auto: yes for local jobs, no on SLURM)."""
    dry_run: bool = False
    """Print the command and resources only."""
    force: bool = False
    """Submit a GPU run whose memory plan needs more than the profile's gpu_memory_gb per GPU."""


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_stage_tool

    args, configs, stage_args = parse_stage_tool(
        SubmitConfig,
        argv,
        prog="python -m cluster.submit",
        description="send one stage run to SLURM (or run it locally)",
    )
    if not configs:
        print("submit: no --config: name the stage's config file(s)", file=sys.stderr)
        return 2
    try:
        overrides = parse_cli_overrides(stage_args)
        # --profile.<field> VALUE changes one profile field (load_profile types it), not the stage
        profile_changes = {
            key.removeprefix("profile."): overrides.pop(key) for key in list(overrides) if key.startswith("profile.")
        }
        profile = load_profile(args.profile, **profile_changes)
        run = StageRun(
            stage=args.stage,
            configs=configs,
            run=args.run or default_run_name(configs),
            overrides=overrides,
            entry=args.entry,
        )
        if args.dry_run:
            verdict = check_memory(run, profile, args.force)
            if verdict:
                print(verdict)
            print(run.shell(distributed_overrides(run, profile)))
            script = sbatch_preview(run, profile)
            print(script if script else "(no srun here: the job would run as a local process)")
            return 0
        submission = submit(run, profile, force=args.force)
    except (CommandError, ProfileError, SubmitError) as error:
        print(f"submit: {error}", file=sys.stderr)
        return 2
    print(f"submitted {run.stage}/{run.run} to {submission.executor}: job {', '.join(submission.job_ids)}")
    print(f"  logs: {submission.log_dir}/", flush=True)
    wait = args.wait == "yes" or (args.wait == "auto" and WAIT_BY_DEFAULT.get(submission.executor, False))
    if not wait:
        print(f"  result: {run.run_dir}/manifest.json once it finishes")
        return 0
    try:
        manifest = submission.wait()
    except SubmitError as error:
        print(str(error), file=sys.stderr)
        return 1
    print(f"finished: {run.run_dir}")
    if manifest.get("metrics"):
        print(
            "  metrics: "
            + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in manifest["metrics"].items())
        )
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m cluster.submit"))
