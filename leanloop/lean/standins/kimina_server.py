"""Stand-in Kimina Lean Server: the ``/verify`` API, answering with recorded replies only."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any, Iterable

from aiohttp import web

from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.jsonl import read_jsonl
from leanloop.paths import resolve_shared

DEFAULT_PAIRS = "shared://lean_repl/kimina_match_pairs.jsonl"


def recorded_results(paths: Iterable[str | Path]) -> dict[str, dict]:
    """program text (exactly as recorded) -> its recorded /verify result; first recording wins."""
    answers: dict[str, dict] = {}
    for path in paths:
        for row in read_jsonl(resolve_shared(path)):
            for result in row["server_response"]["results"]:
                answers.setdefault(row["code"], result)
    return answers


class KiminaStandIn:
    def __init__(
        self,
        pairs: Iterable[str | Path] = (DEFAULT_PAIRS,),
        api_key: str | None = None,
        faults: list[dict[str, Any]] | None = None,
    ):
        self.answers = recorded_results(pairs)
        self.api_key = api_key
        self.faults = faults or []
        self._fired: set[int] = set()
        self.batch_sizes: list[int] = []  # programs per request received, for monitoring
        self._runner: web.AppRunner | None = None
        self._hanging: set[asyncio.Task] = set()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/verify", self.verify)
        app.router.add_post("/one_pass_verify_batch", self.verify)  # the server's older name
        app.router.add_get("/health", lambda _: web.json_response({"status": "ok"}))
        return app

    def _fault(self, programs: list[str]) -> str | None:
        for number, fault in enumerate(self.faults):
            if any(fault["when"] in program for program in programs):
                if fault.get("once") and number in self._fired:
                    continue
                self._fired.add(number)
                return str(fault["action"])
        return None

    def _result(self, custom_id: Any, program: str) -> dict:
        recorded = self.answers.get(program)
        if recorded is None:
            return {
                "custom_id": custom_id,
                "error": f"stand-in Kimina server: {NO_RECORDED_ANSWER} for this code",
                "response": None,
            }
        return {
            "custom_id": custom_id,
            "error": recorded.get("error"),
            "response": json.loads(json.dumps(recorded.get("response"))),
        }

    async def verify(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None:
            token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not token:
                return web.json_response({"detail": "Missing API key"}, status=401)
            if token != self.api_key:
                return web.json_response({"detail": "Invalid API key"}, status=401)
        try:
            body = await request.json()
            codes = body["codes"]
            programs = [c["proof"] if c.get("proof") is not None else c["code"] for c in codes]
            ids = [c["custom_id"] for c in codes]
        except (ValueError, KeyError, TypeError) as error:
            return web.json_response({"detail": f"invalid request body: {error}"}, status=422)
        self.batch_sizes.append(len(codes))
        action = self._fault(programs)
        if action == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)  # never reaches the client: the connection is gone
        if action == "hang":
            task = asyncio.current_task()
            assert task is not None
            self._hanging.add(task)  # stop() cancels it, as a dying server would drop the connection
            await asyncio.sleep(24 * 3600)
        if action in ("http_429", "http_500"):
            return web.json_response(
                {"detail": "No available REPLs" if action == "http_429" else "stand-in fault"}, status=int(action[-3:])
            )
        return web.json_response({"results": [self._result(i, p) for i, p in zip(ids, programs)]})

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve in the running event loop; returns the base URL (port 0 = a free port)."""
        self._runner = web.AppRunner(self.app(), handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0]
        return f"http://{bound[0]}:{bound[1]}"

    async def stop(self) -> None:
        for task in self._hanging:
            task.cancel()
        self._hanging.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="stand-in Kimina Lean Server replaying recorded replies")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=12332)
    parser.add_argument("--pairs", nargs="+", default=[DEFAULT_PAIRS], help="kimina_match_pairs-style JSONL")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    web.run_app(KiminaStandIn(args.pairs, args.api_key).app(), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
