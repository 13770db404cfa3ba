"""One entry point for every training stage: ``python -m <stage>.train --config X.yaml [...]``."""

from __future__ import annotations

import math
import os
import shutil
import sys
import warnings
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lightning.pytorch.callbacks import Callback, ModelCheckpoint, ModelSummary  # noqa: E402
from lightning.pytorch.cli import LightningCLI  # noqa: E402
from lightning.pytorch.utilities.model_helpers import is_overridden  # noqa: E402

from leanloop import runnables  # noqa: E402
from leanloop.artifacts import (
    FINAL,
    MANIFEST,
    Manifest,
    RunNameError,
    checkpoint_step,  # noqa: E402
    default_run_name,
    is_checkpoint,
    last_checkpoint,
    run_dir,
    run_lock,
)
from leanloop.tool import (
    CONFIG_FILE,
    ConfigFileError,
    DiskFullError,
    ShortErrors,
    add_verify_argument,  # noqa: E402
    changed_keys,
    check_config_files,
    check_renamed_keys,
    cli_entry,
    comparable_config,
    finished_with_same_config,
    is_disk_full,
    renamed_keys,
    set_verify_mode,
    start_run,
)
from leanloop.training.optim import check_master_weights  # noqa: E402
from leanloop.training.resume import ResumeState, resumable, trim_metrics  # noqa: E402


def _restore_int_first_batch_limits() -> None:
    """Make ``--trainer.limit_val_batches 1`` mean one batch in every process.

    Lightning annotates ``limit_{train,val,test,predict}_batches`` (and ``gradient_clip_val``) as
    ``Optional[Union[int, float]]``: an int counts batches, a float is a fraction. typing caches
    unions by equality, and ``Union[int, float] == Union[float, int]``, so when a library imported
    before Lightning built the float-first union (scikit-learn's ``sklearn.metrics`` does), Trainer's
    annotations ARE that float-first object. jsonargparse tries a union's members in order and its
    float accepts ``1``, so ``limit_val_batches: 1`` became ``1.0``: all the batches, silently
    (seen in a pytest worker that had imported scikit-learn first). ``int | float | None`` is not
    cached by equality and keeps the order Lightning wrote.
    """
    import typing
    from types import NoneType

    from lightning.pytorch import Trainer

    annotations = Trainer.__init__.__annotations__
    for name, hint in annotations.items():
        if typing.get_origin(hint) is typing.Union and typing.get_args(hint)[:2] == (float, int):
            rest = set(typing.get_args(hint)[2:])
            if rest <= {NoneType}:
                annotations[name] = int | float | None if rest else int | float


_restore_int_first_batch_limits()


@dataclass
class LogConfig:
    csv: bool = True
    """metrics.csv in the run folder."""
    wandb: bool = True
    """Weights & Biases, files under <run>/wandb."""
    wandb_mode: Literal["offline", "online"] = "offline"
    wandb_project: str = "leanloop"
    wandb_entity: str | None = None
    wandb_system_metrics: bool = False
    """wandb's CPU/GPU utilisation sampling (worth it on GPUs; on a shared CPU it costs a core)."""


# a run that sets no step cadence still checkpoints on this clock, so that a killed run resumes
CHECKPOINT_MINUTES = 30.0

# Sensible on a laptop CPU; paper configs set accelerator/devices/precision/strategy for GPUs.
TRAINER_DEFAULTS: dict[str, Any] = {
    "max_epochs": 1,
    "log_every_n_steps": 5,
    "num_sanity_val_steps": 0,
    # Lightning's own end-of-epoch checkpoint would duplicate final/; --checkpoint_every_n_steps
    # turns step checkpoints on
    "enable_checkpointing": False,
}


@dataclass
class StageResult:
    """What ``run_stage`` returns (tests and sweeps inspect it)."""

    run_dir: Path
    skipped: bool
    manifest: dict[str, Any] | None = None
    config: str | None = None
    """The resolved config (YAML text)."""
    trainer: Any = None
    model: Any = None
    datamodule: Any = None


