"""Lean's raw replies -> ``LeanResponse``: the one adapter every backend, recording loader and the
trace annotator goes through, so a reply means the same thing whichever way it arrived.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from leanloop.lean.line_shift import HEADER, IMPORTS, shift_response, with_detected_offset
from leanloop.lean.reply_rows import infotree_tactics, messages_from_json, tactics_from_json
from leanloop.lean.types import LeanMessage, LeanResponse, ResponseStatus, TacticRecord

# Stand-ins (and only they) answer with this when they hold no recording for a request; backends
# map it to UNAVAILABLE, never to a verdict. The replay backend uses the same words as its detail.
NO_RECORDED_ANSWER = "no recorded Lean answer"

REPL, KIMINA, RL_LEAN = "repl", "kimina", "rl_lean"
_REPL_KEYS = {"messages", "tactics", "sorries", "env", "proofState", "goals", "infotree", "proofStatus", "message"}
_ANSWER_KEYS = {"env", "messages", "sorries", "tactics", "results"}  # beside "message": Lean did answer
_TIMEOUT = re.compile(r"\btimed? ?out\b|\btimeout\b", re.IGNORECASE)


def is_timeout_text(text: str | None) -> bool:
    """Both Kimina generations and the RL-Lean harness say "timed out"."""
    return bool(text) and _TIMEOUT.search(str(text)) is not None


def no_answer_status(text: str) -> ResponseStatus:
    """The status of a reply that carries no verdict, from its text."""
    if NO_RECORDED_ANSWER in text:
        return ResponseStatus.UNAVAILABLE
    return ResponseStatus.TIMEOUT if is_timeout_text(text) else ResponseStatus.INFRA_ERROR


def lean_version_from_toolchain(text: str | None) -> str | None:
    """``leanprover/lean4:v4.15.0`` -> ``v4.15.0``; ``v4.9.0-rc1 (kimina setup)`` -> ``v4.9.0-rc1``."""
    if not text:
        return None
    return str(text).strip().split()[0].rsplit(":", 1)[-1]


def reply_format(reply: Mapping[str, Any]) -> str:
    """Which producer wrote this reply: ``repl``, ``kimina`` or ``rl_lean``."""
    if not isinstance(reply, Mapping):
        raise ValueError(f"a Lean reply must be a JSON object, got {type(reply).__name__}")
    if "compilation_result" in reply or {"errors", "system_errors"} & reply.keys():
        return RL_LEAN
    results = reply.get("results")
    if isinstance(results, list) and results and isinstance(results[0], Mapping) and "response" in results[0]:
        return KIMINA
    # A bare Kimina result or response: the REPL itself never reports a ``time``.
    if {"custom_id", "response"} <= reply.keys() or "time" in reply:
        return KIMINA
    if _REPL_KEYS & reply.keys() or isinstance(results, list):
        return REPL
    raise ValueError(
        "unrecognised Lean reply: expected a REPL reply (messages/tactics/env), a Kimina reply "
        "(results[].response) or an RL-Lean compilation_result (errors/warnings/infos); got keys "
        f"{sorted(reply)}"
    )


def results_program(reply: Mapping[str, Any]) -> str | None:
    """The text a REPL fork's ``results`` reply's positions refer to: its entries' ``source`` joined
    by newlines (the fork re-prints each command it elaborated), or None for other replies."""
    results = reply.get("results")
    if not isinstance(results, list) or not results:
        return None
    if not all(isinstance(r, Mapping) and isinstance(r.get("source"), str) for r in results):
        return None
    return "\n".join(r["source"] for r in results)


def _repl_parts(reply: Mapping[str, Any]) -> tuple[list[LeanMessage], list[TacticRecord]]:
    messages = messages_from_json(reply.get("messages"))
    tactics = tactics_from_json(reply["tactics"]) if reply.get("tactics") else infotree_tactics(reply.get("infotree"))
    return messages, tactics


def response_from_repl_reply(
    reply: Any, *, line_offset: int = 0, lean_version: str | None = None, time_s: float = 0.0
) -> LeanResponse:
    """A REPL ``cmd`` reply; ``line_offset``: lines before the text the command compiled (the local
    backend's own header split, so known exactly)."""
    if not isinstance(reply, Mapping):
        return LeanResponse(
            ResponseStatus.INFRA_ERROR,
            detail=f"malformed REPL reply: {reply!r:.200}",
            lean_version=lean_version,
            time_s=time_s,
        )
    if "message" in reply and not _ANSWER_KEYS & reply.keys():
        text = str(reply["message"])
        return LeanResponse(no_answer_status(text), detail=text, lean_version=lean_version, time_s=time_s)
    messages, tactics = _repl_parts(reply)
    for result in reply.get("results") or []:  # a fork: one entry per command (see results_program)
        if isinstance(result, Mapping):
            more_messages, more_tactics = _repl_parts(result)
            messages, tactics = messages + more_messages, tactics + more_tactics
    response = LeanResponse(
        ResponseStatus.OK, messages=messages, tactics=tactics, time_s=float(time_s or 0.0), lean_version=lean_version
    )
    return shift_response(response, line_offset)


def response_from_kimina_result(
    result: Mapping[str, Any],
    code: str | None,
    *,
    lean_version: str | None = None,
    relative_to_body: bool = True,
    line_offset: int | None = None,
) -> LeanResponse:
    """One entry of a Kimina ``/verify`` reply (``{"custom_id", "error", "response"}``; a bare
    ``response`` body is accepted too) for the program ``code``. Positions are body-relative when
    ``relative_to_body``: shifted by ``line_offset`` when given, else by the detected shift, ties
    going to the current server's split (imports and the blank lines after them). Detected, not
    fixed: the shipped replies of one server project need 3 lines or 2 for the same header, so
    any fixed number misplaces one of them (evidence: :mod:`leanloop.lean.line_shift`)."""
    wrapped = "response" in result or "custom_id" in result
    body = result.get("response") if wrapped else result
    time_s = float(body.get("time") or 0.0) if isinstance(body, Mapping) else 0.0
    if result.get("error"):
        text = str(result["error"])
        return LeanResponse(no_answer_status(text), detail=text, lean_version=lean_version, time_s=time_s)
    if not isinstance(body, Mapping):
        return LeanResponse(
            ResponseStatus.INFRA_ERROR, detail="Kimina result has neither error nor response", lean_version=lean_version
        )
    response = response_from_repl_reply(body, lean_version=lean_version, time_s=time_s)
    if not relative_to_body:
        return shift_response(response, line_offset or 0)
    return with_detected_offset(response, code, HEADER, line_offset)


def response_from_rl_lean(
    result: Any, code: str | None, *, lean_version: str | None = None, line_offset: int | None = None
) -> LeanResponse:
    """An RL-Lean ``compilation_result`` for the program ``code``. Messages are stored split by
    severity, each list in Lean's order; they are joined errors first, so the first error stays
    Lean's first error (the interleaving across severities is not recoverable). Positions are
    body-relative: shifted as for Kimina, ties going to that server's split (imports only)."""
    if not isinstance(result, Mapping):
        return LeanResponse(
            ResponseStatus.INFRA_ERROR,
            lean_version=lean_version,
            detail=f"RL-Lean row has no compilation_result: {result!r:.200}",
        )
    failure = result.get("system_messages") or result.get("system_errors")
    if failure:
        return LeanResponse(no_answer_status(str(failure)), detail=str(failure), lean_version=lean_version)
    rows = [*(result.get("errors") or []), *(result.get("warnings") or []), *(result.get("infos") or [])]
    response = LeanResponse(
        ResponseStatus.OK,
        messages=messages_from_json(rows),
        tactics=tactics_from_json(result.get("tactics")),
        time_s=float(result.get("verify_time") or 0.0),
        lean_version=lean_version,
    )
    return with_detected_offset(response, code, IMPORTS, line_offset)


def parse_response(
    reply: Mapping[str, Any],
    program: str | None = None,
    *,
    result_index: int = 0,
    line_offset: int | None = None,
    lean_version: str | None = None,
) -> LeanResponse:
    """Any raw reply (format recognised by :func:`reply_format`) as a response whose positions
    refer to ``program``.

    ``program`` is needed to place Kimina and RL-Lean positions (body-relative); without it they
    stay as reported. An RL-Lean row that still has its ``code`` supplies it itself.
    ``line_offset`` overrides the detected shift (the REPL's own positions need none: default 0).
    """
    kind = reply_format(reply)
    if kind == RL_LEAN:
        result = reply
        if "compilation_result" in reply:  # a whole row
            program = program if program is not None else reply.get("code")
            lean_version = lean_version or lean_version_from_toolchain(reply.get("lean_version"))
            result = reply["compilation_result"]
        return response_from_rl_lean(result, program, lean_version=lean_version, line_offset=line_offset)
    if kind == KIMINA:
        results = reply.get("results")
        if isinstance(results, list):
            if not results:
                raise ValueError("Kimina reply has an empty 'results' list: nothing to read")
            if not 0 <= result_index < len(results):
                raise ValueError(
                    f"Kimina reply has {len(results)} results; result_index={result_index} is out of range"
                )
            reply = results[result_index]
        return response_from_kimina_result(reply, program, lean_version=lean_version, line_offset=line_offset)
    return response_from_repl_reply(reply, line_offset=line_offset or 0, lean_version=lean_version)


__all__ = [
    "KIMINA",
    "NO_RECORDED_ANSWER",
    "REPL",
    "RL_LEAN",
    "is_timeout_text",
    "lean_version_from_toolchain",
    "no_answer_status",
    "parse_response",
    "reply_format",
    "response_from_kimina_result",
    "response_from_repl_reply",
    "response_from_rl_lean",
    "results_program",
]
