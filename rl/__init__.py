"""GRPO with hybrid Lean + learned rewards behind a hardened reward harness."""
