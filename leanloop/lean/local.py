"""``local``: a pool of lean-interact REPL workers on this machine."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import secrets
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from leanloop.lean.replies import NO_RECORDED_ANSWER, response_from_repl_reply
from leanloop.lean.reply_rows import messages_from_json
from leanloop.lean.sandbox import SandboxConfig, budget_error, checked_pickle, choose_sandbox
from leanloop.lean.session import (
    LeanSession,
    Reply,
    ReplSetup,
    SessionConfig,
    kill_process_tree,
    launch_repl,
    load_header_pickle,
    refusal_status,
    split_header,
    standin_session_config,
)
from leanloop.lean.types import LeanBackend, LeanResponse, ResponseStatus

log = logging.getLogger(__name__)

# fresh_process: after the program's reply, `#print "<PROBE_PREFIX><nonce>"` must come back as
# exactly one info message holding the nonce (the stand-in REPL knows this prefix: keep them equal)
PROBE_PREFIX = "leanloop-channel-probe-"
STANDIN_REFUSAL = "stand-in REPL: "  # how the stand-in REPL's own refusals start (standins/repl.py)
# prints the header environment's token table (Lean.Parser.getTokenTable) as one JSON array; run
# by the harness in a trusted REPL before any candidate code (acceptance.tokens)
TOKEN_TABLE_COMMAND = (
    "run_cmd do\n  let env ← Lean.getEnv\n  Lean.logInfo (Lean.toJson (Lean.Parser.getTokenTable env).values).compress"
)


@dataclass
class LocalBackendConfig(SessionConfig):
    """Options of the ``local`` backend: one :class:`SessionConfig` per worker (set-up, limits,
    retries) and the pool's own. See README "Lean backends"."""

    workers: int = 1  # REPL processes (each holds its own copy of the imported environment)
    reuse_header: bool = True  # elaborate the import header once per worker
    all_tactics: bool = True  # ask the REPL for tactic records (goals before each tactic)
    # one REPL process per program, header environment restored from a pickle (see module docstring)
    # None: the caller decides (the rl stage turns it on, everything else leaves it off)
    fresh_process: bool | None = None
    pickle_dir: str | None = None  # where header pickles are written (default: a temporary directory)
    header_pickles: dict[str, str] = field(default_factory=dict)  # header text -> pickle path to use for it
    # fresh_process: after the reply, stdin is closed and the REPL must exit within this many seconds
    # having written nothing more (else the reply read was not the REPL's last word: CANDIDATE_FAILURE)
    reply_drain_timeout: float = 10.0
    # fresh_process: the candidate's REPL runs in a sandbox with resource limits (leanloop.lean.sandbox)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)


def split_pickled_header(program: str) -> tuple[str, str, int]:
    """``(header, body, header_line_count)`` for ``fresh_process``: the header is the program's
    leading ``import`` and ``open`` lines (blank lines between them allowed; an ``open ... in``
    belongs to the next command and ends it), the part of the environment a pickle keeps."""
    lines = program.split("\n")
    count = 0
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("import ") or (
            stripped.startswith("open ") and not stripped.endswith(" in") and " in " not in stripped
        ):
            count = number + 1
        elif stripped:
            break
    kept = [line.strip() for line in lines[:count] if line.strip()]
    body = "\n".join(lines[count:])
    if not kept or not body.strip() or not kept[0].startswith("import "):
        return "", program, 0
    return "\n".join(kept), body, count


class HeaderPickles:
    """Header text -> the pickle file holding its environment, built once per backend (under a
    lock: workers wait for the first one to finish instead of building it twice)."""

    def __init__(self, directory: str | None, known: dict[str, str]):
        self._directory = directory
        self._known = dict(known)
        self._built: dict[str, str] = {}
        self._lock = threading.Lock()
        self._tmp: Any = None

    def path_for(self, header: str, build: Callable[[str, str], None]) -> str:
        with self._lock:
            if header not in self._built:
                path = self._known.get(header)
                if path is None:
                    import hashlib
                    import tempfile

                    if self._directory is None and self._tmp is None:
                        self._tmp = tempfile.TemporaryDirectory(prefix="leanloop-pickles-")
                    root = Path(self._directory or self._tmp.name)
                    root.mkdir(parents=True, exist_ok=True)
                    path = str(root / f"{hashlib.sha256(header.encode()).hexdigest()[:16]}.olean")
                build(header, path)  # raises _HeaderFailure
                self._built[header] = path
            return self._built[header]


