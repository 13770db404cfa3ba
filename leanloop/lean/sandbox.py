"""Nothing a candidate does outlives it: a sandbox and resource limits per candidate REPL, and a
hash check of the header pickle before every unpickle.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
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


# what a candidate's REPL sees of the trainer's environment (everything else is dropped: tokens,
# credentials and paths in the trainer's environment are no business of a candidate)
ENV_ALLOW = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LEAN_PATH",
    "LEAN_SYSROOT",
    "LEAN_SRC_PATH",
    "ELAN_HOME",
    "ELAN_TOOLCHAIN",
    "LAKE_HOME",
)
# private writable directories per candidate, each a size-limited tmpfs; the first holds the
# candidate's TMPDIR and gets ``tmp_limit_mb``, the others a small fixed size
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
SMALL_DIR_MB = 16
# sandboxes that give every item above (private /tmp, /var/tmp, /dev/shm and HOME, the environment
# allow-list, a PID namespace); landrun (Landlock) has no PID namespace: weak
STRONG_KINDS = ("bwrap", "unshare")


@dataclass
class SandboxConfig:
    """The per-candidate REPL's confinement (``fresh_process`` only). See the module docstring."""

    kind: Literal["auto", "bwrap", "landrun", "unshare", "off"] = "auto"
    """``auto``: the first of bwrap, landrun, unshare that passes the probe; ``off``: none (warned)."""
    memory_limit_mb: int | None = 16384
    """The candidate's whole memory budget, MiB: its REPL's address space (RLIMIT_AS) plus its
    memory-backed private directories (``tmp_limit_mb`` and 16 MiB for each other one). None: no limit."""
    tmp_limit_mb: int = 1024
    """Size of the candidate's private /tmp (its TMPDIR; a tmpfs, so memory), MiB."""
    cpu_limit_s: int | None = None
    """RLIMIT_CPU of the candidate's REPL, seconds of CPU over all its threads. None: the proof's
    timeout x ``cores`` (set by the backend): a candidate's spawned busy threads spend its own budget."""
    cores: int = 1
    """CPU cores each candidate REPL may run on (its affinity: worker i gets its own ``cores``)."""

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "off", *SANDBOX_KINDS):
            raise ValueError(f"sandbox.kind must be auto, off, bwrap, landrun or unshare; got {self.kind!r}")
        for name in ("memory_limit_mb", "cpu_limit_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"sandbox.{name} must be positive or null, got {value}")
        if self.tmp_limit_mb <= 0 or self.cores < 1:
            raise ValueError(
                f"sandbox.tmp_limit_mb and sandbox.cores must be positive, got {self.tmp_limit_mb}, {self.cores}"
            )
        if self.memory_limit_mb is not None and self.address_space_mb() <= 0:
            raise ValueError(
                f"sandbox.memory_limit_mb={self.memory_limit_mb} leaves no address space beside the "
                f"private directories ({self.private_mb()} MiB)"
            )

    def private_mb(self) -> int:
        """MiB of the candidate's memory budget taken by its private (tmpfs) directories."""
        return self.tmp_limit_mb + SMALL_DIR_MB * len(PRIVATE_DIRS)  # /var/tmp, /dev/shm and HOME

    def address_space_mb(self) -> int | None:
        return None if self.memory_limit_mb is None else self.memory_limit_mb - self.private_mb()


class SandboxUnavailable(RuntimeError):
    """No sandbox tool works on this machine (the message says what was tried and how to fix it)."""


def node_memory_mb() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def budget_error(
    config: SandboxConfig, workers: int, node_mb: int | None = None, node_cores: int | None = None
) -> str | None:
    """Why ``workers`` candidate REPLs under ``config`` could exceed the machine (None: they fit):
    a candidate that takes its whole budget must never starve a neighbour."""
    node_mb = node_memory_mb() if node_mb is None else node_mb
    if config.memory_limit_mb is None:
        return "sandbox.memory_limit_mb is null: one candidate could take the whole machine's memory"
    if node_mb is not None and config.memory_limit_mb * workers > node_mb:
        return (
            f"{workers} workers x sandbox.memory_limit_mb {config.memory_limit_mb:,} MiB = "
            f"{config.memory_limit_mb * workers:,} MiB > this machine's {node_mb:,} MiB: lower workers or "
            f"memory_limit_mb"
        )
    cores = node_cores or os.cpu_count() or 1
    if config.cores * workers > cores:
        return (
            f"{workers} workers x sandbox.cores {config.cores} > this machine's {cores} cores: a candidate's "
            f"threads would share its neighbours' cores"
        )
    return None


def _limits(config: SandboxConfig, cpu_limit_s: int | None) -> str:
    lines = []
    address_space = config.address_space_mb()
    if address_space:
        lines.append(f"ulimit -v {int(address_space) * 1024}")
    if cpu_limit_s:
        lines.append(f"ulimit -t {int(cpu_limit_s)}")
    return "\n".join(lines)


def _env(private_tmp: str) -> str:
    """``env -i`` with the allow-listed variables of this process, and TMPDIR the private /tmp."""
    pairs = [f"{k}={os.environ[k]}" for k in ENV_ALLOW if k in os.environ] + [f"TMPDIR={private_tmp}"]
    return "env -i " + " ".join(shlex.quote(p) for p in pairs)


def _private_dirs() -> list[str]:
    home = os.path.realpath(os.path.expanduser("~"))
    dirs = [*PRIVATE_DIRS, *([home] if home not in ("/", *PRIVATE_DIRS) else [])]
    return [d for d in dirs if os.path.isdir(d)]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _command(
    kind: str,
    program: str,
    read_only: list[str],
    private: str = "",
    config: SandboxConfig | None = None,
    cpus: str = "",
) -> str:
    """The shell text that runs ``program "$@"`` confined by ``kind`` (``private``: a scratch mount
    point of the sandbox's own; ``cpus``: the cores the REPL may run on)."""
    config = config or SandboxConfig()
    pin = f"taskset -c {cpus} " if cpus and shutil.which("taskset") else ""
    env = _env("/tmp")
    run = f'{pin}{env} {shlex.quote(program)} "$@"'
    dirs = _private_dirs()
    sizes = {d: (config.tmp_limit_mb if d == "/tmp" else SMALL_DIR_MB) for d in dirs}
    if kind == "bwrap":
        # everything read-only; a private size-limited tmpfs over /tmp, /var/tmp, /dev/shm and HOME,
        # with the paths the REPL reads under them bound back read-only; no network, own PIDs
        mounts = "".join(f"--size {sizes[d] * 1024 * 1024} --tmpfs {shlex.quote(d)} " for d in dirs)
        back = "".join(
            f"--ro-bind {shlex.quote(p)} {shlex.quote(p)} " for p in read_only if any(_under(p, d) for d in dirs)
        )
        return (
            f"exec bwrap --ro-bind / / --dev /dev --proc /proc {mounts}{back}--unshare-net --unshare-ipc "
            f"--unshare-pid --die-with-parent --new-session -- {run}"
        )
    if kind == "landrun":
        return (
            'private=$(mktemp -d "${TMPDIR:-/tmp}/leanloop-candidate-XXXXXX") || exit 125\n'
            'landrun --rox / --rw "$private" --rw /dev/null --env PATH --env HOME --env LEAN_PATH '
            f'--env ELAN_HOME --env TMPDIR="$private" -- {pin}{shlex.quote(program)} "$@"\nstatus=$?\n'
            'rm -rf "$private"\nexit $status'
        )
    if kind == "unshare":
        binds = "".join(
            f"mount --bind {shlex.quote(p)} {shlex.quote(p)} && mount -o remount,bind,ro {shlex.quote(p)} && "
            for p in read_only
        )
        # each private dir: a size-limited tmpfs built at the scratch point, the paths the REPL
        # reads under it bound back read-only, then moved over the dir (so /tmp goes last)
        privates = ""
        for d in sorted(dirs, key=lambda d: d == "/tmp"):
            scratch = shlex.quote(private)
            privates += f"mount -t tmpfs -o size={sizes[d]}m,mode=1777 tmpfs {scratch} && "
            for p in read_only:
                if _under(p, d):
                    inside = shlex.quote(private + p[len(d.rstrip("/")) :])
                    privates += (
                        f"mkdir -p {inside} && mount --bind {shlex.quote(p)} {inside} && "
                        f"mount -o remount,bind,ro {inside} && "
                    )
            privates += f"mount --move {scratch} {shlex.quote(d)} && "
        inner = binds + privates + f"exec {run}"
        return (
            "exec unshare --user --map-root-user --mount --net --ipc --pid --fork --kill-child --mount-proc "
            f'-- sh -c {shlex.quote(inner)} sh "$@"'
        )
    return f"exec {run}"


class Sandbox:
    """One chosen confinement: wraps a ``lake`` (lean-interact runs ``lake env <repl>``) in a
    launcher that sets the resource limits and starts it inside the sandbox."""

    def __init__(
        self, kind: str, config: SandboxConfig, read_only: list[str] | None = None, cpu_limit_s: int | None = None
    ):
        self.kind = kind  # bwrap / landrun / unshare / off
        self.config = config
        self.cpu_limit_s = config.cpu_limit_s or cpu_limit_s
        self.read_only = [str(Path(p).resolve()) for p in (read_only or []) if Path(p).exists()]
        self._dir = tempfile.TemporaryDirectory(prefix="leanloop-sandbox-")
        self._wrapped: dict[tuple[str, int | None], str] = {}
        self._lock = threading.Lock()

    @property
    def strong(self) -> bool:
        """Private /tmp, /var/tmp, /dev/shm and HOME, the environment allow-list and a PID namespace."""
        return self.kind in STRONG_KINDS

    def __repr__(self) -> str:
        limits = (
            f"memory_limit_mb={self.config.memory_limit_mb}, tmp_limit_mb={self.config.tmp_limit_mb}, "
            f"cpu_limit_s={self.cpu_limit_s}, cores={self.config.cores}"
        )
        return f"Sandbox({self.kind}, {limits})"

    def manifest(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "strong": self.strong,
            "memory_limit_mb": self.config.memory_limit_mb,
            "tmp_limit_mb": self.config.tmp_limit_mb,
            "cpu_limit_s": self.cpu_limit_s,
            "cores": self.config.cores,
        }

    def _cpus(self, slot: int | None) -> str:
        if slot is None:
            return ""
        total = os.cpu_count() or 1
        first = (slot * self.config.cores) % total
        return ",".join(str((first + k) % total) for k in range(min(self.config.cores, total)))

    def launcher(self, program: str, slot: int | None = None) -> str:
        """A script running ``program "$@"`` under the limits, inside the sandbox (``slot``: the
        worker's index, which picks the cores it runs on)."""
        with self._lock:
            if (program, slot) not in self._wrapped:
                path = Path(self._dir.name) / f"launch-{len(self._wrapped)}"
                visible = [*self.read_only, str(Path(program).resolve().parent), os.getcwd()]
                private = Path(self._dir.name) / "private"  # an empty mount point; each REPL's tmpfs is its own
                private.mkdir(exist_ok=True)
                path.write_text(
                    "#!/bin/sh\n"
                    + _limits(self.config, self.cpu_limit_s)
                    + "\n"
                    + _command(
                        self.kind, program, list(dict.fromkeys(visible)), str(private), self.config, self._cpus(slot)
                    )
                    + "\n"
                )
                path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                self._wrapped[(program, slot)] = str(path)
            return self._wrapped[(program, slot)]

    def repl_config(self, repl_config: Any, slot: int | None = None) -> Any:
        """A shallow copy of a lean-interact ``LeanREPLConfig`` whose REPL starts confined (a copy,
        not a new config: building one would set the project up again)."""
        import copy

        clone = copy.copy(repl_config)
        clone.lake_path = Path(self.launcher(_resolve(str(repl_config.lake_path)), slot))
        return clone

    def run(self, argv: list[str], timeout: float = 30.0, slot: int | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.launcher(argv[0], slot), *argv[1:]], capture_output=True, text=True, timeout=timeout
        )


