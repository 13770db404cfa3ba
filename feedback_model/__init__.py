"""The feedback model ("Learning Lean Feedback", Sections 4.2-5.3): a causal LM that rewrites a
program with Lean's feedback written into it, and the evaluators built on it (greedy, self-consistency,
the one-token-gated cascade)."""
