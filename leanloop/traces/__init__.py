"""Feedback traces: Lean's feedback written into the program (seed "Learning Lean Feedback", App. B-C).

- :mod:`leanloop.traces.annotate`: ``annotate(program, messages, tactics)`` builds the reference trace;
- ``parse_response``: raw REPL / Kimina / RL-Lean replies to the Verifier types (re-exported from
  :mod:`leanloop.lean.replies`, the one adapter the Lean backends use too);
- :mod:`leanloop.traces.parse`: complete blocks, the verdict rule, source preservation;
- :mod:`leanloop.traces.hypotheses`: hypothesis deduplication of proof states;
- :mod:`leanloop.traces.source`: program normalization and Lean-position mapping;
- :mod:`leanloop.traces.reference_pairs`: the real recorded replies in ``../shared/data``;
- :mod:`leanloop.traces.cli`: ``leanloop trace annotate|verdict``.
"""

from leanloop.lean.replies import parse_response
from leanloop.traces.annotate import annotate, annotate_reply, annotate_response
from leanloop.traces.parse import FeedbackBlock, Verdict, extract_blocks, strip_feedback, trace_verdict
from leanloop.traces.source import source_preservation

__all__ = [
    "annotate",
    "annotate_reply",
    "annotate_response",
    "parse_response",
    "FeedbackBlock",
    "Verdict",
    "extract_blocks",
    "source_preservation",
    "strip_feedback",
    "trace_verdict",
]
