"""The artifact contract: ``artifacts/<stage>/<run>/`` with ``config.yaml``, ``manifest.json`` and
the outputs under ``final/``.

A manifest records what a run read (paths and content hashes of the input manifests or files),
the code (git rev, dirty flag), library versions, the seed, counts and final metrics. A stage names
its inputs explicitly and checks them with :func:`read_manifest`; nothing guesses "the latest run".

Every reference a config gives (``artifacts://<stage>/<run>``, ``shared://...``, a run folder, its
``final/`` folder, a plain folder) is read through :func:`resolve_artifact` (one rule for ``final/``
and the manifest check), :func:`resolve_run` (a finished run is required) or :func:`resolve_model`
(a model folder); :func:`resolve_path` only expands the two schemes.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from leanloop.paths import REPO_ROOT, artifacts_root, resolve_shared, shared_data_dir
from leanloop.runnables import config_folder, make_target, renamed_artifact

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
FINAL = "final"
ARTIFACTS_SCHEME = "artifacts://"
TRACKED_LIBRARIES = (
    "torch",
    "transformers",
    "tokenizers",
    "accelerate",
    "peft",
    "trl",
    "datasets",
    "lightning",
    "bitsandbytes",
    "deepspeed",
    "wandb",
    "lean-interact",
    "sentence-transformers",
    "bm25s",
)


class ManifestError(RuntimeError):
    """An input artifact is missing, unfinished, or does not match what the stage expects."""


class ArtifactNotFoundError(ManifestError, FileNotFoundError):
    """A reference names a run folder that does not exist at all (its stage never ran)."""


class RunLockedError(ManifestError):
    """Another process is writing the run folder."""


def content_hash(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, sorted)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    if not files:
        raise ManifestError(f"cannot hash {path}: no such file or empty folder")
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    return "sha256:" + digest.hexdigest()


def git_state() -> dict[str, Any]:
    """The code a run used: revision and whether the tree had uncommitted changes."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        return {"rev": None, "dirty": None}
    return {"rev": rev, "dirty": dirty}


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in TRACKED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def reference_of(path: str | os.PathLike) -> str:
    """How a manifest names an input so that it survives moving the roots: ``artifacts://...`` under
    the artifacts root, ``shared://...`` under the shared data, else the absolute path."""
    path = Path(path)
    for scheme, root_of in ((ARTIFACTS_SCHEME, artifacts_root), ("shared://", shared_data_dir)):
        try:
            root = root_of()
        except FileNotFoundError:
            continue
        for inner, outer in ((path.absolute(), root.absolute()), (path.resolve(), root.resolve())):
            if inner.is_relative_to(outer) and inner != outer:
                return scheme + inner.relative_to(outer).as_posix()
    return str(path.absolute())


def _input_target(path: Path) -> Path:
    return path / MANIFEST if (path / MANIFEST).is_file() else path


def describe_input(path: str | os.PathLike) -> dict[str, Any]:
    """An input entry: what it is (an artifact folder by its manifest's hash, a file or folder by its
    own; with its size, or a folder's names and sizes, for the fast check of large ones) and where:
    ``ref`` (:func:`reference_of`, what later checks follow) and ``path`` as given."""
    path = Path(path)
    target = _input_target(path)
    entry: dict[str, Any] = {"path": str(path), "ref": reference_of(path), "hash": content_hash(target)}
    if target.is_dir():
        entry["sizes"] = _sizes(target)[1]
    else:
        entry["bytes"] = target.stat().st_size
    return entry


class RunNameError(ValueError):
    """A run name that is not one path segment (it would write outside ``artifacts/<stage>/``)."""


class RenamedError(ValueError):
    """A reference to an artifact folder that was renamed (the message names the new one)."""


# one path segment; '+' joins config stems in default names and '=' writes sweep values (lr=0.001)
_RUN_NAME = re.compile(r"[A-Za-z0-9._+=-]{1,200}")


def check_run_name(name: Any, what: str = "run name") -> str:
    """``name`` if it is one path segment of letters, digits and ``. _ - + =`` (not ``.`` or ``..``);
    else :class:`RunNameError`. Every place that names a run folder goes through this."""
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name) or name in (".", ".."):
        raise RunNameError(
            f"{what} {name!r} is not allowed: a run name is one folder name of letters, digits, "
            "'.', '_', '-', '+' or '=' (not '.' or '..', no '/'), e.g. --run my_run"
        )
    return name


# a data-parallel piece of a run (leanloop.sharding.shard_run): ``<run>/shards/<I>-of-<N>``
_SHARD_RUN = re.compile(r"(?P<run>[^/]+)/shards/(?P<piece>[0-9]+-of-[0-9]+)")