class _Worker:
    """One pool slot, used by one thread at a time: a :class:`LeanSession` (one long-lived REPL), or
    with ``fresh_process`` a new REPL per program."""

    def __init__(
        self, repl_config: Callable[[], Any], config: LocalBackendConfig, pickles: HeaderPickles | None = None
    ):
        self._repl_config = repl_config
        self.config = config
        self.pickles = pickles
        self.session = LeanSession(config, repl_config)
        self.server: Any = None  # fresh_process: the process of the program in progress
        self.busy = False
        # trust hook (leanloop.lean.sandbox): the candidate REPL's config, confined; set by the backend
        self.confine: Callable[[Any], Any] = lambda repl_config: repl_config
        self.aborted = False  # fresh_process: set by abort(), the job in progress must not be retried
        self.sent_program = False  # fresh_process: the program's own command was sent in the current try

    def kill(self) -> None:
        """Stop the REPL from the worker's own thread (or when no job runs)."""
        if not self.config.fresh_process:
            self.session.kill()
        elif self.server is not None:
            try:
                self.server.kill()
            except Exception:  # already gone; kill is best effort by design
                pass

    def abort(self) -> None:
        """Stop the REPL from another thread while a job may be blocked reading its reply."""
        self.aborted = True
        if self.config.fresh_process:
            kill_process_tree(self.server)
        else:
            self.session.abort()

    def pid(self) -> int | None:
        if not self.config.fresh_process:
            return self.session.pid()
        process = getattr(self.server, "_proc", None) if self.server is not None else None
        return process.pid if process is not None and process.poll() is None else None

    def boot(self) -> Reply | None:
        """Start the REPL if there is none (fresh_process: a new REPL per program, none here)."""
        return None if self.config.fresh_process else self.session.boot()

    def check(self, program: str, timeout: float) -> LeanResponse:
        if self.config.fresh_process:
            return self._check_fresh(program, timeout)
        header, body, offset = split_header(program) if self.config.reuse_header else ("", program, 0)
        reply = self.session.command(body, header=header, timeout=timeout, all_tactics=self.config.all_tactics or None)
        return program_response(reply, offset, self.session.lean_version)

    def _check_fresh(self, program: str, timeout: float) -> LeanResponse:
        self.aborted = False
        header, body, offset = split_pickled_header(program)
        version = getattr(self._repl_config(), "lean_version", None)
        failures: list[str] = []
        ran = False  # the program ran in an earlier try of this job (and that try's REPL died)
        while True:
            started = time.perf_counter()
            try:
                response = self._compile_fresh(header, body, offset, timeout, version)
                if ran and response.status is ResponseStatus.INFRA_ERROR:
                    # the retry failed before its program ran, after the program had killed an
                    # earlier try: charged to the program, never to the infrastructure
                    response = dataclasses.replace(
                        response,
                        status=ResponseStatus.CANDIDATE_FAILURE,
                        detail=f"{response.detail} (after the program had killed an earlier try)",
                    )
                return response
            except TimeoutError as error:
                # before the program was sent (unpickling the header) the program never ran: the
                # infrastructure's, retryable, unless an earlier try ran it (its doing, charged to it)
                status = (
                    ResponseStatus.TIMEOUT
                    if self.sent_program
                    else ResponseStatus.CANDIDATE_FAILURE
                    if ran
                    else ResponseStatus.INFRA_ERROR
                )
                return LeanResponse(
                    status,
                    time_s=time.perf_counter() - started,
                    detail=f"no reply within {timeout:g}s; the REPL was killed ({error})"
                    + ("" if self.sent_program else " (before the program was sent)")
                    + (" after the program had killed an earlier try" if ran else ""),
                    lean_version=version,
                )
            except _HeaderFailure as error:
                status = (
                    ResponseStatus.CANDIDATE_FAILURE
                    if ran and error.status is ResponseStatus.INFRA_ERROR
                    else error.status
                )
                return LeanResponse(
                    status,
                    detail=str(error) + (" (after the program had killed an earlier try)" if ran else ""),
                    lean_version=version,
                )
            except Exception as error:  # crash, broken pipe, unparsable reply: a new process and retry
                failures.append(f"{type(error).__name__}: {str(error)[:300]}")
                ran = ran or self.sent_program
                if self.aborted:
                    return LeanResponse(ResponseStatus.INFRA_ERROR, detail="cancelled", lean_version=version)
                if len(failures) > self.config.crash_retries:
                    # Died or garbled AFTER the program was sent (every try): code the program runs at
                    # elaboration time can do that, so it is the program's failure; before it was sent
                    # (start-up, header) it is the infrastructure's and stays retryable.
                    status = ResponseStatus.CANDIDATE_FAILURE if ran else ResponseStatus.INFRA_ERROR
                    return LeanResponse(
                        status,
                        lean_version=version,
                        detail=f"Lean REPL failed {len(failures)} times: " + " | ".join(failures),
                    )
                log.warning("Lean REPL failed (%s); restarting and retrying", failures[-1])
            finally:  # nothing the program did survives it
                self.kill()
                self.server = None

    # -- fresh_process: one REPL per program ------------------------------------------------------
    def _build_pickle(self, header: str, path: str) -> None:
        """Elaborate ``header`` in a builder REPL (no candidate code ever runs there) and pickle it."""
        from lean_interact import LeanServer
        from lean_interact.interface import Command, LeanError, PickleEnvironment

        try:
            builder = LeanServer(self._repl_config())
        except Exception as error:
            raise _HeaderFailure(f"the Lean REPL did not start: {type(error).__name__}: {str(error)[:500]}") from error
        try:
            reply = builder.run(Command(cmd=header), timeout=self.config.header_timeout)
            if isinstance(reply, LeanError):
                raise _HeaderFailure(f"the header was refused: {reply.message}", refusal_status(reply.message))
            errors = [m for m in reply.messages if m.severity == "error"]
            if errors:
                raise _HeaderFailure(f"the header does not elaborate: {errors[0].data[:300]}")
            saved = builder.run(PickleEnvironment(env=reply.env, pickle_to=path), timeout=self.config.header_timeout)
            if isinstance(saved, LeanError):
                raise _HeaderFailure(
                    f"pickling the header environment failed: {saved.message}", refusal_status(saved.message)
                )
        except _HeaderFailure:
            raise
        except Exception as error:
            raise _HeaderFailure(
                f"building the header pickle failed: {type(error).__name__}: {str(error)[:300]}"
            ) from error
        finally:
            builder.kill()

    def _rest_of_channel(self) -> str | None:
        """Close the REPL's stdin and read what it writes until it exits: None when nothing (the
        reply read was its only one), else what came after it. Code the program ran can print a
        forged reply before the REPL's real one; the real one then arrives here, and only protocol
        replies matched to the request count."""
        process = getattr(self.server, "_proc", None)
        if process is None or process.stdout is None:
            return "no process"
        rest: list[str] = []
        # read through the same buffered file object lean-interact read from (a second reply may
        # already sit in its buffer), until end of file
        reader = threading.Thread(target=lambda: rest.append(process.stdout.read()), daemon=True)
        try:
            process.stdin.close()
        except (OSError, ValueError):
            pass
        reader.start()
        reader.join(self.config.reply_drain_timeout)
        if reader.is_alive():
            return f"the REPL kept running {self.config.reply_drain_timeout:g}s after its reply"
        text = rest[0] if rest else ""
        return f"{text.strip()[:300]!r}" if text and text.strip() else None

    def _probe_channel(self, env: int | None) -> str | None:
        """Send a command only this backend knows (a fresh nonce) and require exactly its reply: None
        when it came back, else what went wrong. Code the program ran can write a reply of its own
        to the REPL's stdout (lean-interact reads it as THE reply) and then exit, hang or go on: the
        probe then gets no reply, or the REPL's real reply to the program instead of its own."""
        from lean_interact.interface import Command, LeanError

        nonce = PROBE_PREFIX + secrets.token_hex(16)
        try:
            answer = self.server.run(Command(cmd=f'#print "{nonce}"', env=env), timeout=self.config.reply_drain_timeout)
        except Exception as error:  # dead, silent or garbled: lean-interact's reader raised
            return f"no reply to the channel probe ({type(error).__name__}: {str(error)[:200]})"
        messages = [] if isinstance(answer, LeanError) else answer.messages
        if len(messages) == 1 and messages[0].severity == "info" and messages[0].data == nonce:
            return None
        return f"the REPL's channel held more than one reply: the probe got {str(answer)[:300]!r}"

    def _compile_fresh(self, header: str, body: str, offset: int, timeout: float, version: str | None) -> LeanResponse:
        """One try in a new REPL process (``check`` kills it afterwards, whatever happened)."""
        from lean_interact.interface import Command, LeanError

        self.sent_program = False
        # trust hooks (leanloop.lean.sandbox): the pickle's hash is checked before it is unpickled,
        # and the candidate's REPL starts confined
        workdir = getattr(self._repl_config(), "working_dir", None)
        path = checked_pickle(self.pickles, header, self._build_pickle, workdir) if header and self.pickles else None
        self.server = launch_repl(self.confine(self._repl_config()), self.config, restarts=False)
        env = None
        if path is not None:
            restored = load_header_pickle(self.server, path, self.config.header_timeout)
            if isinstance(restored, LeanError):  # before the program: never the candidate's
                return LeanResponse(
                    refusal_status(restored.message),
                    lean_version=version,
                    detail=f"unpickling the header environment failed: {restored.message}",
                )
            env = restored.env
        self.sent_program = True
        started = time.perf_counter()
        reply = self.server.run(
            Command(cmd=body, env=env, all_tactics=self.config.all_tactics or None), timeout=timeout
        )
        elapsed = time.perf_counter() - started
        forged = self._probe_channel(env)
        if forged is not None:
            return LeanResponse(ResponseStatus.CANDIDATE_FAILURE, time_s=elapsed, lean_version=version, detail=forged)
        leftover = self._rest_of_channel()
        if leftover is not None:
            return LeanResponse(
                ResponseStatus.CANDIDATE_FAILURE,
                time_s=elapsed,
                lean_version=version,
                detail=f"the REPL's channel held more than one reply: {leftover}",
            )
        if isinstance(reply, LeanError):
            if reply.message.startswith(STANDIN_REFUSAL) and NO_RECORDED_ANSWER in reply.message:
                return response_from_repl_reply({"message": reply.message}, lean_version=version, time_s=elapsed)
            # a refusal after the program was sent (an exception its code threw out of the REPL's
            # command loop) is the program's doing: scored 0, never retried or judged verbatim
            return LeanResponse(
                ResponseStatus.CANDIDATE_FAILURE,
                time_s=elapsed,
                lean_version=version,
                detail=f"the REPL refused the program: {reply.message[:300]}",
            )
        return response_from_repl_reply(
            reply.model_dump(by_alias=True, exclude_none=True), line_offset=offset, lean_version=version, time_s=elapsed
        )