class StageCLI(LightningCLI):
    def __init__(
        self,
        stage: str,
        *args: Any,
        links: Iterable[tuple[str, str]] = (),
        hold: ExitStack | None = None,
        **kwargs: Any,
    ):
        self.stage = stage
        self.resume_from: str | None = None
        self.hold = hold if hold is not None else ExitStack()
        """Holds the run folder's lock until the caller closes it (the end of run_stage)."""
        self.links = tuple(links)
        self.skipped = False
        super().__init__(*args, **kwargs)

    def init_parser(self, **kwargs: Any):
        from lightning.pytorch.cli import LightningArgumentParser

        class Parser(ShortErrors, LightningArgumentParser):
            make_target = runnables.make_target(self.stage)

        self.parser_class = Parser
        kwargs.setdefault("prog", f"python -m {self.stage}.train")
        return super().init_parser(**kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument(
            "--run",
            type=str | None,
            default=None,
            help="run name: artifacts/<stage>/<run>/ (default: config file stems)",
        )
        parser.add_argument(
            "--overwrite", type=bool, default=False, help="retrain over a finished run that had a different config"
        )
        parser.add_argument(
            "--test_after_fit",
            type=bool,
            default=False,
            help="run trainer.test after fit when the datamodule has a test split",
        )
        parser.add_argument(
            "--checkpoint_every_n_steps",
            type=int | None,
            default=None,
            help="save <run>/step-NNNNNN/lightning.ckpt every N optimizer steps (all kept)",
        )
        parser.add_argument(
            "--checkpoint_every_n_minutes",
            type=float | None,
            default=CHECKPOINT_MINUTES,
            help="without --checkpoint_every_n_steps: save <run>/step-NNNNNN/lightning.ckpt after "
            "every N minutes of training, keeping the newest only (a killed run loses at most "
            "that much); null: none",
        )
        parser.add_argument(
            "--ckpt_path",
            type=str | None,
            default=None,
            help="resume fit from a Lightning checkpoint (e.g. <run>/step-000100/lightning.ckpt)",
        )
        parser.add_argument(
            "--restart",
            type=bool,
            default=False,
            help="start an unfinished run over (its checkpoints and metrics.csv are removed) "
            "instead of resuming it from its last checkpoint",
        )
        parser.add_argument(
            "--dry_run",
            type=bool,
            default=False,
            help="parse and validate the configs, print the resolved config and its memory plan, train nothing",
        )
        parser.add_argument(
            "--plan",
            type=bool,
            default=True,
            help="with --dry_run: print the memory plan per GPU (leanloop.plan) after the config",
        )
        add_verify_argument(parser)
        parser.add_dataclass_arguments(LogConfig, "log")
        for source, target in self.links:
            parser.link_arguments(source, target)

    # -- run folder and the skip / overwrite decision, before anything heavy is built ------------
    def before_instantiate_classes(self) -> None:
        config = self.config
        set_verify_mode(config.get("verify"))
        self.run_name = config.run if config.run is not None else _run_name(config.get("config"))
        try:
            self.run_dir = run_dir(self.stage, self.run_name)
        except RunNameError as error:
            raise SystemExit(f"[{self.stage}] {error}") from None
        self.fast_dev_run = bool(config.trainer.get("fast_dev_run"))
        config.run = self.run_name
        resolved = self.parser.dump(config, skip_none=False, skip_check=True, skip_link_targets=False)
        self.resolved_config = resolved
        try:
            check_master_weights(config.trainer.get("precision"), config.trainer.get("strategy"))
        except ValueError as error:
            print(f"python -m {self.stage}.train: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        if config.dry_run:
            self.skipped = True
            return
        if _is_global_zero():
            self.hold.enter_context(run_lock(self.run_dir))
        if finished_with_same_config(self.run_dir, resolved, config.overwrite, self.stage):
            self.skipped = True
            return
        self.resume_from = self._resume_point(config, resolved)
        if _is_global_zero():
            start_run(self.run_dir, resolved)

    def _resume_point(self, config: Any, resolved: str) -> str | None:
        """The checkpoint fit resumes from: ``--ckpt_path`` (checked now, not after the model is
        built), else the last checkpoint of an unfinished run of the same config (``--restart true``
        starts it over instead); a run of another config starts over. What a fresh start replaces
        (old checkpoints, metrics.csv) is removed."""
        given = config.ckpt_path
        if given:
            if given not in ("last", "best", "hpc", "registry") and not is_checkpoint(given):
                raise SystemExit(
                    f"[{self.stage}] --ckpt_path {given}: no such checkpoint file "
                    f"(checkpoints are {self.run_dir}/step-NNNNNN/lightning.ckpt: a file, or the "
                    "folder DeepSpeed writes, complete once it holds 'latest')"
                )
            return given
        last = last_checkpoint(self.run_dir)
        if last is None:
            return None
        previous = (self.run_dir / CONFIG_FILE).read_text() if (self.run_dir / CONFIG_FILE).is_file() else None
        same = comparable_config(previous) == comparable_config(resolved)
        if same and not config.restart and not config.overwrite:
            print(
                f"[{self.stage}] resuming the unfinished run {self.run_dir} from {last.parent.name} "
                "(pass --restart true to start it over)",
                file=sys.stderr,
            )
            return str(last)
        if _is_global_zero():
            why = "--restart true" if same else f"its config changed: {', '.join(changed_keys(previous, resolved)[:8])}"
            print(f"[{self.stage}] starting {self.run_dir} over ({why}): removing its checkpoints", file=sys.stderr)
            for folder in self.run_dir.glob("step-*"):
                shutil.rmtree(folder, ignore_errors=True)
            (self.run_dir / "metrics.csv").unlink(missing_ok=True)
        return None

    def instantiate_classes(self) -> None:
        if not self.skipped:
            super().instantiate_classes()

    def instantiate_trainer(self, **kwargs: Any):
        config = self.config
        kwargs.setdefault("default_root_dir", str(self.run_dir))
        if config.trainer.get("logger") in (None, True):
            kwargs["logger"] = _loggers(self.stage, self.run_name, self.run_dir, config.log) or False
        callbacks = [self._get(self.config_init, key) for key in self.parser.callback_keys]
        callbacks.append(LastValidation())  # run_stage validates the final weights if it did not
        seed = config.seed_everything
        self.resume_state = ResumeState(seed if isinstance(seed, int) and not isinstance(seed, bool) else None)
        callbacks.append(self.resume_state)
        configured = self._get(self.config_init, "trainer", default={})
        if configured.get("enable_model_summary", True) is not False and not any(
            isinstance(c, ModelSummary) for c in callbacks
        ):
            callbacks.append(OneLineSummary())
        # "step-{step:06d}/lightning" -> <run>/step-000100/lightning.ckpt (one folder per step is the
        # artifact layout; Lightning creates it)
        layout = {
            "dirpath": str(self.run_dir),
            "filename": "step-{step:06d}/lightning",
            "auto_insert_metric_name": False,
            "save_on_train_epoch_end": False,
        }
        if config.checkpoint_every_n_steps:
            kwargs["enable_checkpointing"] = True
            callbacks.append(
                StepCheckpoint(every_n_train_steps=config.checkpoint_every_n_steps, save_top_k=-1, **layout)
            )
        elif config.checkpoint_every_n_minutes and not self.fast_dev_run:
            from datetime import timedelta

            kwargs["enable_checkpointing"] = True
            callbacks.append(
                StepCheckpoint(
                    train_time_interval=timedelta(minutes=config.checkpoint_every_n_minutes),
                    save_top_k=1,
                    monitor="step",
                    mode="max",
                    **layout,
                )
            )
        trainer_config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        return self._instantiate_trainer(trainer_config, callbacks)


class StepCheckpoint(ModelCheckpoint):
    """Lightning's checkpointing into ``<run>/step-NNNNNN/``: a checkpoint it replaces takes its
    ``step-NNNNNN`` folder with it."""

    def _remove_checkpoint(self, trainer: Any, filepath: str) -> None:
        super()._remove_checkpoint(trainer, filepath)
        folder = Path(filepath).parent
        if (
            trainer.is_global_zero
            and folder.parent == Path(self.dirpath or "")
            and folder.is_dir()
            and not any(folder.iterdir())
        ):
            folder.rmdir()


class OneLineSummary(ModelSummary):
    """The model in one line (Lightning's table is a dozen, with a FLOPs count of 0 when none was
    measured)."""

    @staticmethod
    def summarize(
        summary_data: list,
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict,
        total_flops: int = 0,
        **kwargs: Any,
    ) -> None:
        from lightning.pytorch.utilities.model_summary import get_human_readable_count

        types = [t for name, column in summary_data if name == "Type" for t in column]
        print(
            f"model: {', '.join(types) or '?'}, {get_human_readable_count(total_parameters)} parameters "
            f"({get_human_readable_count(trainable_parameters)} trainable), {model_size:.1f} MB",
            file=sys.stderr,
        )


def _is_global_zero() -> bool:
    return (
        int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0") or 0)) == 0
        and int(os.environ.get("LOCAL_RANK", "0") or 0) == 0
    )


def _run_name(config_files: Any) -> str:
    try:
        return default_run_name(config_files)
    except ValueError as error:
        raise SystemExit(str(error)) from None


def _loggers(stage: str, run: str, run_dir: Path, log: Any) -> list:
    from lightning.pytorch.loggers import CSVLogger

    log = LogConfig(**dict(log)) if not isinstance(log, LogConfig) else log
    loggers: list = []
    if log.csv:
        # every logged row on disk at once: a killed run keeps the rows it logged
        loggers.append(CSVLogger(save_dir=str(run_dir), name="", version="", flush_logs_every_n_steps=1))
    if log.wandb:
        try:
            from lightning.pytorch.loggers import WandbLogger

            run_dir.mkdir(parents=True, exist_ok=True)
            mode = os.environ.get("WANDB_MODE", log.wandb_mode)
            import wandb

            loggers.append(
                WandbLogger(
                    project=log.wandb_project,
                    entity=log.wandb_entity,
                    name=f"{stage}/{run}",
                    save_dir=str(run_dir),
                    offline=mode != "online",
                    group=stage,
                    settings=wandb.Settings(x_disable_stats=not log.wandb_system_metrics),
                )
            )
        except ImportError:
            print("wandb is not installed; logging to CSV only", file=sys.stderr)
    return loggers


def _metrics(trainer: Any) -> dict[str, float]:
    out = {}
    for key, value in trainer.callback_metrics.items():
        number = float(value.item() if hasattr(value, "item") else value)
        out[key] = number if math.isfinite(number) else str(number)
    return out


class LastValidation(Callback):
    """Remembers the optimizer step of the last validation run during fit (not the sanity check)."""

    def __init__(self) -> None:
        self.step: int | None = None

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self.step = int(trainer.global_step)


def _needs_final_validation(trainer: Any, model: Any, datamodule: Any) -> bool:
    if trainer.fast_dev_run or not trainer.limit_val_batches:
        return False  # fast_dev_run validated its one batch; limit_val_batches 0 turns validation off
    if not is_overridden("validation_step", model):
        return False
    if not any(obj is not None and is_overridden("val_dataloader", obj) for obj in (datamodule, model)):
        return False
    last = next((c for c in trainer.callbacks if isinstance(c, LastValidation)), None)
    return last is None or last.step != int(trainer.global_step)


def _hook(objects: Iterable[Any], name: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for obj in objects:
        method = getattr(obj, name, None)
        if callable(method):
            merged.update(method() or {})
    return merged


def _quiet_startup() -> None:
    """Lightning's start-up lines (which accelerators exist, logger tips, CUDA device lists) go to its
    info loggers: kept at warnings, so a training start prints what matters (run_stage says where
    the run writes, and warnings still show)."""
    import logging

    for name in (
        "lightning.pytorch.utilities.rank_zero",
        "lightning.fabric.utilities.rank_zero",
        "lightning.pytorch.accelerators.cuda",
    ):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*is deprecated.*", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=r".*srun. command is available on your system but is not used.*")
    # Lightning's own use of a torch API it deprecated, once per run
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    # the run folder holds config.yaml (and, resumed, its checkpoints) before the first checkpoint
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")


def _steps_bar(base: type) -> type:
    """A progress bar class whose training total ends where the run ends: at ``max_steps`` when that
    comes before the epoch's last batch (a 10-step run counts to 10, not to the epoch's 1,040 batches)."""

    class StepsBar(base):  # type: ignore[misc, valid-type]
        @property
        def total_train_batches(self) -> int | float:
            total = super().total_train_batches
            trainer = self.trainer
            if trainer.max_steps is None or trainer.max_steps < 0:
                return total
            done = trainer.fit_loop.epoch_loop.batch_progress.current.ready
            left = (trainer.max_steps - trainer.global_step) * trainer.accumulate_grad_batches
            return min(total, done + max(left, 0))

    StepsBar.__name__ = StepsBar.__qualname__ = f"Steps{base.__name__}"
    return StepsBar


def _progress_bar(trainer: Any, configured_callbacks: list) -> None:
    """Lightning's default bar, counting to the run's end (:func:`_steps_bar`). When stdout is not a
    terminal (make's background logs, SLURM / submitit log files) the Rich bar draws only its final
    state, so tqdm's (which keeps updating there, ``tail -f``) is used. A progress bar named in the
    config's ``trainer.callbacks`` is left alone."""
    from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar

    if any("ProgressBar" in str(getattr(c, "class_path", c)) for c in configured_callbacks):
        return
    for index, callback in enumerate(trainer.callbacks):
        if type(callback) is RichProgressBar:  # Lightning's default
            base = RichProgressBar if sys.stdout.isatty() else TQDMProgressBar
            trainer.callbacks[index] = _steps_bar(base)()
        elif type(callback) is TQDMProgressBar:
            trainer.callbacks[index] = _steps_bar(TQDMProgressBar)()


def run_stage(
    stage: str,
    module_class: type,
    datamodule_class: type,
    args: list[str] | None = None,
    links: Iterable[tuple[str, str]] = (),
) -> StageResult:
    """Parse configs, train, export, write the manifest. ``args=None`` reads ``sys.argv``.

    ``links`` are jsonargparse argument links, e.g. ``[("model.base", "data.base")]`` so the
    datamodule tokenizes with the model's tokenizer without the config repeating it.
    """
    _quiet_startup()
    argv = list(sys.argv[1:] if args is None else args)
    links = list(links)  # read twice: the refusal of linked keys and the parser's links
    try:
        check_config_files(argv)
        check_renamed_keys(
            argv,
            renamed_keys(("model.", module_class), ("data.", datamodule_class)),
            linked={target: source for source, target in links},
        )
    except ConfigFileError as error:
        print(f"python -m {stage}.train: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    with ExitStack() as hold:
        return _run_stage(stage, module_class, datamodule_class, args, links, hold)


def _run_stage(
    stage: str,
    module_class: type,
    datamodule_class: type,
    args: list[str] | None,
    links: Iterable[tuple[str, str]],
    hold: ExitStack,
) -> StageResult:
    with warnings.catch_warnings():
        # args given in-process (tests, sweeps) while sys.argv holds the caller's own flags is intended
        warnings.filterwarnings("ignore", message=".*args parameter is intended to run from within Python.*")
        cli = StageCLI(
            stage,
            module_class,
            datamodule_class,
            args=args,
            links=links,
            hold=hold,
            run=False,
            save_config_callback=None,
            auto_configure_optimizers=False,
            seed_everything_default=42,
            trainer_defaults=TRAINER_DEFAULTS,
            parser_kwargs={"description": f"train the {stage} stage"},
        )
    if cli.config.dry_run:
        print(cli.resolved_config)
        if cli.config.plan:
            _print_plan(stage, cli.resolved_config)
        return StageResult(cli.run_dir, skipped=True, config=cli.resolved_config)
    if cli.skipped:
        from leanloop.artifacts import read_manifest

        return StageResult(cli.run_dir, skipped=True, manifest=read_manifest(cli.run_dir), config=cli.resolved_config)
    trainer, model, datamodule = cli.trainer, cli.model, cli.datamodule
    config = cli.config
    # the run folder holds config.yaml (written before training), so Lightning's CSV logger warns that
    # "previous log files" will be deleted: only its own metrics.csv / hparams.yaml, replaced on purpose
    warnings.filterwarnings("ignore", message=r"Experiment logs directory .* exists and is not empty")
    _progress_bar(trainer, getattr(config.trainer, "callbacks", None) or [])
    if trainer.is_global_zero:
        until = (
            f"max_steps={trainer.max_steps}"
            if trainer.max_steps and trainer.max_steps > 0
            else f"max_epochs={trainer.max_epochs}"
        )
        start = f", resuming from {cli.resume_from}" if cli.resume_from else ""
        print(
            f"[{stage}] training {cli.run_dir.name} to {until} on {trainer.num_devices}x "
            f"{type(trainer.accelerator).__name__.removesuffix('Accelerator')}{start}; writing {cli.run_dir}",
            file=sys.stderr,
        )
    resume_state: ResumeState = cli.resume_state
    if datamodule is not None and is_overridden("train_dataloader", datamodule):
        seed = (
            config.seed_everything
            if isinstance(config.seed_everything, int) and not isinstance(config.seed_everything, bool)
            else 0
        )
        _resumable_train_data(datamodule, resume_state, seed, trainer)
    if cli.resume_from:
        step = checkpoint_step(cli.resume_from)
        if step is not None and trainer.is_global_zero:
            _keep_metrics_before(trainer, cli.run_dir, step)
    _interruptible(trainer, trainer.fit, model, datamodule=datamodule, ckpt_path=cli.resume_from)
    if (
        0 < trainer.max_steps
        and trainer.global_step < trainer.max_steps
        and trainer.max_epochs is not None
        and 0 < trainer.max_epochs <= trainer.current_epoch
    ):
        # the stage default is one epoch (the papers' recipes): a longer max_steps needs max_epochs too
        print(
            f"[{stage}] stopped at step {trainer.global_step} by max_epochs={trainer.max_epochs}, before "
            f"max_steps={trainer.max_steps}; pass --trainer.max_epochs -1 to train for max_steps",
            file=sys.stderr,
        )
    metrics = _metrics(trainer)
    if (
        resume_state.tokens_at_resume
        and isinstance(metrics.get("train/tokens"), float)
        and resume_state.resumed_epoch == 0
        and int(trainer.current_epoch) <= 1
    ):
        # a one-epoch run restored mid-epoch: its epoch sum began before the restore
        metrics["train/tokens"] += resume_state.tokens_at_resume
    if _needs_final_validation(trainer, model, datamodule):
        # max_steps (or a val_check_interval that does not divide the run) stopped training after
        # the last validation: validate the final weights, so the manifest's val metrics are theirs
        _interruptible(trainer, trainer.validate, model, datamodule=datamodule, verbose=False)
        metrics.update(_metrics(trainer))
    if config.test_after_fit and datamodule is not None and is_overridden("test_dataloader", datamodule):
        _interruptible(trainer, trainer.test, model, datamodule=datamodule)
        metrics.update(_metrics(trainer))
    manifest = None
    final = cli.run_dir / FINAL
    export = getattr(model, "export", None)
    if callable(export) and (trainer.is_global_zero or getattr(model, "export_on_all_ranks", False)):
        if trainer.is_global_zero:
            final.mkdir(parents=True, exist_ok=True)
        try:
            export(final)
        except Exception as error:  # the writers (safetensors, tokenizers) wrap a full disk in their own types
            if is_disk_full(error):
                raise DiskFullError(final, error) from error
            raise
    if trainer.is_global_zero:
        counts = {
            "global_step": int(trainer.global_step),
            "current_epoch": int(trainer.current_epoch),
            "trained_tokens": resume_state.tokens,
            **_hook([datamodule, model], "manifest_counts"),
        }
        if cli.resume_from:
            counts["resumed_from"] = str(cli.resume_from)
        seed = config.seed_everything if not isinstance(config.seed_everything, bool) else None
        record = Manifest(
            stage=stage,
            run=cli.run_name,
            seed=seed,
            counts=counts,
            metrics=metrics,
            extra={
                "fast_dev_run": cli.fast_dev_run,
                "trainer": {
                    "precision": str(trainer.precision),
                    "world_size": int(trainer.world_size),
                    "accumulate_grad_batches": int(trainer.accumulate_grad_batches),
                },
                "config_file": CONFIG_FILE,
            },
        )
        write_run_report = getattr(model, "write_run_report", None)
        if callable(write_run_report):  # report.md beside the manifest (e.g. pretrain's loss curves)
            write_run_report(cli.run_dir, metrics, counts)
        model_identity = _hook_value(model, "manifest_model")
        if model_identity:
            record.extra["model"] = model_identity
        for role, path in _hook([datamodule, model], "manifest_inputs").items():
            record.add_input(role, path)
        record.write(cli.run_dir)
        from leanloop.artifacts import read_manifest

        manifest = read_manifest(cli.run_dir)
    return StageResult(
        cli.run_dir,
        skipped=False,
        manifest=manifest,
        config=cli.resolved_config,
        trainer=trainer,
        model=model,
        datamodule=datamodule,
    )


def _print_plan(stage: str, resolved: str) -> None:
    """The dry run's memory plan; a config the planner cannot size says so in one line (the dry run
    is still a valid check of the config)."""
    import yaml

    from leanloop.plan import PlanError, plan_config

    try:
        print(plan_config(stage, yaml.safe_load(resolved)).table())
    except PlanError as error:
        print(f"memory plan: {error}")
    except Exception as error:  # noqa: BLE001 - a planner bug must not cost the config check its answer
        print(f"memory plan: not made ({type(error).__name__}: {error})")


def _interruptible(trainer: Any, call: Any, *args: Any, **kwargs: Any) -> None:
    """``call`` (fit, validate, test) with Ctrl-C as :class:`KeyboardInterrupt`: Lightning catches it,
    tears down and calls ``sys.exit(1)``, which would read as a crash; ``cli_entry`` makes it one line
    and exit 130. The step checkpoints already written stay for the rerun."""
    try:
        call(*args, **kwargs)
    except SystemExit:
        if trainer.interrupted:
            raise KeyboardInterrupt from None
        raise
    if trainer.interrupted:  # Lightning stopped the fit on a signal without raising
        raise KeyboardInterrupt


def _keep_metrics_before(trainer: Any, run_dir: Path, step: int) -> None:
    """A resumed run appends to ``metrics.csv`` the rows of the steps after its checkpoint (the rows a
    killed run logged after it are dropped: they are logged again)."""
    from lightning.pytorch.loggers import CSVLogger

    header = trim_metrics(run_dir, step)
    metrics = run_dir / "metrics.csv"
    kept = metrics.read_bytes() if metrics.is_file() else None
    for logger in trainer.loggers:
        if isinstance(logger, CSVLogger):
            writer = logger.experiment  # Lightning's writer deletes an existing metrics.csv when it is made
            if kept is not None and not metrics.is_file():
                metrics.write_bytes(kept)
            # it appends, and must know the file's columns: else its first save rewrites the file
            # with only the columns it has seen and fails on the older rows
            writer.metrics_keys = sorted(header)


def _resumable_train_data(datamodule: Any, state: ResumeState, seed: int, trainer: Any) -> None:
    """Serve the datamodule's train loader in an :class:`EpochOrder` (same batches), so a
    restored run continues with the batch the killed one would have trained on next. Under data
    parallelism each rank gets its own share of it (a ``RankShard``, which Lightning keeps instead
    of putting in its DistributedSampler), with the ranks and shares Lightning's sampler would use."""
    original = datamodule.train_dataloader

    def train_dataloader() -> Any:
        loader = original()
        ranks = trainer.distributed_sampler_kwargs or {}
        wrapped, order, per_batch = resumable(
            loader, seed, int(ranks.get("rank", 0)), int(ranks.get("num_replicas", 1))
        )
        if order is not None:
            state.skip_for(order, per_batch)
            # the loader resumes mid-epoch (the sampler skips what was trained): Lightning's warning
            # that it cannot does not apply
            warnings.filterwarnings("ignore", message=r"You're resuming from a checkpoint that ended before the epoch")
        return wrapped

    datamodule.train_dataloader = train_dataloader


def _hook_value(obj: Any, name: str) -> Any:
    method = getattr(obj, name, None)
    return method() if callable(method) else None


def main(stage: str, module_class: type, datamodule_class: type, links: Iterable[tuple[str, str]] = ()) -> None:
    """``python -m <stage>.train``: ``if __name__ == "__main__": main("pretrain", ...)``."""

    def stage_main() -> int:
        result = run_stage(stage, module_class, datamodule_class, links=links)
        if result.config is not None and result.manifest is None and result.skipped:
            return 0  # --dry_run printed the resolved config
        done = "skipped (already finished)" if result.skipped else "done"
        print(f"[{stage}] {done}: {result.run_dir} (outputs in {FINAL}/, {MANIFEST})", flush=True)
        return 0

    sys.exit(cli_entry(stage_main, prog=f"python -m {stage}.train"))


__all__ = ["LogConfig", "StageResult", "run_stage", "main"]
