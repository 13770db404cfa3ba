"""One Lean REPL session: the owner of one lean-interact REPL process, used by the Verifier's local
pool (:mod:`leanloop.lean.local`), search's proof-state environment (``search.repl_env``) and prm's
tactic-by-tactic checker (``prm.labels_from_lean``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from leanloop.lean.line_shift import header_line_counts
from leanloop.lean.replies import no_answer_status
from leanloop.lean.types import ResponseStatus

log = logging.getLogger(__name__)

# how the REPL words an exception it caught while elaborating the request's own text (repl test
# "unknown_tactic": {"message": "Lean error:\n<input>:1:1: unknown tactic"})
LEAN_ERROR_PREFIX = "Lean error"


@dataclass
class SessionConfig:
    """One Lean REPL session's options: set-up, limits, retries. See README "Lean backends"."""

    lean_version: str = "v4.15.0"  # Lean toolchain; the seed corpus's version
    project_dir: str | None = None  # an existing Lean project with Mathlib built (its toolchain wins)
    require_mathlib: bool = True  # without project_dir: a lean-interact temporary project requiring Mathlib
    mathlib_rev: str | None = None  # Mathlib git revision for that project; default: the tag == lean_version
    repl_path: str | None = None  # a local (already built) REPL checkout instead of lean-interact's download
    build_repl: bool = True  # run `lake build` in the REPL checkout at start-up
    lake_path: str = "lake"
    cache_dir: str | None = None  # lean-interact's cache of REPL checkouts / temporary projects
    timeout: float = 60.0  # per request (a program, a statement, a tactic), seconds, when the caller gives none
    header_timeout: float = 600.0  # elaborating an import header (Mathlib takes a while on a cold cache)
    memory_limit_mb: int | None = None  # hard cap per REPL process (RLIMIT_AS); None = no cap
    max_process_memory: float = 0.8  # restart a REPL above this fraction of memory_limit_mb
    max_total_memory: float = 0.8  # restart a REPL when the machine is above this fraction of memory
    crash_retries: int = 1  # re-runs of a command after its REPL crashed, before giving up
    # lean-interact's `Elab.async` option on commands; None: on from Lean v4.19, where it exists
    parallel_elaboration: bool | None = None
    verbose: bool = False


def split_header(program: str) -> tuple[str, str, int]:
    """(header, body, lines before the body). The header is the leading ``import`` lines (blank
    lines between them allowed), one import per line; the body is everything after, verbatim. A
    program with no imports, or nothing but imports, has no header: it is compiled whole."""
    lines = program.split("\n")
    count = header_line_counts(program)[1]
    imports = [line.strip() for line in lines[:count] if line.strip()]
    body = "\n".join(lines[count:])
    if not imports or not body.strip():
        return "", program, 0
    return "\n".join(imports), body, count


_PROOF_START = re.compile(r":=\s*(?:by(?:\s+sorry)?)?\s*$")


def by_sorry(statement: str) -> str:
    """``statement`` as the command ``<statement> := by sorry``, whose ``sorry`` is the proof state
    that proof-state mode starts from. Accepts the statement as it is given: ending in ``:=``,
    ``:= by``, ``:= by sorry`` (spaces or line breaks between them) or before its ``:=``."""
    return _PROOF_START.sub("", statement.rstrip()).rstrip() + " := by sorry"


def _version_tuple(version: str | None) -> tuple[int, ...]:
    digits = []
    for part in (version or "").lstrip("v").split("-")[0].split("."):
        if not part.isdigit():
            return ()
        digits.append(int(part))
    return tuple(digits)