def _resolve(program: str) -> str:
    found = shutil.which(program)
    return str(Path(found).resolve()) if found else program


_PROBE = (
    'touch "$1/escaped" 2>/dev/null && echo WROTE_READ_ONLY; '
    'echo ok > "${TMPDIR:-/tmp}/leanloop-probe" && echo PRIVATE_TMP_OK; '
    'n=$(grep -c : /proc/net/dev); grep -q "^ *lo:" /proc/net/dev && n=$((n-1)); echo "NET_IFACES=$n"'
)


# what a strong sandbox must show a candidate: a channel file left by an earlier candidate in any
# private dir is gone, the trainer's environment beyond the allow-list is not there, and few
# processes are visible: its PID namespace is not the trainer's (the count of visible processes
# depends on the mechanism: bwrap keeps an init of its own)
_STRONG_PROBE = (
    'for d in /tmp /var/tmp /dev/shm "$HOME"; do [ -e "$d/leanloop-channel" ] && echo "CHANNEL=$d"; '
    'echo x > "$d/leanloop-channel" 2>/dev/null; done; '
    '[ -n "$LEANLOOP_PROBE_SECRET" ] && echo ENV_LEAKED; '
    'echo "PIDS=$(ls /proc | grep -c "^[0-9]") PIDNS=$(readlink /proc/self/ns/pid)"'
)


