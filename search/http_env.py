"""A pool of proof environments behind HTTP, so that search workers and Lean workers scale
separately (the pattern of the Kimina backend: CPU nodes run Lean, the search calls them).

Server: ``python -m search.http_env --workers 8 --port 12340 [--backend repl|replay ...]`` holds
``workers`` environments; a started theorem stays on the environment that started it (REPL proof
states belong to one process), new theorems go round-robin. Client: ``HttpEnv(url)`` is a
``ProofEnv``; ``apply_many`` sends concurrent requests.

Both sides are aiohttp (the Kimina client's HTTP stack too). Protocol (JSON over POST): ``/start
{"theorem"}`` and ``/apply {"goal": id, "tactic", "timeout"}`` both answer ``{"status", "goals":
[{"id", "text"}], "error", "time_s"}``; a malformed body is HTTP 400.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv
from search.goals import parse_state


class EnvPool:
    """Server side: environments, and which one holds each handed-out goal."""

    def __init__(self, envs: Sequence[ProofEnv]) -> None:
        if not envs:
            raise ValueError("an environment pool needs at least one environment")
        self.envs = list(envs)
        self.locks = [threading.Lock() for _ in self.envs]
        self.goals: dict[int, tuple[int, EnvGoal]] = {}
        self._ids = itertools.count()
        self._next = itertools.count()

    def _answer(self, env_index: int, result: EnvResult) -> dict[str, Any]:
        goals = []
        for goal in result.goals:
            goal_id = next(self._ids)
            self.goals[goal_id] = (env_index, goal)
            goals.append({"id": goal_id, "text": goal.text})
        return {"status": result.status.value, "goals": goals, "error": result.error, "time_s": result.time_s}

    def start(self, theorem: str) -> dict[str, Any]:
        index = next(self._next) % len(self.envs)
        with self.locks[index]:
            return self._answer(index, self.envs[index].start(theorem))

    def apply(self, goal_id: int, tactic: str, timeout: float | None) -> dict[str, Any]:
        if goal_id not in self.goals:
            return {
                "status": EnvStatus.INFRA_ERROR.value,
                "goals": [],
                "error": f"unknown goal id {goal_id}",
                "time_s": 0.0,
            }
        index, goal = self.goals[goal_id]
        with self.locks[index]:
            return self._answer(index, self.envs[index].apply(goal, tactic, timeout))


class _LoopThread:
    """An asyncio event loop on a daemon thread, for aiohttp beside the search's synchronous code."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)


