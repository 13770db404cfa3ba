"""``python -m bench.lean_check`` (``make lean-check``): every Lean-side assumption of the project,
checked once on this machine (or on the stand-ins, saying so), in one report.

The items, what each checks and how to read the report: leanloop/lean/README.md, ``make lean-check``.
"""
