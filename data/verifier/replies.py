"""Lean's JSON replies (REPL ``cmd`` replies, Kimina ``/verify`` results) -> ``LeanResponse``.

Every backend and the recorded-data loader go through these functions, so a reply means the same
thing whichever way it arrived. Two facts about the servers matter here and are checked against the
shipped recordings in the tests:

- Servers that split a program into an import header and a body report positions relative to the
  body. The current Kimina Lean Server (``app/split.py``) puts every leading ``import`` *and blank*
  line into the header; the 2024 one that produced the RL-Lean records moved only the leading
  ``import`` lines. A response here always carries positions in the *full program*, so the header
  lines are added back (``line_offset``).
- A timeout is not a verdict: "Lean process timed out" (old Kimina, RL-Lean ``system_messages``) and
  "Lean REPL command timed out in N seconds" (current Kimina) both become ``ResponseStatus.TIMEOUT``.
"""

from __future__ import annotations

from typing import Any, Iterable

from data.verifier.types import LeanMessage, LeanResponse, Position, ResponseStatus, TacticRecord

# Stand-ins (and only they) answer with this when they hold no recording for a request; backends
# map it to UNAVAILABLE, never to a verdict. The replay backend uses the same words as its detail.
NO_RECORDED_ANSWER = "no recorded Lean answer"


def is_timeout_text(text: str | None) -> bool:
    """Both Kimina generations and the RL-Lean harness say "timed out"; nothing else does."""
    return bool(text) and "timed out" in str(text).lower()


def leading_import_lines(code: str) -> int:
    """Lines the 2024 Kimina server (RL-Lean records) removed before compiling: leading ``import``s."""
    count = 0
    for line in code.split("\n"):
        if not line.strip().startswith("import "):
            break
        count += 1
    return count


def leading_header_lines(code: str) -> int:
    """Lines the current Kimina server removes (``split_snippet``): leading ``import`` or blank lines."""
    count = 0
    for line in code.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("import "):
            break
        count += 1
    return count


def _shift(position: Position | None, line_offset: int) -> Position | None:
    if position is None or line_offset == 0:
        return position
    return Position(position.line + line_offset, position.column)


def messages_from_json(rows: Iterable[dict[str, Any]] | None, line_offset: int = 0) -> list[LeanMessage]:
    messages = []
    for row in rows or []:
        message = LeanMessage.from_dict(row)
        messages.append(LeanMessage(message.severity, message.data, _shift(message.pos, line_offset),
                                    _shift(message.end_pos, line_offset)))
    return messages


def tactics_from_json(rows: Iterable[dict[str, Any]] | None, line_offset: int = 0) -> list[TacticRecord]:
    tactics = []
    for row in rows or []:
        if not isinstance(row.get("pos"), dict):  # Kimina's schema types these as ints; skip, never guess
            continue
        record = TacticRecord.from_dict(row)
        tactics.append(TacticRecord(record.tactic, record.goals, _shift(record.pos, line_offset),  # type: ignore[arg-type]
                                    _shift(record.end_pos, line_offset)))
    return tactics


def response_from_repl_reply(reply: dict[str, Any], *, line_offset: int = 0, lean_version: str | None = None,
                             time_s: float = 0.0) -> LeanResponse:
    """A REPL ``cmd`` reply. A reply that is only ``{"message": ...}`` is the REPL refusing the request
    (unknown environment, unparsable JSON): Lean never elaborated the program, so no verdict."""
    if not isinstance(reply, dict):
        return LeanResponse(ResponseStatus.INFRA_ERROR, detail=f"malformed REPL reply: {reply!r:.200}",
                            lean_version=lean_version, time_s=time_s)
    if "message" in reply and not ({"env", "messages", "sorries", "tactics"} & reply.keys()):
        text = str(reply["message"])
        status = ResponseStatus.UNAVAILABLE if NO_RECORDED_ANSWER in text else (
            ResponseStatus.TIMEOUT if is_timeout_text(text) else ResponseStatus.INFRA_ERROR)
        return LeanResponse(status, detail=text, lean_version=lean_version, time_s=time_s)
    return LeanResponse(
        ResponseStatus.OK,
        messages=messages_from_json(reply.get("messages"), line_offset),
        tactics=tactics_from_json(reply.get("tactics"), line_offset),
        time_s=float(time_s or 0.0),
        lean_version=lean_version,
    )


def response_from_kimina_result(result: dict[str, Any], code: str, *, lean_version: str | None = None,
                                relative_to_body: bool = True) -> LeanResponse:
    """One entry of a Kimina ``/verify`` reply: ``{"custom_id", "error", "response": {..., "time"}}``."""
    error = result.get("error")
    response = result.get("response")
    time_s = float((response or {}).get("time") or 0.0) if isinstance(response, dict) else 0.0
    if error:
        text = str(error)
        status = ResponseStatus.UNAVAILABLE if NO_RECORDED_ANSWER in text else (
            ResponseStatus.TIMEOUT if is_timeout_text(text) else ResponseStatus.INFRA_ERROR)
        return LeanResponse(status, detail=text, lean_version=lean_version, time_s=time_s)
    if not isinstance(response, dict):
        return LeanResponse(ResponseStatus.INFRA_ERROR, detail="Kimina result has neither error nor response",
                            lean_version=lean_version)
    offset = leading_header_lines(code) if relative_to_body else 0
    return response_from_repl_reply(response, line_offset=offset, lean_version=lean_version, time_s=time_s)


def lean_version_from_toolchain(text: str | None) -> str | None:
    """``leanprover/lean4:v4.15.0`` -> ``v4.15.0``; ``v4.9.0-rc1 (kimina setup)`` -> ``v4.9.0-rc1``."""
    if not text:
        return None
    value = str(text).strip().split()[0]
    return value.rsplit(":", 1)[-1]
