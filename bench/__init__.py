"""Benchmarks, one module per area, run as ``python -m bench.<name>`` (``make bench-*``).
They print ratios measured side by side in one run, on the real recorded data."""
