"""Append-only journal of finished outcomes: what makes a corpus build resumable.

One JSON line per finished item (``{"id", "outcome", "lean_version"}``), flushed as soon as the
item finishes, so a build killed at any point loses at most the items still in flight. The first
line fingerprints everything that decides an outcome (profile, backend, timeout, headers,
statement files): resuming with a different configuration is refused rather than mixing verdicts.
A torn last line (the process died mid-write) is cut off before appending. An infrastructure
failure is journaled but not final: a resume verifies that item again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from leanloop.jsonl import JsonlError, read_appended
from leanloop.lean.types import Category, LeanMessage, Outcome, TacticRecord

JOURNAL = "journal.jsonl"
# the infrastructure failed, Lean gave no verdict: journaled (the record of what happened) but
# never final, so a resumed build asks again
NOT_FINAL = frozenset({Category.INFRA_ERROR})


class JournalMismatch(RuntimeError):
    pass


def outcome_from_dict(row: dict[str, Any]) -> Outcome:
    """The inverse of ``Outcome.to_dict`` (only journals read outcomes back)."""
    return Outcome(
        category=Category(row["category"]),
        messages=[LeanMessage.from_dict(m) for m in row.get("messages", [])],
        tactics=[TacticRecord.from_dict(t) for t in row.get("tactics", [])],
        first_error=row.get("first_error"),
        reasons=list(row.get("reasons", [])),
        time_s=float(row.get("time_s", 0.0)),
        backend=row.get("backend", ""),
    )


class Journal:
    def __init__(self, path: Path, fingerprint: str):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self._handle = None

    def load(self, fresh: bool = False) -> dict[str, tuple[Outcome, str | None]]:
        """Finished items of an earlier build of this run: id -> (outcome, lean version)."""
        if fresh and self.path.exists():
            self.path.unlink()
        if not self.path.exists():
            return {}
        done: dict[str, tuple[Outcome, str | None]] = {}
        try:
            rows, _ = read_appended(self.path, cut_torn=True)
        except JsonlError as exc:  # damaged outside a torn last line
            raise JournalMismatch(
                f"{self.path} is damaged ({exc}); its verdicts cannot be trusted. Use a new run "
                "name (--run NAME) or discard them and start over (--fresh true)."
            ) from None
        if rows:
            head = rows[0]
            if not isinstance(head, dict) or head.get("fingerprint") != self.fingerprint:
                raise JournalMismatch(
                    f"{self.path} was written by a build with a different configuration (profile, backend, "
                    "timeout, header or statements changed); resuming would mix verdicts. Use a new run name "
                    "(--run NAME) or discard the earlier verdicts and start over (--fresh true)."
                )
        for row in rows[1:]:
            outcome = outcome_from_dict(row["outcome"])
            if outcome.category not in NOT_FINAL:
                done[row["id"]] = (outcome, row.get("lean_version"))
        return done

    def append(self, item_id: str, outcome: Outcome, lean_version: str | None) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._handle = open(self.path, "a", encoding="utf-8")
            if new:
                self._handle.write(json.dumps({"journal": 1, "fingerprint": self.fingerprint}) + "\n")
        self._handle.write(
            json.dumps({"id": item_id, "outcome": outcome.to_dict(), "lean_version": lean_version}, ensure_ascii=False)
            + "\n"
        )
        self._handle.flush()  # survives the process being killed (the OS keeps the written data)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None