def run_dir(stage: str, run: str, root: str | os.PathLike | None = None) -> Path:
    """``<artifacts root>/<stage>/<run>`` (the run name checked), or ``root`` when given. A shard
    run ``<run>/shards/<I>-of-<N>`` is the folder under its parent run."""
    if root is not None:
        return Path(root)
    shard = _SHARD_RUN.fullmatch(run) if isinstance(run, str) else None
    if shard:
        return artifacts_root() / stage / check_run_name(shard["run"]) / "shards" / shard["piece"]
    return artifacts_root() / stage / check_run_name(run)


def default_run_name(config_files: Iterable[Any]) -> str:
    """The run a stage writes when no ``--run`` is given: the config files' stems joined by '+'
    (``--config configs/sft/paper.yaml --config configs/strategy/zero2.yaml`` -> ``paper+zero2``),
    each stem once. One rule for the stage CLI and the cluster tools, so that a submitted or swept
    run lands in the folder the stage itself would pick. Accepts str / Path / jsonargparse paths.
    """
    stems = [Path(str(getattr(f, "relative", f))).stem for f in (config_files or [])]
    if not stems:
        raise ValueError("name the run: pass --config configs/<stage>/X.yaml or --run NAME")
    return check_run_name("+".join(dict.fromkeys(stems)), "run name (from the config file names)")


LOCK = ".lock"
LOCK_HOLDER = ".lock.holder"
# what a run folder holds before its first result: removed again when the run fails that early
SCAFFOLDING = frozenset({LOCK, LOCK_HOLDER, "config.yaml", "hparams.yaml", "wandb"})