def build_repl_config(config: SessionConfig) -> Any:
    """The lean-interact ``LeanREPLConfig`` for ``config`` (may fetch and build the REPL / Mathlib)."""
    from lean_interact import LeanREPLConfig, LocalProject, TempRequireProject
    from lean_interact.project import LeanRequire

    cfg = config
    project = None
    if cfg.project_dir:
        project = LocalProject(directory=cfg.project_dir, lake_path=cfg.lake_path, auto_build=cfg.build_repl)
    elif cfg.require_mathlib:
        require: Any = (
            "mathlib"
            if cfg.mathlib_rev is None
            else LeanRequire("mathlib", "https://github.com/leanprover-community/mathlib4.git", cfg.mathlib_rev)
        )
        project = TempRequireProject(lean_version=cfg.lean_version, require=require, lake_path=cfg.lake_path)
    version = cfg.lean_version if project is None else None
    parallel = cfg.parallel_elaboration
    if parallel is None:  # Elab.async only exists from Lean v4.19; older REPLs must not be sent the option
        parallel = _version_tuple(cfg.lean_version) >= (4, 19)
    options: dict[str, Any] = dict(
        project=project,
        lean_version=version,
        lake_path=cfg.lake_path,
        build_repl=cfg.build_repl,
        memory_hard_limit_mb=cfg.memory_limit_mb,
        verbose=cfg.verbose,
        enable_parallel_elaboration=parallel,
    )
    if cfg.repl_path:
        options["local_repl_path"] = cfg.repl_path
    if cfg.cache_dir:
        options["cache_dir"] = cfg.cache_dir
    try:
        repl_config = LeanREPLConfig(**options)
    except Exception as error:
        raise RuntimeError(
            f"could not set up lean-interact for Lean {cfg.lean_version} ({type(error).__name__}: {error}). "
            "The local backend needs a Lean toolchain (elan + lake on PATH or lake_path) and, for Mathlib, "
            "a project: see README 'Lean backends' (project_dir, repl_path, lean_version)"
        ) from error
    if project is not None and cfg.lean_version and repl_config.lean_version != cfg.lean_version:
        log.warning("Lean project uses %s, not the configured %s", repl_config.lean_version, cfg.lean_version)
    return repl_config


class ReplSetup:
    """``build_repl_config`` once, on first use, shared by every session of one backend."""

    def __init__(self, config: SessionConfig):
        self.config = config
        self._value: Any = None
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            if self._value is None:
                self._value = build_repl_config(self.config)
        return self._value


def launch_repl(repl_config: Any, config: SessionConfig, *, restarts: bool = True) -> Any:
    """Start one REPL process. ``restarts``: lean-interact's ``AutoLeanServer`` (memory guard,
    session cache, restarts on the next call after a death); else a plain ``LeanServer`` that lives
    and dies with one program. Every REPL that runs candidate code is started here."""
    if restarts:
        from lean_interact import AutoLeanServer

        return AutoLeanServer(
            repl_config, max_total_memory=config.max_total_memory, max_process_memory=config.max_process_memory
        )
    from lean_interact import LeanServer

    return LeanServer(repl_config)


def load_header_pickle(server: Any, path: str, timeout: float) -> Any:
    """Restore a pickled header environment in ``server`` (lean-interact's reply, a ``LeanError``
    when refused). The only place a header pickle is handed to a REPL."""
    from lean_interact.interface import UnpickleEnvironment

    return server.run(UnpickleEnvironment(unpickle_env_from=path), timeout=timeout)


def kill_process_tree(server: Any) -> None:
    """Kill a lean-interact server's process and its children without touching the server object
    (safe from another thread while one is blocked reading the process's reply)."""
    process = getattr(server, "_proc", None)
    if process is None:
        return
    import psutil

    try:
        parent = psutil.Process(process.pid)
        for victim in [*parent.children(recursive=True), parent]:
            victim.kill()
    except psutil.Error:
        pass


def refusal_status(message: str) -> ResponseStatus:
    """A REPL refusal that is no verdict: UNAVAILABLE (a stand-in without a recording) or
    INFRA_ERROR, never a timeout or the candidate's failure."""
    status = no_answer_status(message)
    return status if status is ResponseStatus.UNAVAILABLE else ResponseStatus.INFRA_ERROR


