"""The real Kimina Lean Server (``kimina-ast-server`` from PyPI) with the stand-in REPL behind it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal

from leanloop.paths import REPO_ROOT, resolve_shared

VENV = REPO_ROOT / ".venv-kimina"
PINS = ("kimina-ast-server==2.1.3", "fastapi==0.124.4")
STAMP = ".installed"
LEAN_VERSION = "v4.15.0"  # what the shipped /verify replies were recorded with (shared data README)

_PRISMA_STUB = '''"""Stub of the Prisma client: the Kimina server imports it at start; without
LEAN_SERVER_DATABASE_URL it never connects (see leanloop.lean.standins.real_kimina)."""


class Prisma:
    async def connect(self):
        raise RuntimeError("no database in this arrangement")

    async def disconnect(self):
        pass
'''
# Python 3.11: pydantic refuses typing.TypedDict in kimina_client's models below 3.12
_SITECUSTOMIZE = "import typing\nimport typing_extensions\n\ntyping.TypedDict = typing_extensions.TypedDict\n"

_DERIVE = r"""
import json, sys
from server.split import split_snippet  # the server's own split: the commands it really sends

pairs, out, version = sys.argv[1], sys.argv[2], sys.argv[3]
with open(pairs, encoding="utf-8") as rows, open(out, "a", encoding="utf-8") as sessions:
    for line in rows:
        if not line.strip():
            continue
        row = json.loads(line)
        result = row["server_response"]["results"][0]
        header, body = split_snippet(row["code"])
        reply = dict(result.get("response") or {})
        reply.pop("time", None)  # the server's own stopwatch, not the REPL's
        error = str(result.get("error") or "")
        if error or not header.strip():
            kind = ("timeout" if "timed out" in error else "other_error") if error else "no_header"
            sessions.write(json.dumps({"kind": kind, "body": body}) + "\n")
            continue
        sessions.write(json.dumps({
            "kind": "session", "lean_toolchain": "leanprover/lean4:" + version, "test": row["id"],
            "inputs": [{"cmd": header}, {"cmd": body, "env": 0}],
            "outputs": [{"env": 0}, reply]}, ensure_ascii=False) + "\n")