@contextmanager
def run_lock(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold the run folder's exclusive lock (one writer per run). A second writer fails at once with
    :class:`RunLockedError` naming the holder's PID and host; the lock is the OS's (``flock``), so a
    holder that died (killed, crashed) left nothing held and its lock is simply taken. A folder this
    call created is removed again when the body fails before writing anything beyond
    :data:`SCAFFOLDING` (no half-made run)."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    created = not folder.exists()
    top = folder  # the outermost folder this call creates
    while not top.parent.exists():
        top = top.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ManifestError(
            f"cannot create the run folder {folder}: {error.strerror or error} "
            "(is the artifacts folder writable? LEANLOOP_ARTIFACTS moves it)"
        ) from None
    lock = FileLock(str(folder / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunLockedError(
            f"{folder} is being written by another process ({_holder(folder)}); wait for it to "
            "finish, or choose another --run NAME"
        ) from None
    except OSError as error:
        raise ManifestError(
            f"cannot lock the run folder {folder}: {error.strerror or error} (is the artifacts folder writable?)"
        ) from None
    try:
        (folder / LOCK_HOLDER).write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
        )
        yield folder
    except BaseException:
        if created and folder.is_dir() and {p.name for p in folder.iterdir()} <= SCAFFOLDING:
            shutil.rmtree(folder, ignore_errors=True)
            for parent in folder.parents:
                if parent == top.parent or any(parent.iterdir()):
                    break
                parent.rmdir()
        raise
    finally:
        (folder / LOCK_HOLDER).unlink(missing_ok=True)
        lock.release()


def _holder(folder: Path) -> str:
    try:
        holder = json.loads((folder / LOCK_HOLDER).read_text())
        return f"pid {holder['pid']} on host {holder['host']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


# an unfinished training run's checkpoints: <run>/step-NNNNNN/lightning.ckpt (leanloop.training.cli)
STEP_CHECKPOINT = re.compile(r"step-(\d+)")
CHECKPOINT_NAME = "lightning.ckpt"


def is_checkpoint(path: str | os.PathLike) -> bool:
    """A complete Lightning checkpoint: a file, or the folder Lightning's DeepSpeed strategy writes
    (``<ckpt>/checkpoint/*.pt``, then ``<ckpt>/latest`` last: a folder without it was cut off)."""
    path = Path(path)
    return path.is_file() or (path.is_dir() and (path / "latest").is_file())


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """N of ``.../step-NNNNNN/lightning.ckpt``, or None for a checkpoint named otherwise."""
    match = STEP_CHECKPOINT.fullmatch(Path(path).parent.name)
    return int(match.group(1)) if match else None


def last_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete ``step-NNNNNN/lightning.ckpt`` (file or DeepSpeed folder) of a run folder,
    or None: what a rerun and a SLURM requeue resume from."""
    found = []
    for folder in Path(run_dir).glob("step-*"):
        match = STEP_CHECKPOINT.fullmatch(folder.name)
        if match and is_checkpoint(folder / CHECKPOINT_NAME):
            found.append((int(match.group(1)), folder / CHECKPOINT_NAME))
    return max(found)[1] if found else None


@dataclass
class Manifest:
    """What a finished run writes beside its outputs."""

    stage: str
    run: str
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    seed: int | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def add_input(self, role: str, path: str | os.PathLike) -> None:
        self.inputs[role] = describe_input(path)

    def write(self, folder: str | os.PathLike) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        body = {
            "stage": self.stage,
            "run": self.run,
            "schema_version": SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "inputs": self.inputs,
            "git": git_state(),
            "versions": library_versions(),
            "seed": self.seed,
            "counts": self.counts,
            "metrics": self.metrics,
            **self.extra,
        }
        if (folder / FINAL).is_dir() and any(p.is_file() for p in (folder / FINAL).rglob("*")):
            body["final"] = final_record(folder / FINAL, flush=True)  # an empty final/ vouches for nothing
        target = folder / MANIFEST
        tmp = target.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(body, indent=2, sort_keys=False, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)  # a manifest exists only for a finished run, after its final/ is on disk
        _fsync_folder(folder)
        return target


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory
    finally:
        os.close(fd)


def _sizes(final: Path) -> tuple[list[Path], str]:
    files = sorted(p for p in final.rglob("*") if p.is_file())
    listing = [[str(p.relative_to(final)), p.stat().st_size] for p in files]
    return files, "sha256:" + hashlib.sha256(json.dumps(listing).encode()).hexdigest()


# final/'s files up to this size are hashed whole by the fast check; larger ones by SAMPLED_BLOCKS
# blocks of BLOCK_BYTES spread over the file (first and last included): about 1 MiB read per file
SMALL_FILE_BYTES = 4 << 20
BLOCK_BYTES = 64 << 10
SAMPLED_BLOCKS = 16


def file_digest(path: str | os.PathLike) -> str:
    """The fast check's hash of one file: ``sha256:`` of the whole file up to
    :data:`SMALL_FILE_BYTES`, else ``sampled:`` (of its size and :data:`SAMPLED_BLOCKS` blocks)."""
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= SMALL_FILE_BYTES:
            while block := handle.read(1 << 20):
                digest.update(block)
            return "sha256:" + digest.hexdigest()
        digest.update(str(size).encode())
        for index in range(SAMPLED_BLOCKS):
            handle.seek(index * (size - BLOCK_BYTES) // (SAMPLED_BLOCKS - 1))
            digest.update(handle.read(BLOCK_BYTES))
    return "sampled:" + digest.hexdigest()


def final_record(final: str | os.PathLike, *, flush: bool = False) -> dict[str, Any]:
    """What the manifest records of its run's ``final/``: file count, bytes, a hash of the
    (name, size) list, each file's :func:`file_digest` (the fast check) and a hash of all contents
    (``--verify full``). ``flush`` syncs every file to disk first, so a manifest never vouches for
    outputs still in the page cache."""
    final = Path(final)
    files, sizes = _sizes(final)
    if flush:
        for file in files:
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_folder(final)
    return {
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "sizes": sizes,
        "digests": {str(f.relative_to(final)): file_digest(f) for f in files},
        "content": content_hash(final) if files else None,
    }


def final_problems(final: Path, record: dict[str, Any], mode: str) -> list[str]:
    """How ``final/`` differs from its manifest's record: files or sizes (always), a file's
    :func:`file_digest` (fast: a same-size edit of a small file, or of a large one's sampled blocks),
    all contents (``full``)."""
    if not final.is_dir():
        return [f"{final} is missing"]
    if _sizes(final)[1] != record.get("sizes"):
        return [f"{final} changed since its manifest was written (files or sizes differ)"]
    changed = [name for name, digest in (record.get("digests") or {}).items() if file_digest(final / name) != digest]
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        return [f"{final} changed since its manifest was written (contents of {shown} differ)"]
    if mode == "full" and record.get("content") and content_hash(final) != record["content"]:
        return [f"{final} changed since its manifest was written (contents differ)"]
    return []


def verify_mode() -> str:
    """How much a loaded run is checked: ``fast`` (final/'s names, sizes and per-file digests; input
    manifests, small input files, large inputs' sizes) or ``full`` (all contents, every input
    wholly); ``--verify full`` / ``LEANLOOP_VERIFY=full``."""
    mode = os.environ.get("LEANLOOP_VERIFY", "fast") or "fast"
    if mode not in ("fast", "full"):
        raise ManifestError(f"LEANLOOP_VERIFY={mode!r}: use fast or full")
    return mode


# an input file larger than this (and an input folder) is compared by size fast, by contents with --verify full
FAST_INPUT_BYTES = 64 << 20


def input_location(entry: dict[str, Any]) -> Path:
    """Where a manifest's input entry is now: its ``ref`` under today's roots (``LEANLOOP_ARTIFACTS``,
    ``LEANLOOP_SHARED_DATA``), else its recorded path."""
    return resolve_path(entry["ref"]) if entry.get("ref") else Path(entry["path"])


def run_problems(folder: str | os.PathLike, manifest: dict[str, Any], mode: str | None = None) -> list[str]:
    """Why a finished run's manifest no longer vouches for it: its ``final/`` changed since the
    manifest was written (:func:`final_problems`), or an input it recorded is gone or changed (an
    upstream run rebuilt or edited, or the roots moved onto other runs): inputs are followed by their
    ``ref``, so moving the whole artifacts root keeps a run valid."""
    folder, mode = Path(folder), mode or verify_mode()
    problems = []
    record = manifest.get("final")
    if isinstance(record, dict):
        problems += final_problems(folder / FINAL, record, mode)
    for role, entry in (manifest.get("inputs") or {}).items():
        if not isinstance(entry, dict) or not (entry.get("path") or entry.get("ref")) or not entry.get("hash"):
            continue
        named = entry.get("ref") or entry["path"]
        try:
            target = _input_target(input_location(entry))
        except (FileNotFoundError, RunNameError) as error:
            problems.append(f"input {role} ({named}) cannot be found: {error}")
            continue
        if not target.exists():
            problems.append(f"input {role} ({named}) no longer exists at {target}")
            continue
        if mode != "full" and target.is_dir() and entry.get("sizes"):
            if _sizes(target)[1] != entry["sizes"]:
                problems.append(f"input {role} ({named}) changed since this run read it (files or sizes differ)")
            continue
        if mode != "full" and target.is_file() and target.stat().st_size > FAST_INPUT_BYTES and "bytes" in entry:
            if target.stat().st_size != entry["bytes"]:
                problems.append(f"input {role} ({named}) changed since this run read it (its size differs)")
            continue
        if mode != "full" and (target.is_dir() or target.stat().st_size > FAST_INPUT_BYTES):
            continue  # recorded before sizes were
        try:
            if content_hash(target) != entry["hash"]:
                problems.append(f"input {role} ({named}) changed since this run read it")
        except ManifestError:
            problems.append(f"input {role} ({named}) is empty now")
    return problems


def read_manifest(folder: str | os.PathLike, stage: str | None = None) -> dict[str, Any]:
    """Load an input artifact's manifest, failing clearly if it is absent or from another stage."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ManifestError(
            f"{folder} has no {MANIFEST}: the run that should produce it did not finish "
            "(run its make target first, or point the config at a finished run)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as error:
        raise ManifestError(
            f"{path} cannot be read ({type(error).__name__}: {error}): the run's manifest is "
            "damaged; rerun that run (--overwrite true)"
        ) from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path} is not a manifest (a JSON object); rerun that run (--overwrite true)")
    if stage is not None and manifest.get("stage") != stage:
        raise ManifestError(f"{folder} is a '{manifest.get('stage')}' artifact, expected '{stage}'")
    return manifest


# -- naming and reading artifacts: the one resolver ------------------------------------------------
def resolve_path(ref: str | os.PathLike) -> Path:
    """Expand a reference's scheme only: ``artifacts://<stage>/<run>`` -> ``<artifacts root>/<stage>/<run>``,
    ``shared://x`` -> ``<shared data>/x``; anything else is a path as given. Checks nothing."""
    text = str(ref)
    if text.startswith(ARTIFACTS_SCHEME):
        rest = text[len(ARTIFACTS_SCHEME) :].rstrip("/")
        parts = rest.split("/")
        if len(parts) < 2 or any(part in ("", ".", "..") for part in parts):
            raise RunNameError(f"{ref}: an artifact reference is artifacts://<stage>/<run> (one folder name each)")
        renamed = renamed_artifact(parts[0], text)
        if renamed:
            raise RenamedError(renamed)
        check_run_name(parts[1], f"run name in {ref}")
        return artifacts_root() / rest
    return resolve_shared(text)


def locate_run(ref: str | os.PathLike) -> Path | None:
    """The run folder a reference names, or None when it names no run (a plain folder, a hub id).
    ``artifacts://`` always names a run (finished or not: :func:`read_manifest` says which); a folder
    holding ``manifest.json`` is a run; a ``final/`` folder whose parent holds one is that run's."""
    folder = resolve_path(ref)
    if str(ref).startswith(ARTIFACTS_SCHEME) or (folder / MANIFEST).is_file():
        return folder
    if folder.name == FINAL and (folder.parent / MANIFEST).is_file():
        return folder.parent
    return None


_REFERENCE = re.compile(r"artifacts://([A-Za-z_]+)/([\w.+=-]+)")
# stages whose runs come from a tool, not from ``<stage>.train``
TOOL_ENTRIES = {"data": "data.build", "search_data": "search.build_data"}


def upstream_configs(
    config: str | os.PathLike, configs_root: str | os.PathLike | None = None
) -> list[tuple[str, str, Path]]:
    """The runs a config names (``artifacts://<stage>/<run>``) that come from their runnable's config
    folder (``configs/<folder>/<run>.yaml``, :func:`leanloop.runnables.config_folder`),
    recursively, each once, in the order to build them (a run after the runs its own config names):
    ``(stage, run, config)``. The debug chains of the tests and of ``make gpu-check`` build these."""
    root = Path(configs_root) if configs_root is not None else REPO_ROOT / "configs"
    order: list[tuple[str, str, Path]] = []
    seen: set[tuple[str, str]] = set()

    def visit(path: Path) -> None:
        for stage, run in _REFERENCE.findall(path.read_text()):
            if (stage, run) in seen:
                continue
            seen.add((stage, run))
            source = root / config_folder(stage) / f"{run}.yaml"
            if not source.is_file():
                raise FileNotFoundError(f"{path} names artifacts://{stage}/{run} but {source} does not exist")
            visit(source)
            order.append((stage, run, source))

    visit(Path(config))
    return order


@dataclass(frozen=True)
class Artifact:
    """A resolved reference: where its outputs are, and the run (with its manifest) they belong to."""

    outputs: Path
    """``<run>/final`` for a run; the folder itself for a plain folder."""
    run: Path | None = None
    manifest: dict[str, Any] | None = None


def resolve_artifact(ref: str | os.PathLike, stage: str | None = None, *, require_run: bool = False) -> Artifact:
    """The one rule for an input reference: a run (``artifacts://<stage>/<run>``, a run folder or its
    ``final/``) must be finished and, when ``stage`` is given, from that stage (its manifest is checked);
    its outputs are ``<run>/final``. A bare name (``default``) with ``stage`` means
    ``artifacts://<stage>/default``. A plain existing folder is its own outputs (refused with
    ``require_run``); anything else is a clear error."""
    text = str(ref)
    if stage is not None and text and "/" not in text and os.sep not in text and not Path(text).exists():
        text = f"{ARTIFACTS_SCHEME}{stage}/{text}"
    run = locate_run(text)
    if run is not None and not run.exists():
        named = stage or (run.parent.name if text.startswith(ARTIFACTS_SCHEME) else None)
        hint = f" (`make {make_target(named)}`)" if named else ""
        raise ArtifactNotFoundError(
            f"{ref} -> {run} does not exist: run the stage that makes it first{hint}, "
            "or point the config at a finished run"
        )
    if run is not None:
        manifest = read_manifest(run, stage=stage)
        problems = run_problems(run, manifest)
        if problems:
            raise ManifestError(f"{ref}: {'; '.join(problems)}. Rerun that run (--overwrite true) or name another")
        return Artifact(outputs=run / FINAL, run=run, manifest=manifest)
    folder = resolve_path(text)
    what = (
        f"a finished {stage} run (artifacts://{stage}/<run>)" if stage else "a finished run (artifacts://<stage>/<run>)"
    )
    if require_run:
        raise ManifestError(f"{ref} -> {folder} is not a run folder (no {MANIFEST}); name {what}")
    if not folder.is_dir():
        raise FileNotFoundError(f"{ref} -> {folder} does not exist; name {what} or an existing folder")
    return Artifact(outputs=folder)


def resolve_run(ref: str | os.PathLike, stage: str | None = None) -> Path:
    """The folder of a finished run (manifest checked, from ``stage`` when given)."""
    return resolve_artifact(ref, stage, require_run=True).run  # type: ignore[return-value]


def resolve_model(ref: str | os.PathLike, stage: str | None = None) -> Path:
    """A Hugging Face model folder (holding ``config.json``): a finished run's ``final/`` or a plain folder."""
    artifact = resolve_artifact(ref, stage)
    if not (artifact.outputs / "config.json").is_file():
        what = f"a finished {stage} run (artifacts://{stage}/<run>)" if stage else "a finished run"
        raise FileNotFoundError(
            f"{ref} -> {artifact.outputs} holds no model (config.json); name {what} or its final/ folder"
        )
    return artifact.outputs
