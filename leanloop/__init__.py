"""leanloop: the shared package (paths, artifacts, CLI, traces, metrics, training machinery)."""

__version__ = "0.1.0"