def program_response(reply: Reply, offset: int, version: str | None) -> LeanResponse:
    """A session's reply to a whole program as the Verifier's response; positions shifted by the
    ``offset`` header lines. A "Lean error" refusal of the program (an exception its elaboration
    threw out of the REPL's command loop) is the program's doing: CANDIDATE_FAILURE, scored 0 and
    never retried, as in ``fresh_process``."""
    if not reply.ok:
        return LeanResponse(reply.status, detail=reply.detail, time_s=reply.time_s, lean_version=version)
    if reply.lean_error is not None:
        return LeanResponse(
            ResponseStatus.CANDIDATE_FAILURE,
            time_s=reply.time_s,
            lean_version=version,
            detail=f"the REPL refused the program: {reply.lean_error[:300]}",
        )
    if reply.header_failed:  # the header's own messages, at the header's own lines
        return LeanResponse(
            ResponseStatus.OK,
            lean_version=version,
            messages=messages_from_json([m.model_dump(by_alias=True) for m in reply.answer.messages]),
        )
    return response_from_repl_reply(
        reply.answer.model_dump(by_alias=True, exclude_none=True),
        line_offset=offset,
        lean_version=version,
        time_s=reply.time_s,
    )


class _HeaderFailure(Exception):
    """The import header itself could not be elaborated in time: infrastructure, not the program
    (``status`` UNAVAILABLE when a stand-in REPL has no recording for it)."""

    def __init__(self, detail: str, status: ResponseStatus = ResponseStatus.INFRA_ERROR):
        super().__init__(detail)
        self.status = status


