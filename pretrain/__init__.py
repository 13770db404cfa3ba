"""Continued pretraining on Lean text: causal LM (Qwen3, packed) or masked LM (ModernBERT / MiniLM)."""
