"""A pool of proof environments behind HTTP, so that search workers and Lean workers scale
separately (the pattern of the Kimina backend: CPU nodes run Lean, the search calls them).

Server: ``python -m search.http_env --workers 8 --port 12340 [--backend repl|replay ...]`` holds
``workers`` environments; a started theorem stays on the environment that started it (REPL proof
states belong to one process), new theorems go round-robin. Client: ``HttpEnv(url)`` is a
``ProofEnv``; ``apply_many`` sends concurrent requests.

Protocol (JSON over POST): ``/start {"theorem"}`` and ``/apply {"goal": id, "tactic", "timeout"}``
both answer ``{"status", "goals": [{"id", "text"}], "error", "time_s"}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

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
            return {"status": EnvStatus.INFRA_ERROR.value, "goals": [], "error": f"unknown goal id {goal_id}",
                    "time_s": 0.0}
        index, goal = self.goals[goal_id]
        with self.locks[index]:
            return self._answer(index, self.envs[index].apply(goal, tactic, timeout))


def make_handler(pool: EnvPool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/start":
                    answer = pool.start(str(body["theorem"]))
                elif self.path == "/apply":
                    answer = pool.apply(int(body["goal"]), str(body["tactic"]), body.get("timeout"))
                else:
                    self.send_error(404, f"no endpoint {self.path}")
                    return
                payload, code = json.dumps(answer).encode(), 200
            except (KeyError, ValueError, TypeError) as error:
                payload, code = json.dumps({"error": f"bad request: {error}"}).encode(), 400
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:  # quiet: one line per tactic would flood logs
            pass

    return Handler


def serve(pool: EnvPool, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``server.server_address`` has the port."""
    server = ThreadingHTTPServer((host, port), make_handler(pool))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class HttpEnvConfig:
    url: str = "http://127.0.0.1:12340"
    timeout: float = 60.0  # per tactic, enforced by the server's environment
    http_slack_s: float = 30.0  # the HTTP deadline: timeout + this
    max_concurrent_requests: int = 8
    retries: int = 2  # re-sends after a refused / dropped connection


class HttpEnv(ProofEnv):
    name = "http"

    def __init__(self, config: HttpEnvConfig | None = None) -> None:
        super().__init__()
        self.config = config or HttpEnvConfig()
        self._executor = ThreadPoolExecutor(self.config.max_concurrent_requests)

    def _post(self, path: str, body: dict[str, Any], timeout: float | None) -> EnvResult:
        deadline = (timeout or self.config.timeout) + self.config.http_slack_s
        request = urllib.request.Request(self.config.url.rstrip("/") + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        error = ""
        for _ in range(self.config.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=deadline) as reply:
                    answer = json.loads(reply.read())
                break
            except TimeoutError:
                return EnvResult(EnvStatus.TIMEOUT, error=f"no HTTP reply within {deadline:g}s")
            except (urllib.error.URLError, ConnectionError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
        else:
            return EnvResult(EnvStatus.INFRA_ERROR, error=error)
        goals = [EnvGoal(tuple(parse_state(g["text"])), g["id"]) for g in answer.get("goals", [])]
        return EnvResult(EnvStatus(answer["status"]), goals, answer.get("error", ""), float(answer.get("time_s", 0)))

    def _start(self, theorem: str) -> EnvResult:
        return self._post("/start", {"theorem": theorem}, None)

    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        return self._post("/apply", {"goal": goal.handle, "tactic": tactic, "timeout": timeout}, timeout)

    def apply_many(self, items: Sequence[tuple[EnvGoal, str]], timeout: float | None = None) -> list[EnvResult]:
        return list(self._executor.map(lambda item: self.apply(item[0], item[1], timeout), items))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a pool of proof environments over HTTP")
    parser.add_argument("--backend", choices=["repl", "replay"], default="repl")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=12340)
    parser.add_argument("--replay_run", default="artifacts/search_data/default", help="replay: a search-data run")
    parser.add_argument("--project_dir", default=None, help="repl: a Lean project with Mathlib built")
    args = parser.parse_args(argv)
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
    main()