def strength(sandbox: "Sandbox") -> str | None:
    """None when ``sandbox`` gives what a strong one must (run twice: the second run must not see
    the first's files), else what is missing."""
    env = {**os.environ, "LEANLOOP_PROBE_SECRET": "1"}
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sandbox.launcher("sh"), "-c", _STRONG_PROBE], capture_output=True, text=True, timeout=30, env=env
        )
        outputs.append(done.stdout + done.stderr)
    text = outputs[1]
    if "CHANNEL=" in text:
        return f"a later candidate sees an earlier one's files ({text.split('CHANNEL=')[1].split()[0]})"
    if "ENV_LEAKED" in text:
        return "the trainer's environment reaches the candidate"
    pids = re.search(r"PIDS=(\d+) PIDNS=(\S*)", text)
    if pids is None or pids.group(2) in ("", os.readlink("/proc/self/ns/pid")):
        return f"no PID namespace (it sees {pids.group(1) if pids else '?'} processes)"
    return None


def probe(kind: str, config: SandboxConfig) -> str | None:
    """None when ``kind`` confines as required on this machine, else why not (``bwrap`` and
    ``unshare`` must also be strong: ``strength``)."""
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
        weak = strength(sandbox) if kind in STRONG_KINDS else None
        if weak is not None:
            return f"{tool} ran but {weak}"
    return None


