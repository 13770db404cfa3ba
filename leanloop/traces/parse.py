"""Reading feedback traces: complete blocks, the verdict rule, source preservation (seed App. B)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

OPEN_TAG = "/- <feedback>"
CLOSE_TAG = "</feedback> -/"
STATE_HEADER = "-- proof state:"

_OPEN = r"/-\s*<feedback>"
_CLOSE = r"</feedback>\s*-/"
# The body may not contain another opener: with two openers and one closer, the first opener is
# unclosed (so not a block) and the block is the one the closer actually ends.
BLOCK_RE = re.compile(rf"{_OPEN}((?:(?!{_OPEN}).)*?){_CLOSE}", re.IGNORECASE | re.DOTALL)
_TAG_RE = re.compile(rf"(?P<open>{_OPEN})|{_CLOSE}", re.IGNORECASE)
# Appendix B: the error test runs on the whole trace, inside blocks or not.
ERROR_RE = re.compile(r"--\s*type\s*:\s*error\b", re.IGNORECASE)
MESSAGE_RE = re.compile(r"^--\s*type\s*:\s*(?P<severity>[^,\n]*?)\s*,\s*msg\s*:\s?(?P<text>.*)$", re.IGNORECASE)
STATE_RE = re.compile(r"^--\s*proof\s+state\s*:", re.IGNORECASE)
# An explicit validity tag: ``<valid>true</valid>`` / ``<valid>false</valid>`` or
# ``<verdict>valid</verdict>`` / ``<verdict>invalid</verdict>``. Our copy of the seed names the rule
# (the last tag wins, the output limit still loses) but not the spelling; these two are accepted.
VALIDITY_TAG_RE = re.compile(
    r"<\s*valid\s*>\s*(?P<flag>true|false|yes|no|1|0)\s*<\s*/\s*valid\s*>"
    r"|<\s*verdict\s*>\s*(?P<word>valid|invalid)\s*<\s*/\s*verdict\s*>",
    re.IGNORECASE,
)
# End-of-text markers a generation may end with; removed before the "ends in a proof state" test.
EOS_SUFFIXES = ("<|endoftext|>", "<|im_end|>", "<|end_of_text|>", "<|eot_id|>", "</s>", "<eos>")


@dataclass(frozen=True)
class BlockMessage:
    severity: str
    text: str


@dataclass(frozen=True)
class FeedbackBlock:
    """One complete block: its span in the trace and its payload."""

    start: int  # offset of ``/-``
    end: int  # offset just past ``-/``
    body: str  # raw text between the tags

    @property
    def lines(self) -> list[str]:
        """Payload lines with indentation and surrounding blank lines removed (the block's content
        independent of where it sits)."""
        return [line.strip() for line in self.body.split("\n") if line.strip()]

    @property
    def key(self) -> str:
        """Content identity used by the block metrics (LLF App. D): the payload stripped and every
        internal whitespace run, line breaks included, replaced by one space, so a reflowed block
        matches."""
        return " ".join(self.body.split())

    @property
    def has_state(self) -> bool:
        return any(STATE_RE.match(line) for line in self.lines)

    @property
    def has_error(self) -> bool:
        return bool(ERROR_RE.search(self.body))

    def payload(self) -> "BlockPayload":
        return parse_payload(self.body)


@dataclass
class BlockPayload:
    messages: list[BlockMessage] = field(default_factory=list)
    state: list[str] | None = None  # lines after ``-- proof state:``; None when the block has none


def extract_blocks(text: str) -> list[FeedbackBlock]:
    """All complete feedback blocks, in order: each closer ends a block opened by the last opener
    before it (the same blocks ``BLOCK_RE.finditer`` finds, in one pass over the tags)."""
    blocks: list[FeedbackBlock] = []
    opener: re.Match[str] | None = None
    for tag in _TAG_RE.finditer(text):
        if tag.group("open") is not None:
            opener = tag
        elif opener is not None:
            blocks.append(FeedbackBlock(opener.start(), tag.end(), text[opener.end() : tag.start()]))
            opener = None
    return blocks


def parse_payload(body: str) -> BlockPayload:
    """Split a block body into its messages (``-- type: S, msg: T`` plus continuation lines) and its
    proof state. Common indentation is removed from every line."""
    raw = body.split("\n")
    # The body starts right after ``<feedback>`` and ends right before ``</feedback>``: drop the
    # rest of the opening line and the indentation of the closing line.
    if raw:
        raw = raw[1:] if not raw[0].strip() else raw
    if raw and not raw[-1].strip():
        raw = raw[:-1]
    indent = min((len(line) - len(line.lstrip()) for line in raw if line.strip()), default=0)
    lines = [line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in raw]
    payload = BlockPayload()
    current: list[str] | None = None
    severity = ""
    for line in lines:
        message = MESSAGE_RE.match(line.lstrip())
        if message and payload.state is None:
            if current is not None:
                payload.messages.append(BlockMessage(severity, "\n".join(current).rstrip()))
            severity, current = message.group("severity").strip().lower(), [message.group("text")]
        elif STATE_RE.match(line.strip()) and payload.state is None:
            if current is not None:
                payload.messages.append(BlockMessage(severity, "\n".join(current).rstrip()))
                current = None
            payload.state = []
        elif payload.state is not None:
            payload.state.append(line)
        elif current is not None:
            current.append(line)
    if current is not None:
        payload.messages.append(BlockMessage(severity, "\n".join(current).rstrip()))
    return payload


def feedback_spans(text: str) -> list[tuple[int, int]]:
    """The spans :func:`strip_feedback` removes: each complete block, widened to its whole lines
    (and one newline) when nothing but blanks shares those lines with it."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for block in extract_blocks(text):
        start, end = block.start, block.end
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        if not text[line_start:start].strip() and not text[end:line_end].strip() and line_start >= cursor:
            if line_end < len(text):
                start, end = line_start, line_end + 1  # whole lines and their newline
            elif line_start > 0 and line_start - 1 >= cursor:
                start, end = line_start - 1, line_end  # last line: take the newline before it
            else:
                start, end = line_start, line_end
        spans.append((start, end))
        cursor = end
    return spans


