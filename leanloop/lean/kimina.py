"""``kimina``: client for a running Kimina Lean Server (``POST /verify``).

The path for users who outgrow one machine: many CPU nodes with Lean REPLs behind one endpoint.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
from dataclasses import dataclass
from typing import Any

from leanloop.lean.replies import response_from_kimina_result
from leanloop.lean.types import LeanBackend, LeanResponse, ResponseStatus

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


@dataclass
class KiminaBackendConfig:
    """Options of the ``kimina`` backend. See README "Lean backends"."""

    url: str = "http://127.0.0.1:12332"  # the server's default port
    endpoint: str = "/verify"
    api_key: str | None = None  # sent as "Authorization: Bearer <key>"; default: $LEAN_SERVER_API_KEY
    timeout: float = 60.0  # per program, enforced by the server, when run() is not given one
    batch_size: int = 8  # programs per HTTP request
    batch_window_s: float = 0.02  # how long a lone program waits for company
    max_concurrent_requests: int = 4
    retries: int = 3  # re-sends of a failed request
    backoff_s: float = 1.0  # first back-off; doubles each retry
    http_slack_s: float = 30.0  # a request's deadline: timeout x programs + this
    infotree_type: str | None = None  # "original" / "synthetic": ask the server for info trees
    disable_cache: bool = False  # the server's header-environment reuse
    lean_version: str = "v4.15.0"  # what the server runs (the API does not report it)
    # True: positions count from the body; the header's size is detected per reply, since server
    # versions differ (2 or 3 lines for the same program) and do not say. False: whole-file servers.
    reply_lines_relative_to_body: bool = True


class _Failed(Exception):
    def __init__(self, detail: str, retryable: bool, timed_out: bool = False):
        super().__init__(detail)
        self.detail, self.retryable, self.timed_out = detail, retryable, timed_out


class KiminaBackend(LeanBackend):
    """``KiminaBackend(KiminaBackendConfig(url="http://lean-server:12332", api_key=...))``."""

    name = "kimina"

    def __init__(self, config: KiminaBackendConfig | None = None, **options: Any):
        if config is not None and options:
            raise TypeError("give either a KiminaBackendConfig or keyword options, not both")
        self.config = config or KiminaBackendConfig(**options)
        if self.config.batch_size < 1 or self.config.max_concurrent_requests < 1:
            raise ValueError("batch_size and max_concurrent_requests must be >= 1")
        if not self.config.url.startswith(("http://", "https://")):
            raise ValueError(f"Kimina url must start with http:// or https://, got {self.config.url!r}")
        self._ids = itertools.count()
        self._pending: dict[float, list[tuple[str, str, asyncio.Future]]] = {}
        self._flush_handles: dict[float, asyncio.TimerHandle] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._gate: asyncio.Semaphore | None = None
        self._tasks: set[asyncio.Task] = set()
        self.requests_sent = 0  # HTTP requests, retries included: for monitoring

    # -- per-event-loop state ---------------------------------------------------------------------
    def _bind(self) -> asyncio.AbstractEventLoop:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # sessions and semaphores belong to one event loop
            self._loop = loop
            self._session = aiohttp.ClientSession()
            self._gate = asyncio.Semaphore(self.config.max_concurrent_requests)
            self._pending.clear()
            self._flush_handles.clear()
        return loop

    def _headers(self) -> dict[str, str]:
        key = self.config.api_key or os.environ.get("LEAN_SERVER_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    # -- batching ---------------------------------------------------------------------------------
    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        timeout = self.config.timeout if timeout is None else float(timeout)
        loop = self._bind()
        future: asyncio.Future = loop.create_future()
        queue = self._pending.setdefault(timeout, [])
        queue.append((str(next(self._ids)), program, future))
        if len(queue) >= self.config.batch_size:
            self._flush(timeout)
        elif timeout not in self._flush_handles:
            self._flush_handles[timeout] = loop.call_later(self.config.batch_window_s, self._flush, timeout)
        return await future  # cancelling the caller cancels this future; its batch notices

    def _flush(self, timeout: float) -> None:
        handle = self._flush_handles.pop(timeout, None)
        if handle is not None:
            handle.cancel()
        queue = [item for item in self._pending.pop(timeout, []) if not item[2].done()]
        for start in range(0, len(queue), self.config.batch_size):
            batch = queue[start : start + self.config.batch_size]
            task = asyncio.get_running_loop().create_task(self._send_batch(batch, timeout))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

            def drop_if_abandoned(_: asyncio.Future, batch=batch, task=task) -> None:
                if all(item[2].cancelled() for item in batch):
                    task.cancel()  # every caller gave up: stop waiting on the server

            for item in batch:
                item[2].add_done_callback(drop_if_abandoned)

    async def _send_batch(self, batch: list[tuple[str, str, asyncio.Future]], timeout: float) -> None:
        try:
            try:
                results = await self._post_with_retries(batch, timeout)
            except _Failed as failure:
                if len(batch) == 1 or not (failure.retryable or failure.timed_out):  # e.g. 401: same for all
                    for item in batch:
                        self._resolve(item, self._failure_response(failure, timeout))
                    return
                # isolate the culprit: one stuck or poisonous program must not take the batch with it
                await asyncio.gather(*(self._send_batch([item], timeout) for item in batch))
                return
            for item in batch:
                result = results.get(item[0])
                self._resolve(
                    item,
                    LeanResponse(
                        ResponseStatus.INFRA_ERROR,
                        lean_version=self.config.lean_version,
                        detail="the server's reply had no result for this program",
                    )
                    if result is None
                    else response_from_kimina_result(
                        result,
                        item[1],
                        lean_version=self.config.lean_version,
                        relative_to_body=self.config.reply_lines_relative_to_body,
                    ),
                )
        finally:  # nothing is lost: whatever happened, every caller gets an answer
            for item in batch:
                self._resolve(
                    item,
                    LeanResponse(
                        ResponseStatus.INFRA_ERROR,
                        lean_version=self.config.lean_version,
                        detail="the batch request was abandoned",
                    ),
                )

    @staticmethod
    def _resolve(item: tuple[str, str, asyncio.Future], response: LeanResponse) -> None:
        if not item[2].done():
            item[2].set_result(response)

    def _failure_response(self, failure: _Failed, timeout: float) -> LeanResponse:
        status = ResponseStatus.TIMEOUT if failure.timed_out else ResponseStatus.INFRA_ERROR
        return LeanResponse(
            status,
            detail=failure.detail,
            lean_version=self.config.lean_version,
            time_s=self._deadline(1, timeout) if failure.timed_out else 0.0,
        )

    # -- HTTP -------------------------------------------------------------------------------------
    def _deadline(self, programs: int, timeout: float) -> float:
        return timeout * programs + self.config.http_slack_s

    async def _post_with_retries(self, batch: list[tuple[str, str, asyncio.Future]], timeout: float) -> dict[str, dict]:
        payload = {
            "codes": [{"custom_id": cid, "proof": program} for cid, program, _ in batch],
            "timeout": max(1, math.ceil(timeout)),
            "infotree_type": self.config.infotree_type,
            "disable_cache": self.config.disable_cache,
        }
        attempt = 0
        while True:
            try:
                assert self._gate is not None
                async with self._gate:
                    return await self._post(payload, self._deadline(len(batch), timeout))
            except _Failed as failure:
                # a request that ran out its deadline is not retried whole: the caller splits it
                if not failure.retryable or failure.timed_out or attempt >= self.config.retries:
                    raise
            attempt += 1
            await asyncio.sleep(self.config.backoff_s * 2 ** (attempt - 1))

    async def _post(self, payload: dict, deadline: float) -> dict[str, dict]:
        import aiohttp

        url = self.config.url.rstrip("/") + "/" + self.config.endpoint.lstrip("/")
        self.requests_sent += 1
        try:
            async with self._session.post(
                url, json=payload, headers=self._headers(), timeout=aiohttp.ClientTimeout(total=deadline)
            ) as reply:
                text = await reply.text()
                if reply.status in (401, 403):
                    raise _Failed(
                        f"HTTP {reply.status} from {url}: {text[:200]} (check api_key / LEAN_SERVER_API_KEY)",
                        retryable=False,
                    )
                if reply.status >= 400:
                    raise _Failed(
                        f"HTTP {reply.status} from {url}: {text[:200]}", retryable=reply.status in RETRYABLE_STATUS
                    )
        except asyncio.TimeoutError as error:
            raise _Failed(f"no reply from {url} within {deadline:g}s", retryable=False, timed_out=True) from error
        except aiohttp.ClientError as error:
            raise _Failed(f"{type(error).__name__} talking to {url}: {error}", retryable=True) from error
        try:
            data = json.loads(text)
            results = data["results"]
            return {str(result["custom_id"]): result for result in results}
        except (ValueError, KeyError, TypeError) as error:
            raise _Failed(
                f"malformed reply from {url} ({type(error).__name__}): {text[:200]}", retryable=True
            ) from error

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None
        self._loop = None


__all__ = ["KiminaBackend", "KiminaBackendConfig"]
