"""Prover SFT, candidate sampling, pass@k evaluation and the data flywheel."""