@dataclass
class Reply:
    """A session's answer to one request. ``OK``: Lean answered; ``answer`` is lean-interact's
    ``CommandResponse`` / ``ProofStepResponse``, or None with ``lean_error`` (the REPL's "Lean
    error" text: the request's own text failed). Any other status: Lean gave no verdict (``detail``
    says why). ``header_failed``: the answer is the import header's, which has errors."""

    status: ResponseStatus
    answer: Any = None
    lean_error: str | None = None
    detail: str = ""
    generation: int = 0  # the REPL process the answer's env / proof-state ids belong to
    time_s: float = 0.0
    header_failed: bool = False

    @property
    def ok(self) -> bool:
        return self.status is ResponseStatus.OK

    def errors(self) -> list[str]:
        """Lean's error texts in an OK reply: error messages, a "Lean error" refusal, a proof
        status of ``Error...`` (e.g. the kernel rejecting a term)."""
        if self.lean_error is not None:
            return [self.lean_error]
        if self.answer is None:
            return []
        found = [m.data for m in (self.answer.messages or []) if m.severity == "error"]
        status = str(getattr(self.answer, "proof_status", "") or "")
        if status.startswith("Error"):
            found.append(status)
        return found


class _Restarted(Exception):
    """The REPL process was replaced during a call whose request named a state of the old one."""


class _HeaderTimeout(Exception):
    pass