class EnvServer:
    """``pool`` served over HTTP by aiohttp on its own event-loop thread; the environments' blocking
    calls run on worker threads (each environment answers one request at a time: ``EnvPool``'s locks).
    ``server_address``: (host, port) actually bound."""

    def __init__(self, pool: EnvPool, host: str = "127.0.0.1", port: int = 0) -> None:
        from aiohttp import web

        self.pool = pool
        self._executor = ThreadPoolExecutor(max(4, len(pool.envs)), thread_name_prefix="env-pool")
        self._loop = _LoopThread("env-pool-http")
        app = web.Application()
        app.add_routes([web.post("/start", self._start), web.post("/apply", self._apply)])
        self._runner = web.AppRunner(app, access_log=None)  # quiet: one line per tactic would flood logs

        async def start() -> tuple[str, int]:
            await self._runner.setup()
            site = web.TCPSite(self._runner, host, port)
            await site.start()
            return site._server.sockets[0].getsockname()[:2]

        try:
            self.server_address = self._loop.run(start())
        except BaseException:
            self._loop.stop()
            raise

    async def _answer(self, request: Any, call: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
        from aiohttp import web

        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            job = call(body)  # parses the arguments here: a bad request never reaches an environment
        except (KeyError, ValueError, TypeError) as error:
            return web.json_response({"error": f"bad request: {error}"}, status=400)
        answer = await asyncio.get_running_loop().run_in_executor(self._executor, job)
        return web.json_response(answer)

    async def _start(self, request: Any) -> Any:
        def parse(body: dict[str, Any]) -> Callable[[], dict[str, Any]]:
            theorem = str(body["theorem"])
            return lambda: self.pool.start(theorem)

        return await self._answer(request, parse)

    async def _apply(self, request: Any) -> Any:
        def parse(body: dict[str, Any]) -> Callable[[], dict[str, Any]]:
            goal, tactic, timeout = int(body["goal"]), str(body["tactic"]), body.get("timeout")
            timeout = None if timeout is None else float(timeout)
            return lambda: self.pool.apply(goal, tactic, timeout)

        return await self._answer(request, parse)

    def shutdown(self) -> None:
        try:
            self._loop.run(self._runner.cleanup(), timeout=10)
        finally:
            self._loop.stop()
            self._executor.shutdown(wait=False, cancel_futures=True)


def serve(pool: EnvPool, host: str = "127.0.0.1", port: int = 0) -> EnvServer:
    """Start serving in a daemon thread; ``server.server_address`` has the port."""
    return EnvServer(pool, host, port)


@dataclass
class HttpEnvConfig:
    url: str = "http://127.0.0.1:12340"
    timeout: float = 60.0  # per tactic, enforced by the server's environment
    http_slack_s: float = 30.0  # the HTTP deadline: timeout + this
    max_concurrent_requests: int = 8
    retries: int = 2  # re-sends after a refused / dropped connection


class HttpEnv(ProofEnv):
    """Client: aiohttp on an event-loop thread of its own; ``apply_many`` sends its requests
    concurrently (at most ``max_concurrent_requests`` at a time)."""

    name = "http"

    def __init__(self, config: HttpEnvConfig | None = None) -> None:
        super().__init__()
        self.config = config or HttpEnvConfig()
        self._loop = _LoopThread("http-env-client")
        self._session: Any = None
        self._gate: asyncio.Semaphore | None = None

    async def _post(self, path: str, body: dict[str, Any], timeout: float | None) -> EnvResult:
        import aiohttp

        if self._session is None:  # created on the client's own loop, which it belongs to
            self._session = aiohttp.ClientSession()
            self._gate = asyncio.Semaphore(self.config.max_concurrent_requests)
        deadline = (timeout or self.config.timeout) + self.config.http_slack_s
        url = self.config.url.rstrip("/") + path
        error = ""
        async with self._gate:
            for _ in range(self.config.retries + 1):
                try:
                    async with self._session.post(
                        url, json=body, timeout=aiohttp.ClientTimeout(total=deadline)
                    ) as reply:
                        reply.raise_for_status()
                        answer = await reply.json()
                    break
                except TimeoutError:
                    return EnvResult(EnvStatus.TIMEOUT, error=f"no HTTP reply within {deadline:g}s")
                except (aiohttp.ClientError, ConnectionError, ValueError) as exc:
                    error = f"{type(exc).__name__}: {exc}"
            else:
                return EnvResult(EnvStatus.INFRA_ERROR, error=error)
        goals = [EnvGoal(tuple(parse_state(g["text"])), g["id"]) for g in answer.get("goals", [])]
        return EnvResult(EnvStatus(answer["status"]), goals, answer.get("error", ""), float(answer.get("time_s", 0)))

    def _start(self, theorem: str) -> EnvResult:
        return self._loop.run(self._post("/start", {"theorem": theorem}, None))

    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        return self._loop.run(self._apply_async(goal, tactic, timeout))

    async def _apply_async(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        return await self._post("/apply", {"goal": goal.handle, "tactic": tactic, "timeout": timeout}, timeout)

    def apply_many(self, items: Sequence[tuple[EnvGoal, str]], timeout: float | None = None) -> list[EnvResult]:
        async def timed(goal: EnvGoal, tactic: str) -> tuple[EnvResult, float]:
            started = time.perf_counter()
            result = await self._apply_async(goal, tactic, timeout)
            return result, time.perf_counter() - started

        async def all_of() -> list[tuple[EnvResult, float]]:
            return await asyncio.gather(*(timed(goal, tactic) for goal, tactic in items))

        out = []
        for result, elapsed in self._loop.run(all_of()):  # each counted and timed as apply() does
            self.calls += 1
            self.time_s += elapsed
            result.time_s = result.time_s or elapsed
            out.append(result)
        return out

    def close(self) -> None:
        if self._session is not None:
            self._loop.run(self._session.close(), timeout=10)
            self._session = None
        self._loop.stop()


@dataclass
class ServeConfig:
    """``python -m search.http_env`` options: the server side of :class:`HttpEnv`."""

    backend: Literal["repl", "replay"] = "repl"
    """``repl``: Lean REPL environments; ``replay``: a search-data run's recorded proof states."""
    workers: int = 4
    """How many environments the pool holds."""
    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = 12340
    """Port to listen on."""
    replay_run: str = "artifacts/search_data/default"
    """replay: a search-data run."""
    project_dir: str | None = None
    """repl: a Lean project with Mathlib built."""


def main(argv: list[str] | None = None) -> None:
    from leanloop.tool import parse_config

    args, _ = parse_config(
        ServeConfig, argv, prog="python -m search.http_env", description="Serve a pool of proof environments over HTTP"
    )
    factory: Callable[[], ProofEnv]
    if args.backend == "replay":
        from search.env import ReplayEnv

        factory = lambda: ReplayEnv.from_run(args.replay_run)  # noqa: E731
    else:
        from leanloop.lean.session import SessionConfig
        from search.repl_env import ReplEnv

        factory = lambda: ReplEnv(SessionConfig(project_dir=args.project_dir))  # noqa: E731
    server = serve(EnvPool([factory() for _ in range(args.workers)]), args.host, args.port)
    print(f"[search.http_env] {args.workers} {args.backend} environments on {server.server_address}")
    threading.Event().wait()


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m search.http_env"))
