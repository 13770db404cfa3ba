"""The feedback-trace annotator (seed "Learning Lean Feedback", Appendix C)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from leanloop.lean.replies import parse_response
from leanloop.lean.types import LeanMessage, LeanResponse, ResponseStatus, TacticRecord
from leanloop.traces.hypotheses import HypothesisDictionary
from leanloop.traces.parse import CLOSE_TAG, OPEN_TAG, STATE_HEADER
from leanloop.traces.source import normalize_program

LINTER_NOTE = "note: this linter can be disabled with"

__all__ = ["annotate", "annotate_reply", "annotate_response", "message_text"]


def message_text(data: str) -> str:
    """A message's text as the trace shows it: linter-note lines removed, trailing blanks trimmed.
    The note is matched case-insensitively: Lean at HEAD writes ``Note: This linter can be disabled
    with ...`` where v4.9-v4.15 write ``note: this linter ...``."""
    return "\n".join(line for line in data.split("\n") if not line.lower().startswith(LINTER_NOTE)).rstrip()


def _as_message(item: LeanMessage | Mapping[str, Any]) -> LeanMessage:
    return item if isinstance(item, LeanMessage) else LeanMessage.from_dict(dict(item))


def _as_tactic(item: TacticRecord | Mapping[str, Any]) -> TacticRecord:
    return item if isinstance(item, TacticRecord) else TacticRecord.from_dict(dict(item))


class _Block:
    def __init__(self, indent: str):
        self.indent = indent
        self.payload: list[str] = []
        self.has_error = False

    def render(self) -> list[str]:
        # Lean's text is kept verbatim (trailing blanks included); only empty lines stay unindented.
        body = [self.indent + line if line else "" for text in self.payload for line in text.split("\n")]
        return [self.indent + OPEN_TAG, *body, self.indent + CLOSE_TAG]


SAME_LINE = ("first_returned", "leftmost")


def annotate(
    program: str,
    messages: Sequence[LeanMessage],
    tactics: Sequence[TacticRecord],
    include_warnings: bool = False,
    same_line: str = "first_returned",
) -> str:
    """The annotated program. ``messages`` and ``tactics`` carry Lean positions in ``program``
    (1-based lines, 0-based codepoint columns); dicts in REPL / Verifier form are accepted too.
    Of several tactic records starting on one source line, ``first_returned`` keeps the first in
    Lean's reply order (LLF App. C: "only the first record returned for that line is retained");
    ``leftmost`` keeps the one starting leftmost (ties: reply order), which does not depend on the
    order a REPL version happens to return records in."""
    if same_line not in SAME_LINE:
        raise ValueError(f"same_line must be one of {SAME_LINE}, got {same_line!r}")
    normalized = normalize_program(program)
    lines = normalized.lines
    # Spans that run past the code (to the end of the file) belong to its last code line.
    last_row = max((row for row, line in enumerate(lines) if line.strip()), default=0)

    states: dict[int, tuple[int, int, TacticRecord]] = {}
    for order, tactic in enumerate(map(_as_tactic, tactics)):
        if tactic.pos is None or not normalized.has_line(tactic.pos.line):
            continue
        # the first record of a line is retained even with no goal text (it then prints nothing):
        # a later record on the line never stands in for it
        row, column = normalized.locate(tactic.pos.line, tactic.pos.column)
        if row not in states or (same_line == "leftmost" and (column, order) < states[row][:2]):
            states[row] = (column, order, tactic)

    groups: dict[int, list[tuple[str, str]]] = {}
    for message in map(_as_message, messages):
        severity = message.severity.lower()
        severity = "info" if severity == "information" else severity
        if severity == "warning" and not include_warnings:
            continue
        text = message_text(message.data)
        if not text.strip():
            continue
        end = message.end_pos or message.pos
        row = last_row if end is None else min(normalized.locate(end.line, end.column)[0], last_row)
        groups.setdefault(row, []).append((severity, text))

    hypotheses = HypothesisDictionary()
    out: list[str | _Block] = []
    for row, line in enumerate(lines):
        if row in states and states[row][2].goals.strip():
            payload = [STATE_HEADER, *hypotheses.render(states[row][2].goals)]
            if out and isinstance(out[-1], _Block):  # no adjacent wrappers
                out[-1].payload.extend(payload)
            else:
                block = _Block(line[: len(line) - len(line.lstrip())])
                block.payload.extend(payload)
                out.append(block)
        out.append(line)
        if row in groups:
            block = _Block(line[: len(line) - len(line.lstrip())])
            for severity, text in groups[row]:
                block.payload.append(f"-- type: {severity}, msg: {text}")
                block.has_error |= severity == "error"
            out.append(block)
            if block.has_error:
                break
    rendered: list[str] = []
    for item in out:
        rendered.extend(item.render() if isinstance(item, _Block) else [item])
    return "\n".join(rendered)


def annotate_response(program: str, response: LeanResponse, include_warnings: bool = False) -> str:
    """Annotate with a backend's answer; refuses answers that are not Lean's (timeout, crash,
    no recording), because an empty message list there would read as a clean compile."""
    if response.status is not ResponseStatus.OK:
        raise ValueError(f"cannot annotate: Lean gave no answer ({response.status.value}: {response.detail[:200]})")
    return annotate(program, response.messages, response.tactics, include_warnings)


def annotate_reply(program: str, reply: Mapping[str, Any], include_warnings: bool = False) -> str:
    """Annotate with a raw REPL / Kimina / RL-Lean reply (positions aligned to ``program``)."""
    return annotate_response(program, parse_response(reply, program), include_warnings)
