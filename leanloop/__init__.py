"""leanloop: the shared package (paths, artifacts, CLI, the Lean library in `leanloop.lean`, traces, metrics, training machinery)."""

__version__ = "0.1.0"