class LocalBackend(LeanBackend):
    """lean-interact pool. ``LocalBackend(LocalBackendConfig(workers=8, timeout=60))``."""

    name = "local"

    def __init__(self, config: LocalBackendConfig | None = None, **options: Any):
        if config is not None and options:
            raise TypeError("give either a LocalBackendConfig or keyword options, not both")
        self.config = config or LocalBackendConfig(**options)
        if self.config.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.config.workers}")
        self._setup = ReplSetup(self.config)
        pickles = (
            HeaderPickles(self.config.pickle_dir, self.config.header_pickles) if self.config.fresh_process else None
        )
        self._workers = [_Worker(self.repl_config, self.config, pickles) for _ in range(self.config.workers)]
        self._sandbox: Any = None
        self._sandbox_lock = threading.Lock()
        for slot, worker in enumerate(self._workers):  # trust hook (leanloop.lean.sandbox)
            worker.confine = functools.partial(self.confine, slot=slot)
        self._executor = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="lean-repl")
        # Idle workers wait in a queue of the running event loop. Worker threads hand a worker back
        # through `_release`, under `_pool_lock`, to whichever loop's queue is current.
        self._pool_lock = threading.Lock()
        self._idle: asyncio.Queue | None = None
        self._idle_loop: asyncio.AbstractEventLoop | None = None

    # -- set-up -----------------------------------------------------------------------------------
    def repl_config(self) -> Any:
        """The lean-interact ``LeanREPLConfig`` (built once: may fetch and build the REPL / Mathlib)."""
        return self._setup()

    def sandbox(self, repl_config: Any = None) -> Any:
        """The candidates' sandbox (``leanloop.lean.sandbox.Sandbox``), chosen and probed on first use;
        warns when the workers' budgets could exceed the machine (``sandbox.budget_error``)."""
        with self._sandbox_lock:
            if self._sandbox is None:
                why = budget_error(self.config.sandbox, self.config.workers)
                if why is not None:  # the rl stage refuses to start on it (GRPOModule._check_sandbox)
                    log.warning("backend.local: %s", why)
                repl_config = repl_config if repl_config is not None else self.repl_config()
                read_only = [
                    p
                    for p in (
                        getattr(repl_config, "working_dir", None),
                        self.config.project_dir,
                        self.config.repl_path,
                        self.config.pickle_dir,
                        self.config.cache_dir,
                        getattr(repl_config, "_cache_repl_dir", None),
                        os.path.expanduser("~/.elan"),
                        sys.prefix,
                        sys.base_prefix,
                    )
                    if p
                ]
                # CPU over all of a candidate's threads: its own proof's timeout on its own cores
                cpu = int(self.config.timeout * self.config.sandbox.cores) + 1
                self._sandbox = choose_sandbox(self.config.sandbox, read_only, cpu)
                log.info("candidate REPLs: %r", self._sandbox)
        return self._sandbox

    def confine(self, repl_config: Any, slot: int | None = None) -> Any:
        """``repl_config`` for a candidate's REPL: in the sandbox, under its resource limits, pinned
        to worker ``slot``'s cores (leanloop.lean.sandbox; a clear error when no sandbox works)."""
        return self.sandbox(repl_config).repl_config(repl_config, slot)

    def token_table(self, header: str) -> Any:
        """The token table of ``header``'s environment (``acceptance.tokens.TokenTable``), read in a
        trusted REPL that runs no candidate code; None when the REPL gives no such answer (the
        stand-in has no recording of it)."""
        import json

        from lean_interact import LeanServer
        from lean_interact.interface import Command, LeanError

        from leanloop.lean.acceptance.tokens import TokenTable

        try:
            reader = LeanServer(self.repl_config())
        except Exception as error:
            log.warning("token table: the Lean REPL did not start (%s)", error)
            return None
        try:
            reply = reader.run(
                Command(cmd=header.rstrip() + "\n\n" + TOKEN_TABLE_COMMAND), timeout=self.config.header_timeout
            )
        except Exception as error:
            log.warning("token table: no answer (%s: %s)", type(error).__name__, str(error)[:200])
            return None
        finally:
            reader.kill()
        if isinstance(reply, LeanError):
            return None
        for message in reply.messages:
            if message.severity == "info" and message.data.startswith("["):
                try:
                    tokens = json.loads(message.data)
                except ValueError:
                    continue
                if isinstance(tokens, list) and all(isinstance(t, str) for t in tokens):
                    return TokenTable.live(tokens)
        return None

    async def start(self) -> None:
        """Set up lean-interact and start every worker now rather than on the first programs."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.repl_config)
        failures = await asyncio.gather(*(loop.run_in_executor(self._executor, w.boot) for w in self._workers))
        for failure in failures:
            if failure is not None:
                raise RuntimeError(failure.detail)

    def worker_pids(self) -> list[int | None]:
        """Process ids of the live REPLs (None for a worker with no process): for monitoring."""
        return [worker.pid() for worker in self._workers]

    # -- running ----------------------------------------------------------------------------------
    def _queue(self) -> asyncio.Queue:
        loop = asyncio.get_running_loop()
        with self._pool_lock:
            if self._idle is None or self._idle_loop is not loop:  # a queue belongs to one event loop
                self._idle, self._idle_loop = asyncio.Queue(), loop
                for worker in self._workers:
                    if not worker.busy:
                        self._idle.put_nowait(worker)
            return self._idle

    def _release(self, worker: _Worker) -> None:
        """Called by the worker thread when its job ends (also after a cancelled run)."""
        with self._pool_lock:
            worker.busy = False
            queue, loop = self._idle, self._idle_loop
        if queue is not None and loop is not None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, worker)
            except RuntimeError:  # that loop is closed; the next loop's queue takes idle workers
                pass

    def _job(self, worker: _Worker, program: str, timeout: float) -> LeanResponse:
        try:
            return worker.check(program, timeout)
        finally:
            self._release(worker)

    def _watchdog(self, timeout: float) -> float:
        # lean-interact enforces `timeout`; this only catches a REPL stuck where it has no timeout
        # (re-elaborating a header after a restart), so it leaves room for that header.
        return timeout + self.config.header_timeout + 30.0

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        timeout = self.config.timeout if timeout is None else float(timeout)
        worker = await self._queue().get()
        worker.busy = True
        future = asyncio.get_running_loop().run_in_executor(self._executor, self._job, worker, program, timeout)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._watchdog(timeout))
        except TimeoutError:
            worker.abort()
            return LeanResponse(
                ResponseStatus.TIMEOUT,
                time_s=self._watchdog(timeout),
                detail="the REPL gave no reply and ignored its own timeout; killed by the watchdog",
            )
        except asyncio.CancelledError:
            worker.abort()  # unblocks the worker thread (its read hits end of file); it then frees the worker
            raise

    async def aclose(self) -> None:
        for worker in self._workers:
            worker.kill()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def __del__(self) -> None:
        for worker in getattr(self, "_workers", []):
            worker.kill()


def standin_config(directory: str | Path, **options: Any) -> LocalBackendConfig:
    """A config that drives a stand-in REPL directory (``standins.repl.prepare_repl_dir``) through
    lean-interact's real classes: its ``repl`` binary and ``lake`` shim, no Mathlib project."""
    return standin_session_config(directory, LocalBackendConfig, **options)


__all__ = [
    "HeaderPickles",
    "LocalBackend",
    "LocalBackendConfig",
    "SessionConfig",
    "program_response",
    "split_header",
    "split_pickled_header",
    "standin_config",
]