class LeanSession:
    """One REPL process, used by one thread at a time (``lock`` for callers that share it).

    ``repl_config``: a callable returning lean-interact's ``LeanREPLConfig`` (a :class:`ReplSetup`
    shared by a pool's sessions; default: built from ``config``). ``launcher``: how the process is
    started (default :func:`launch_repl`)."""

    def __init__(
        self,
        config: SessionConfig,
        repl_config: Callable[[], Any] | None = None,
        launcher: Callable[..., Any] = launch_repl,
    ):
        self.config = config
        self.repl_config = repl_config or ReplSetup(config)
        self.launcher = launcher
        self.server: Any = None
        self.generation = 0
        self.headers: dict[str, int] = {}  # header text -> lean-interact session-cache env id
        self.aborted = False  # set by abort(): the job in progress must not be retried
        self.sent_program = False  # the command's own text was sent in the current try
        self.lock = threading.RLock()
        self._process: Any = None  # the process the current generation's ids belong to

    # -- the process ------------------------------------------------------------------------------
    @property
    def lean_version(self) -> str | None:
        if self.server is not None:
            return self.server.lean_version
        return getattr(self.repl_config(), "lean_version", None)

    def boot(self) -> Reply | None:
        """Start the REPL if there is none. A bad set-up raises (a config error, see README); a REPL
        that will not start is an INFRA_ERROR reply for the request at hand."""
        if self.server is not None:
            return None
        repl_config = self.repl_config()
        try:
            self.server = self.launcher(repl_config, self.config)
        except Exception as error:
            return Reply(
                ResponseStatus.INFRA_ERROR,
                generation=self.generation,
                detail=f"the Lean REPL did not start: {type(error).__name__}: {str(error)[:500]}",
            )
        self._process = getattr(self.server, "_proc", None)
        return None

    def pid(self) -> int | None:
        process = getattr(self.server, "_proc", None) if self.server is not None else None
        return process.pid if process is not None and process.poll() is None else None

    def kill(self) -> None:
        """Stop the REPL from the session's own thread (or when no request runs). The next request
        starts a new process: a new generation."""
        if self.server is not None:
            try:
                self.server.kill()
            except Exception:  # already gone; kill is best effort by design
                pass
        self._new_generation()

    def abort(self) -> None:
        """Stop the REPL from another thread while a request may be blocked reading its reply.
        ``LeanServer.kill`` would reset the server's process handle under that reading thread, so
        this kills the process tree (``lake env`` and the ``repl`` it started) and lets the
        blocked read see end of file; lean-interact then cleans up in the session's thread."""
        self.aborted = True
        kill_process_tree(self.server)

    def close(self) -> None:
        self.kill()
        self.server = None
        self.headers.clear()

    def _new_generation(self) -> None:
        """The process the current ids belong to is gone (once per process, however many ways it died)."""
        if self._process is not None:
            self.generation += 1
        self._process = None

    def _call(self, request: Any, timeout: float, *, cache: bool = False, bound: bool = False) -> Any:
        """lean-interact's reply to ``request``. ``bound``: the request names a state of the current
        process (a proof state), so a reply from a process that replaced it during the call is
        meaningless (:class:`_Restarted`). Any failure raises after the generation moved on."""
        before = getattr(self.server, "_proc", None)
        if before is not None and self._process is not None and before is not self._process:
            self._new_generation()  # replaced between calls (e.g. a kill from another thread)
        try:
            reply = self.server.run(request, timeout=timeout, add_to_session_cache=cache)
        except BaseException:
            self._new_generation()
            raise
        after = getattr(self.server, "_proc", None)
        replaced = before is not None and after is not before
        if before is None or replaced:
            if replaced:
                log.warning(
                    "the Lean REPL was restarted during a request (lean-interact's memory guard or a "
                    "dead process); ids from before name nothing"
                )
                self._new_generation()
            self._process = after
            if replaced and bound:
                raise _Restarted("the REPL process was replaced during the request: its proof state is gone")
        return reply

    # -- one classification -----------------------------------------------------------------------
    def classify(self, reply: Any, time_s: float = 0.0) -> Reply:
        """lean-interact's reply (an answer or a ``LeanError``) as a :class:`Reply`."""
        from lean_interact.interface import LeanError

        if isinstance(reply, LeanError):
            message = reply.message
            if message.startswith(LEAN_ERROR_PREFIX):
                return Reply(ResponseStatus.OK, lean_error=message, generation=self.generation, time_s=time_s)
            return Reply(refusal_status(message), detail=message, generation=self.generation, time_s=time_s)
        return Reply(ResponseStatus.OK, answer=reply, generation=self.generation, time_s=time_s)

    # -- requests ---------------------------------------------------------------------------------
    def header_env(self, header: str) -> tuple[int | None, Reply | None]:
        """The env id of ``header`` (elaborated once per process, kept in the session cache), or
        (None, the reply that says why not): a refusal, or Lean's answer when the header has
        errors (``header_failed``; never cached)."""
        from lean_interact.interface import Command

        env = self.headers.get(header)
        if env is not None:
            return env, None
        try:
            raw = self._call(Command(cmd=header), self.config.header_timeout, cache=True)
        except TimeoutError as error:
            raise _HeaderTimeout(
                f"import header did not load within header_timeout={self.config.header_timeout:g}s: {error}"
            ) from error
        reply = self.classify(raw)
        if reply.lean_error is not None:  # not the candidate's text: the header is the trusted part
            return None, Reply(refusal_status(reply.lean_error), detail=reply.lean_error, generation=self.generation)
        if not reply.ok:
            return None, reply
        if reply.errors():  # e.g. an unknown module: Lean's own answer, and no environment to reuse
            self.server.remove_from_session_cache(raw.env)
            reply.header_failed = True
            return None, reply
        self.headers[header] = raw.env
        return raw.env, None

    def command(
        self, body: str, *, header: str = "", timeout: float | None = None, all_tactics: bool | None = None
    ) -> Reply:
        """Elaborate ``body`` in ``header``'s environment (a new one when no header). A crash,
        broken pipe or unparsable reply restarts the REPL and runs the command again, up to
        ``crash_retries`` times; after that it is ``CANDIDATE_FAILURE`` when the body itself was
        sent every time (code it runs at elaboration time can kill the process), else
        ``INFRA_ERROR``. A timeout after the body was sent is ``TIMEOUT``, before it (the header)
        ``INFRA_ERROR``."""
        from lean_interact.interface import Command

        timeout = self.config.timeout if timeout is None else float(timeout)
        self.aborted = False
        failures: list[str] = []
        with self.lock:
            while True:
                self.sent_program = False
                started = time.perf_counter()
                failed_boot = self.boot()
                if failed_boot is not None:
                    return failed_boot
                try:
                    env = None
                    if header:
                        env, failure = self.header_env(header)
                        if failure is not None:
                            return failure
                    self.sent_program = True
                    started = time.perf_counter()
                    raw = self._call(Command(cmd=body, env=env, all_tactics=all_tactics), timeout)
                    return self.classify(raw, time.perf_counter() - started)
                except _HeaderTimeout as error:
                    return Reply(ResponseStatus.INFRA_ERROR, detail=str(error), generation=self.generation)
                except TimeoutError as error:
                    return Reply(
                        ResponseStatus.TIMEOUT,
                        time_s=time.perf_counter() - started,
                        generation=self.generation,
                        detail=f"no reply within {timeout:g}s; the REPL was killed ({error})",
                    )
                except MemoryError as error:  # AutoLeanServer gave up restarting under memory pressure
                    self.kill()
                    return Reply(
                        ResponseStatus.INFRA_ERROR, detail=f"out of memory: {error}", generation=self.generation
                    )
                except Exception as error:  # crash, broken pipe, unparsable reply: restart and retry
                    failures.append(f"{type(error).__name__}: {str(error)[:300]}")
                    self.kill()  # a desynchronised REPL must not answer the next request
                    if self.aborted:
                        return Reply(ResponseStatus.INFRA_ERROR, detail="cancelled", generation=self.generation)
                    if len(failures) > self.config.crash_retries:
                        status = ResponseStatus.CANDIDATE_FAILURE if self.sent_program else ResponseStatus.INFRA_ERROR
                        return Reply(
                            status,
                            generation=self.generation,
                            detail=f"Lean REPL failed {len(failures)} times: " + " | ".join(failures),
                        )
                    log.warning("Lean REPL failed (%s); restarting and retrying", failures[-1])

    def step(self, proof_state: int, generation: int, tactic: str, timeout: float | None = None) -> Reply:
        """Run ``tactic`` on ``proof_state`` (of the process ``generation``). A proof state of an
        older process, or one whose process was replaced during the call, is ``INFRA_ERROR``; a
        timeout is ``TIMEOUT``; a crash is ``INFRA_ERROR`` (no retry: the proof state died with
        the process)."""
        from lean_interact.interface import ProofStep

        timeout = self.config.timeout if timeout is None else float(timeout)
        with self.lock:
            if generation != self.generation or self.server is None:
                return Reply(
                    ResponseStatus.INFRA_ERROR,
                    generation=self.generation,
                    detail=f"the REPL restarted since this proof state was made (generation "
                    f"{generation}, now {self.generation}): its proof state is gone",
                )
            started = time.perf_counter()
            try:
                raw = self._call(ProofStep(proof_state=proof_state, tactic=tactic), timeout, bound=True)
            except _Restarted as error:
                return Reply(ResponseStatus.INFRA_ERROR, detail=str(error), generation=self.generation)
            except TimeoutError as error:
                return Reply(
                    ResponseStatus.TIMEOUT,
                    detail=str(error),
                    generation=self.generation,
                    time_s=time.perf_counter() - started,
                )
            except Exception as error:  # crash, broken pipe, out of memory: the next call restarts it
                self.kill()
                return Reply(
                    ResponseStatus.INFRA_ERROR,
                    detail=f"{type(error).__name__}: {str(error)[:300]}",
                    generation=self.generation,
                )
            return self.classify(raw, time.perf_counter() - started)


def standin_session_config(directory: Any, config_class: type = SessionConfig, **options: Any) -> Any:
    """A config that drives a stand-in REPL directory (``standins.repl.prepare_repl_dir``) through
    lean-interact's real classes: its ``repl`` binary and ``lake`` shim, no Mathlib project."""
    from pathlib import Path

    root = Path(directory)
    return config_class(
        repl_path=str(root), lake_path=str(root / "lake"), build_repl=False, require_mathlib=False, **options
    )


__all__ = [
    "LEAN_ERROR_PREFIX",
    "LeanSession",
    "Reply",
    "ReplSetup",
    "SessionConfig",
    "build_repl_config",
    "by_sorry",
    "kill_process_tree",
    "launch_repl",
    "load_header_pickle",
    "refusal_status",
    "split_header",
    "standin_session_config",
]
