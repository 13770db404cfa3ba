"""Nothing a candidate does outlives it: a sandbox and resource limits per candidate REPL, and a
hash check of the header pickle before every unpickle.

Code a candidate runs at elaboration time (reachable through ordinary tactic configurations, no
forbidden word needed) can write files: the cached header pickle, the project's
``lean-toolchain``. After that every later rollout would be ``infra_error``. It can also start
busy tasks that starve honest neighbours. Three layers, for ``fresh_process`` REPLs (the rl
stage's; one process per candidate):

- **Sandbox** (``SandboxConfig.kind``, chosen at start-up by ``choose_sandbox``): the REPL sees the
  whole file system read-only (the project, the toolchain, the header pickle included), a private
  writable temp dir (its ``TMPDIR``) that disappears with it, and no network. ``auto`` tries, in
  order: ``bwrap`` (bubblewrap, Debian package ``bubblewrap``: ``--ro-bind / /``, a tmpfs as
  ``TMPDIR``, ``--unshare-net``), ``landrun`` (Landlock, which the judge already needs: read-only ``/``, one
  private writable temp dir removed after the REPL exits, TCP denied) and ``unshare`` (user, mount
  and network namespaces: read-only bind mounts of the paths the REPL reads, its own tmpfs as
  ``TMPDIR``; the rest of the file system keeps its permissions, so prefer bwrap).
  Each candidate tool is *probed* (a write to a read-only directory must fail, a write to the
  private temp dir must succeed and leave nothing behind, only the loopback interface may exist); the first that passes
  is used, and when none does start-up stops with one clear error naming what was tried
  (``kind: off`` runs without one, and says so).
- **Resource limits** (RLIMIT, set by the launcher before it execs the REPL): address space
  ``memory_limit_mb`` (default 16,384 MiB: Mathlib's mapped .olean files count towards it) and CPU
  time ``cpu_limit_s`` (default 600 s of CPU over all the REPL's threads: a candidate's spawned
  busy tasks exhaust its own budget, not its neighbours'). On by default wherever the sandbox is.
- **Header pickle hash** (``checked_pickle``): the pickle's SHA-256 is recorded when the builder
  REPL writes it and checked before every unpickle; on a mismatch the pickle is rebuilt (in the
  builder, where no candidate code runs) before the candidate's REPL restores it.

``leanloop.lean.local`` calls this module from two marked hooks (the candidate REPL's config and
the pickle path); everything else lives here.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

log = logging.getLogger(__name__)

SANDBOX_KINDS = ("bwrap", "landrun", "unshare")


@dataclass
class SandboxConfig:
    """The per-candidate REPL's confinement (``fresh_process`` only). See the module docstring."""

    kind: Literal["auto", "bwrap", "landrun", "unshare", "off"] = "auto"
    """``auto``: the first of bwrap, landrun, unshare that passes the probe; ``off``: none (warned)."""
    memory_limit_mb: int | None = 16384
    """RLIMIT_AS of the candidate's REPL, MiB (None: no limit)."""
    cpu_limit_s: int | None = 600
    """RLIMIT_CPU of the candidate's REPL, seconds of CPU time over all its threads (None: no limit)."""

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "off", *SANDBOX_KINDS):
            raise ValueError(f"sandbox.kind must be auto, off, bwrap, landrun or unshare; got {self.kind!r}")
        for name in ("memory_limit_mb", "cpu_limit_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"sandbox.{name} must be positive or null, got {value}")


class SandboxUnavailable(RuntimeError):
    """No sandbox tool works on this machine (the message says what was tried and how to fix it)."""


def _limits(config: SandboxConfig) -> str:
    lines = []
    if config.memory_limit_mb:
        lines.append(f"ulimit -v {int(config.memory_limit_mb) * 1024}")
    if config.cpu_limit_s:
        lines.append(f"ulimit -t {int(config.cpu_limit_s)}")
    return "\n".join(lines)


def _command(kind: str, program: str, read_only: list[str], private: str = "") -> str:
    """The shell text that runs ``program "$@"`` confined by ``kind`` (``private``: the mount point
    of the candidate's own tmpfs)."""
    run = f'{shlex.quote(program)} "$@"'
    if kind == "bwrap":
        # everything read-only (the machine's /tmp too: a stand-in or a venv may live there); the
        # candidate's own tmpfs, gone with the sandbox, is its TMPDIR
        return (f'exec bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs {shlex.quote(private)} '
                f'--unshare-net --unshare-ipc --die-with-parent --new-session --setenv TMPDIR {shlex.quote(private)} '
                f'-- {run}')
    if kind == "landrun":
        return ('private=$(mktemp -d "${TMPDIR:-/tmp}/leanloop-candidate-XXXXXX") || exit 125\n'
                'landrun --rox / --rw "$private" --rw /dev/null --env PATH --env HOME --env LEAN_PATH '
                f'--env ELAN_HOME --env TMPDIR="$private" -- {run}\nstatus=$?\nrm -rf "$private"\nexit $status')
    if kind == "unshare":
        binds = "".join(f"mount --bind {shlex.quote(p)} {shlex.quote(p)} && "
                        f"mount -o remount,bind,ro {shlex.quote(p)} && " for p in read_only)
        tmp = f"mount -t tmpfs tmpfs {shlex.quote(private)} && export TMPDIR={shlex.quote(private)} && "
        inner = binds + tmp + f"exec {run}"
        return f'exec unshare --user --map-root-user --mount --net --ipc -- sh -c {shlex.quote(inner)} sh "$@"'
    return f"exec {run}"


class Sandbox:
    """One chosen confinement: wraps a ``lake`` (lean-interact runs ``lake env <repl>``) in a
    launcher that sets the resource limits and starts it inside the sandbox."""

    def __init__(self, kind: str, config: SandboxConfig, read_only: list[str] | None = None):
        self.kind = kind  # bwrap / landrun / unshare / off
        self.config = config
        self.read_only = [str(Path(p).resolve()) for p in (read_only or []) if Path(p).exists()]
        self._dir = tempfile.TemporaryDirectory(prefix="leanloop-sandbox-")
        self._wrapped: dict[str, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        limits = f"memory_limit_mb={self.config.memory_limit_mb}, cpu_limit_s={self.config.cpu_limit_s}"
        return f"Sandbox({self.kind}, {limits})"

    def launcher(self, program: str) -> str:
        """A script running ``program "$@"`` under the limits, inside the sandbox."""
        with self._lock:
            if program not in self._wrapped:
                path = Path(self._dir.name) / f"launch-{len(self._wrapped)}"
                visible = [*self.read_only, str(Path(program).resolve().parent), os.getcwd()]
                private = Path(self._dir.name) / "private"  # an empty mount point; each REPL's tmpfs is its own
                private.mkdir(exist_ok=True)
                path.write_text("#!/bin/sh\n" + _limits(self.config) + "\n"
                                + _command(self.kind, program, list(dict.fromkeys(visible)), str(private)) + "\n")
                path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                self._wrapped[program] = str(path)
            return self._wrapped[program]

    def repl_config(self, repl_config: Any) -> Any:
        """A shallow copy of a lean-interact ``LeanREPLConfig`` whose REPL starts confined (a copy,
        not a new config: building one would set the project up again)."""
        import copy

        clone = copy.copy(repl_config)
        clone.lake_path = Path(self.launcher(_resolve(str(repl_config.lake_path))))
        return clone

    def run(self, argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run([self.launcher(argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout)


def _resolve(program: str) -> str:
    found = shutil.which(program)
    return str(Path(found).resolve()) if found else program


_PROBE = ('touch "$1/escaped" 2>/dev/null && echo WROTE_READ_ONLY; '
          'echo ok > "${TMPDIR:-/tmp}/leanloop-probe" && echo PRIVATE_TMP_OK; '
          'n=$(grep -c : /proc/net/dev); grep -q "^ *lo:" /proc/net/dev && n=$((n-1)); echo "NET_IFACES=$n"')


def probe(kind: str, config: SandboxConfig) -> str | None:
    """None when ``kind`` confines as required on this machine, else why not."""
    tool = {"bwrap": "bwrap", "landrun": "landrun", "unshare": "unshare"}[kind]
    if shutil.which(tool) is None:
        return f"{tool} is not installed"
    with tempfile.TemporaryDirectory(prefix="leanloop-probe-") as outside:
        sandbox = Sandbox(kind, SandboxConfig(kind=kind, memory_limit_mb=None, cpu_limit_s=None), [outside])
        try:
            done = sandbox.run(["sh", "-c", _PROBE, "probe", outside])
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"{tool} did not run: {error}"
        text = done.stdout + done.stderr
        if "WROTE_READ_ONLY" in text or Path(outside, "escaped").exists():
            return f"{tool} ran but a directory meant to be read-only was writable"
        if "PRIVATE_TMP_OK" not in text:
            return f"{tool} did not run the probe (exit {done.returncode}): {text.strip()[:200]}"
        if any(Path(sandbox._dir.name, "private").iterdir()):
            return f"{tool} ran but the candidate's temp dir outlived it"
        if kind != "landrun" and "NET_IFACES=0" not in text:  # landrun: Landlock denies TCP instead
            return f"{tool} ran but the network was reachable ({text.strip()[-40:]})"
    return None


def choose_sandbox(config: SandboxConfig, read_only: list[str] | None = None) -> Sandbox:
    """The sandbox ``config`` asks for, probed now; raises SandboxUnavailable with what was tried."""
    if config.kind == "off":
        log.warning("sandbox.kind=off: candidate REPLs run unconfined (only resource limits apply); a candidate's "
                    "elaboration-time code can write the project, the toolchain and the header pickle")
        return Sandbox("off", config, read_only)
    kinds = SANDBOX_KINDS if config.kind == "auto" else (config.kind,)
    failures = []
    for kind in kinds:
        why = probe(kind, config)
        if why is None:
            return Sandbox(kind, config, read_only)
        failures.append(f"{kind}: {why}")
    raise SandboxUnavailable(
        "no sandbox for the candidate REPLs works on this machine (" + "; ".join(failures) + "). Install "
        "bubblewrap (`apt-get install bubblewrap`) or landrun, or allow unprivileged user namespaces; or set "
        "backend.local.sandbox.kind: off to run unconfined (not for RL rewards)")


# -- the header pickle's hash ---------------------------------------------------------------------
_GUARDS: "weakref.WeakKeyDictionary[Any, dict[str, str]]" = weakref.WeakKeyDictionary()
_GUARD_LOCK = threading.Lock()


def file_hash(path: str | os.PathLike) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def checked_pickle(pickles: Any, header: str, build: Callable[[str, str], None], base: str | None = None) -> str:
    """``pickles.path_for(header, build)``, with the pickle's hash checked before it is unpickled:
    recorded when ``build`` writes it, compared now, and the pickle rebuilt on a mismatch.
    ``base``: the REPL's working directory (a relative pickle path is the REPL's, not ours)."""
    with _GUARD_LOCK:
        hashes = _GUARDS.setdefault(pickles, {})

    def on_disk(path: str) -> Path:
        return Path(base, path) if base and not os.path.isabs(path) else Path(path)

    def build_and_record(text: str, path: str) -> None:
        build(text, path)
        hashes[path] = file_hash(on_disk(path)) or ""

    path = pickles.path_for(header, build_and_record)
    expected = hashes.get(path)
    if expected is None or file_hash(on_disk(path)) != expected:
        with _GUARD_LOCK:  # one rebuild, not one per worker
            if file_hash(on_disk(path)) != hashes.get(path):
                log.warning("header pickle %s changed since it was built (hash mismatch): rebuilding it", path)
                build_and_record(header, path)
    return path


__all__ = ["SANDBOX_KINDS", "Sandbox", "SandboxConfig", "SandboxUnavailable", "checked_pickle", "choose_sandbox",
           "file_hash", "probe"]