"""


# --- the venv -------------------------------------------------------------------------------------


def _python_at_least_3_12() -> str | None:
    """An interpreter >= 3.12 if this machine has one (PATH, then pyenv's versions)."""
    candidates = [shutil.which(n) for n in ("python3.13", "python3.12")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob("3.1[2-9]*/bin/python3")) if pyenv.is_dir() else []
    for candidate in filter(None, candidates):
        try:  # pyenv shims exist for versions that are not selected: ask, do not trust the name
            done = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout.strip() == "True":
            return candidate
    return None


def venv_python(venv: Path = VENV) -> Path:
    return Path(venv) / "bin" / "python"


def installed(venv: Path = VENV) -> bool:
    stamp = Path(venv) / STAMP
    return stamp.is_file() and stamp.read_text().split() == list(PINS) and venv_python(venv).exists()


def setup(venv: Path = VENV) -> Path:
    """Create the server's venv once; a second call with the same pins returns at once."""
    venv = Path(venv)
    if installed(venv):
        return venv
    base = _python_at_least_3_12() or sys.executable
    print(f"[kimina] creating {venv} with {base} for {' '.join(PINS)}", file=sys.stderr)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "-q", *PINS], check=True)
    stubs = venv / "stubs" / "prisma"
    stubs.mkdir(parents=True, exist_ok=True)
    (stubs / "__init__.py").write_text(_PRISMA_STUB)
    version = subprocess.run(
        [str(venv_python(venv)), "-c", "import sys; print(sys.version_info[:2] >= (3, 12))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if version != "True":
        (venv / "stubs" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    (venv / STAMP).write_text("\n".join(PINS) + "\n")
    return venv


# --- recordings the server can replay ------------------------------------------------------------


def derive_repl_sessions(
    out: Path, pairs: Iterable[str] = ("shared://lean_repl/kimina_match_pairs.jsonl",), venv: Path = VENV
) -> tuple[Path, list[str]]:
    """REPL sessions (``repl_io_pairs`` format) for the stand-in REPL, and the bodies whose recorded
    reply is a timeout (to be answered by a ``hang`` fault). Left out: header-less recordings (the
    server sends them without a header command; the shipped ones all have one) and other recorded
    server errors (nothing at the REPL level reproduces them; the shipped ones are all timeouts)."""
    out = Path(out)
    sessions = out.with_suffix(".all.jsonl")
    sessions.unlink(missing_ok=True)
    for path in pairs:
        subprocess.run(
            [str(venv_python(venv)), "-c", _DERIVE, str(resolve_shared(path)), str(sessions), LEAN_VERSION],
            check=True,
            env=_server_env({}, venv),
            cwd=tempfile.gettempdir(),
        )
    timeouts, kept = [], []
    for line in sessions.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["kind"] == "timeout":
            timeouts.append(row["body"])
        elif row["kind"] == "session":
            kept.append(line)
    out.write_text("\n".join(kept) + "\n", encoding="utf-8")
    sessions.unlink()
    return out, timeouts


# --- the server -----------------------------------------------------------------------------------


def _server_env(settings: dict[str, str], venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEAN_SERVER_", "PYTHON"))}
    env["PYTHONPATH"] = str(Path(venv) / "stubs")
    env["PYTHONUNBUFFERED"] = "1"  # the log file is read while the server runs
    env.update(settings)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RealKiminaServer:
    """``kimina-ast-server`` on 127.0.0.1 over a stand-in REPL directory
    (``leanloop.lean.standins.repl.prepare_repl_dir``). ``stop()`` ends exactly what ``start()``
    started: the server process and every REPL worker the fake ``lake`` launched for it."""

    def __init__(
        self,
        repl_dir: Path,
        work_dir: Path,
        venv: Path = VENV,
        max_repls: int = 2,
        max_repl_uses: int = -1,
        api_key: str | None = None,
        log: Path | None = None,
    ):
        self.repl_dir, self.work_dir, self.venv = Path(repl_dir), Path(work_dir), Path(venv)
        self.api_key = api_key
        self.max_repls, self.max_repl_uses = max_repls, max_repl_uses
        self.log_path = log or self.work_dir / "server.log"
        self.process: subprocess.Popen | None = None
        self.url = ""

    @property
    def worker_pids_file(self) -> Path:
        return self.work_dir / "repl-workers.pids"

    def _fake_lake(self) -> Path:
        """``lake`` on PATH: records each worker's pid (``exec`` keeps it), then ``lake env CMD`` -> CMD."""
        bin_dir = self.work_dir / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        lake = bin_dir / "lake"
        lake.write_text(f'#!/bin/sh\necho $$ >> "{self.worker_pids_file}"\nexec "{self.repl_dir / "lake"}" "$@"\n')
        lake.chmod(0o755)
        return bin_dir

    def start(self, timeout: float = 60.0) -> str:
        port = _free_port()
        project = self.work_dir / "project"  # the server's cwd for workers: an empty "Mathlib project"
        project.mkdir(parents=True, exist_ok=True)
        clean = self.work_dir / "cwd"  # settings also read ./.env: start from a folder without one
        clean.mkdir(parents=True, exist_ok=True)
        env = _server_env(
            {
                "LEAN_SERVER_HOST": "127.0.0.1",
                "LEAN_SERVER_PORT": str(port),
                "LEAN_SERVER_REPL_PATH": str(self.repl_dir / ".lake" / "build" / "bin" / "repl"),
                "LEAN_SERVER_PROJECT_DIR": str(project),
                "LEAN_SERVER_MAX_REPLS": str(self.max_repls),
                "LEAN_SERVER_MAX_REPL_USES": str(self.max_repl_uses),
                "LEAN_SERVER_MAX_REPL_MEM": "2G",
                "LEAN_SERVER_SKIP_VALIDATION": "1",
                "LEAN_SERVER_ENVIRONMENT": "prod",
                "LEAN_SERVER_LEAN_VERSION": LEAN_VERSION,
            },
            self.venv,
        )
        if self.api_key:
            env["LEAN_SERVER_API_KEY"] = self.api_key
        env["PATH"] = f"{self._fake_lake()}{os.pathsep}{env.get('PATH', '')}"
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [str(self.venv / "bin" / "kimina-ast-server")],
            cwd=clean,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kimina-ast-server exited with {self.process.returncode}; log: {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as reply:
                    if reply.status == 200:
                        return self.url
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"kimina-ast-server did not answer /health within {timeout:g}s; log: {self.log_path}")

    def worker_pids(self) -> list[int]:
        if not self.worker_pids_file.exists():
            return []
        return [int(p) for p in self.worker_pids_file.read_text().split()]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown closes its REPLs
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session (start_new_session)
                self.process.wait()
        repl = str(Path(__file__).with_name("repl.py"))
        for pid in self.worker_pids():  # workers run under setsid: not in the server's group
            try:  # only if that pid is still our stand-in REPL (pids are reused)
                if repl in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass
        self.process = None
        if getattr(self, "_log", None):
            self._log.close()


@dataclass
class SetupConfig:
    """``python -m leanloop.lean.standins.real_kimina setup [--venv DIR]``."""

    command: Literal["setup"]
    """``setup``: create the server's venv (idempotent, fast when done)."""
    venv: str = str(VENV)
    """Where the server's venv goes."""


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config

    args, _ = parse_config(
        SetupConfig,
        argv,
        prog="python -m leanloop.lean.standins.real_kimina",
        description=__doc__.splitlines()[0],
        positional=("command",),
    )
    try:
        setup(Path(args.venv))
    except subprocess.CalledProcessError as exc:
        print(
            f"[kimina] could not create {args.venv}: {exc}. It needs PyPI (or a mirror) once; without it "
            "the real-server tests skip (run pytest directly).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m leanloop.lean.standins.real_kimina"))