def strip_feedback(text: str) -> str:
    """The trace with every complete block removed. A block alone on its lines takes those lines
    with it; a block inside a line leaves the rest of the line."""
    pieces: list[str] = []
    cursor = 0
    for start, end in feedback_spans(text):
        pieces.append(text[cursor:start])
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def strip_eos(text: str, suffixes: tuple[str, ...] = EOS_SUFFIXES) -> str:
    """Remove trailing end-of-text markers (and the whitespace around them)."""
    stripped = text.rstrip()
    changed = True
    while changed:
        changed = False
        for suffix in suffixes:
            if suffix and stripped.endswith(suffix):
                stripped = stripped[: -len(suffix)].rstrip()
                changed = True
    return stripped


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reason: str  # output_limit | validity_tag | error_message | ends_in_proof_state | no_error

    def to_dict(self) -> dict[str, object]:
        return {"valid": self.valid, "reason": self.reason}


def validity_tag(text: str) -> bool | None:
    """The last explicit validity tag in the trace, or None when there is none."""
    value: bool | None = None
    for match in VALIDITY_TAG_RE.finditer(text):
        if match.group("flag") is not None:
            value = match.group("flag").lower() in ("true", "yes", "1")
        else:
            value = match.group("word").lower() == "valid"
    return value


def ends_in_proof_state(text: str) -> bool:
    """True when the trace (end-of-text suffix removed) ends in a proof-state block with only
    whitespace after it: the model announced a goal and wrote nothing to close it."""
    body = strip_eos(text)
    blocks = extract_blocks(body)
    if not blocks:
        return False
    last = blocks[-1]
    return last.has_state and not body[last.end :].strip()


def trace_verdict(trace: str, truncated: bool = False) -> Verdict:
    """Appendix B. Invalid if generation stopped at the output limit (nothing overrides that);
    otherwise an explicit validity tag decides (the last one wins); otherwise invalid if
    ``--\\s*type\\s*:\\s*error\\b`` matches anywhere or the trace ends in a proof-state block with
    no non-whitespace source after it; valid otherwise."""
    if truncated:
        return Verdict(False, "output_limit")
    tag = validity_tag(trace)
    if tag is not None:
        return Verdict(tag, "validity_tag")
    if ERROR_RE.search(trace):
        return Verdict(False, "error_message")
    if ends_in_proof_state(trace):
        return Verdict(False, "ends_in_proof_state")
    return Verdict(True, "no_error")