def choose_sandbox(
    config: SandboxConfig, read_only: list[str] | None = None, cpu_limit_s: int | None = None
) -> Sandbox:
    """The sandbox ``config`` asks for, probed now; raises SandboxUnavailable with what was tried.
    ``auto`` takes the first strong one (bwrap, unshare), else landrun."""
    if config.kind == "off":
        log.warning(
            "sandbox.kind=off: candidate REPLs run unconfined (only resource limits apply); a candidate's "
            "elaboration-time code can write the project, the toolchain and the header pickle"
        )
        return Sandbox("off", config, read_only, cpu_limit_s)
    kinds = ("bwrap", "unshare", "landrun") if config.kind == "auto" else (config.kind,)
    failures = []
    for kind in kinds:
        why = probe(kind, config)
        if why is None:
            return Sandbox(kind, config, read_only, cpu_limit_s)
        failures.append(f"{kind}: {why}")
    raise SandboxUnavailable(
        "no sandbox for the candidate REPLs works on this machine (" + "; ".join(failures) + "). Install "
        "bubblewrap (`apt-get install bubblewrap`) or landrun, or allow unprivileged user namespaces; or set "
        "backend.local.sandbox.kind: off to run unconfined (not for RL rewards)"
    )


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


__all__ = [
    "SANDBOX_KINDS",
    "STRONG_KINDS",
    "Sandbox",
    "SandboxConfig",
    "SandboxUnavailable",
    "budget_error",
    "checked_pickle",
    "choose_sandbox",
    "file_hash",
    "probe",
    "strength",
]
