"""The tree is formatted as pyproject.toml says (ruff format); `make format` applies it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_tree_is_formatted():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, "not formatted (run `make format`):\n" + result.stdout[-2000:]
